/**
 * The edge engine honours only requests that carry exactly one identity marked
 * primary (spec: "What the service does"). Unlike streaming ingestion, which
 * falls back to the first identity when none is marked, the edge refuses
 * both zero and several primaries: it cannot know which profile to look up.
 */
import { ApiError } from "../services/errors.js";
import type { Identity } from "../profiles/types.js";
import { normalizeNamespace } from "../profiles/validate.js";
import { EdgeErrorCodes } from "./errors.js";

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The one primary identity of an identityMap; throws a 400 ApiError otherwise. */
export function primaryIdentityOf(identityMap: unknown): Identity {
  if (!isObject(identityMap)) {
    throw new ApiError(400, EdgeErrorCodes.primaryIdentity, "event.xdm.identityMap is required and must hold exactly one identity marked primary");
  }
  const primaries: Identity[] = [];
  // Read in place (Object.entries would allocate a pair per namespace on every request).
  for (const ns in identityMap) {
    if (!Object.hasOwn(identityMap, ns)) continue;
    const entries = identityMap[ns];
    if (!Array.isArray(entries)) continue;
    for (const e of entries) {
      if (isObject(e) && e["primary"] === true && typeof e["id"] === "string" && e["id"] !== "") {
        primaries.push({ namespace: normalizeNamespace(ns), id: e["id"] });
      }
    }
  }
  if (primaries.length !== 1) {
    const found = primaries.length === 0 ? "none" : `${primaries.length} (${primaries.map((p) => p.namespace).join(", ")})`;
    throw new ApiError(
      400,
      EdgeErrorCodes.primaryIdentity,
      `The request must carry exactly one identity marked primary in event.xdm.identityMap; found ${found}`,
    );
  }
  return primaries[0]!;
}
