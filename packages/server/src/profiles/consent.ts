// Opt-out detection (decisions §2): a profile whose XDM consents say "n" for
// marketing preference or for data collection is excluded from every evaluation
// of a definition with dataGovernancePolicy.excludeOptOut (the default).
import type { JsonObject } from "./types.js";
import { getPath } from "./xdm-object.js";

function isNo(v: unknown): boolean {
  // XDM consent values are "y"/"n" (plus "p", "dy", "dn" for some fields); compare case-insensitively.
  return typeof v === "string" && v.trim().toLowerCase() === "n";
}

export function isOptedOut(entity: JsonObject): boolean {
  return isNo(getPath(entity, "consents.marketing.preferred")) || isNo(getPath(entity, "consents.collect.val"));
}
