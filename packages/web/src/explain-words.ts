/**
 * An explanation, an audience's members and an edit's impact in words: the
 * verdict sentence, identities, trace values, item counts and time bounds.
 * Pure (no DOM), so the wording is unit-tested; dates go through a formatter
 * the caller may replace.
 */
import { ApiFailure } from "./api/errors.js";
import type { ExplainedAttribute, Explanation, Identity, OccursBounds } from "./api/types.js";
import { formatCount, formatDateTime } from "./format.js";

type DateFormat = (t: number | string) => string;

/** Identity namespaces the check form suggests, as Platform writes their codes. */
export const COMMON_NAMESPACES = ["Email", "ECID", "Phone", "CRMID"] as const;

/** The server stores namespace codes in lower case; show the familiar spelling where there is one. */
export function namespaceLabel(ns: string): string {
  return COMMON_NAMESPACES.find((n) => n.toLowerCase() === ns.trim().toLowerCase()) ?? ns;
}

export function identityText(i: Identity): string {
  return `${namespaceLabel(i.namespace)} ${i.id}`;
}

/** The identity to check a member by: its Email when it has one, else the first. */
export function checkIdentity(ids: readonly Identity[]): Identity | undefined {
  return ids.find((i) => i.namespace.toLowerCase() === "email") ?? ids[0];
}

export interface Verdict {
  in: boolean;
  headline: string;
  detail: string;
}

export function verdictOf(x: Explanation, audienceName: string, fmt: DateFormat = formatDateTime): Verdict {
  const who = identityText({ namespace: x.entityIdNS, id: x.entityId });
  if (x.result) {
    const exits = x.exitsAt === null
      ? ""
      : ` With no new data it leaves on ${fmt(x.exitsAt)}, when its qualifying events fall out of the expression's time window.`;
    return { in: true, headline: `${who} is in “${audienceName}”.`, detail: `The expression holds for this profile now.${exits}` };
  }
  if (x.excludedByConsent) {
    return {
      in: false,
      headline: `${who} is out of “${audienceName}”.`,
      detail: "The expression holds, but the profile has opted out of data use and this audience excludes opted-out profiles.",
    };
  }
  return { in: false, headline: `${who} is out of “${audienceName}”.`, detail: "The expression does not hold for this profile now." };
}

/** What the stored membership says beside the result computed now, when the two differ. */
export function storedNote(x: Explanation): string | undefined {
  const stored = x.membership.status === "realized";
  if (stored === x.result) return undefined;
  if (x.membership.status === null) {
    return "No membership is stored yet: the audience has not been evaluated since this profile qualified. The next evaluation adds it.";
  }
  return `The stored status (${x.membership.status}) comes from the last evaluation; the profile's data has changed since, so the next evaluation changes it.`;
}

/** The stored membership in words. */
export function statusText(s: string | null): string {
  if (s === "realized") return "In (realized)";
  if (s === "exited") return "Out (exited)";
  return "Not a member (never qualified)";
}

/** The merge-policy rule that picked an attribute's value, in words. */
export function ruleText(a: Pick<ExplainedAttribute, "rule" | "rank">): string {
  switch (a.rule) {
    case "timestampOrdered": return "Newest fragment wins (timestamp ordered)";
    case "dataSetPrecedence": return typeof a.rank === "number" ? `Dataset precedence: dataset ${a.rank} in the order` : "Dataset precedence: dataset not in the order";
    case "identityGraph": return "Built from the identity graph";
    case "none": return "No fragment has a value";
    default: return a.rule;
  }
}

/** Where an attribute's value came from, in words (dataset, record, time). */
export function sourceText(a: Pick<ExplainedAttribute, "source">, fmt: DateFormat = formatDateTime): string {
  if (a.source === null) return "—";
  const parts = [`dataset ${a.source.datasetId}`];
  if (a.source.recordId !== undefined) parts.push(`record ${a.source.recordId}`);
  if (a.source.timestamp !== undefined) parts.push(`written ${fmt(a.source.timestamp)}`);
  return parts.join(" · ");
}

/** The sentence for a failed check: an unknown profile in words, anything else as the server said it. */
export function checkFailureText(err: unknown, namespace: string, id: string, sandboxName: string): string | undefined {
  if (err instanceof ApiFailure && err.status === 404 && /^Profile\b/.test(err.message)) {
    return `No profile with ${namespaceLabel(namespace)} ${id} in sandbox ${sandboxName}.`;
  }
  return undefined;
}

function isEvent(v: unknown): v is { _id: unknown; eventType: unknown; timestamp: unknown } {
  return typeof v === "object" && v !== null && "_id" in v && "timestamp" in v;
}

/** An event the trace names (explain sends events as _id, eventType and timestamp). */
export function eventText(v: unknown, fmt: DateFormat = formatDateTime): string | undefined {
  if (!isEvent(v)) return undefined;
  const type = typeof v.eventType === "string" ? v.eventType : "event";
  const at = typeof v.timestamp === "string" || typeof v.timestamp === "number" ? fmt(v.timestamp) : "no time";
  return `${type} · ${at} · ${String(v._id)}`;
}

const SHORT = 120;

function clip(s: string): string {
  return s.length > SHORT ? `${s.slice(0, SHORT - 1)}…` : s;
}

/** A traced value in one short line. */
export function valueText(v: unknown): string {
  if (v === null || v === undefined) return "no value";
  if (typeof v === "string") return clip(JSON.stringify(v));
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) {
    if (v.length > 0 && v.every(isEvent)) return `${formatCount(v.length)} event${v.length === 1 ? "" : "s"}`;
    return clip(`[${v.map((x) => valueText(x)).join(", ")}]`);
  }
  const o = v as Record<string, unknown>;
  if (typeof o["count"] === "number" && Array.isArray(o["first"]) && Object.keys(o).length === 2) {
    const first = o["first"];
    return first.length > 0 && first.every(isEvent) ? `${formatCount(o["count"])} events` : `${formatCount(o["count"])} items`;
  }
  if (isEvent(v)) return `event ${String(v._id)}`;
  return clip(JSON.stringify(v));
}

export function itemsText(items: { tested: number; held: number }): string {
  return `${formatCount(items.tested)} tested, ${formatCount(items.held)} held`;
}

/** The time bounds an `occurs` tested against, e.g. "from Nov 1, 2026, 10:00 (inclusive) to Nov 8, 2026, 10:00 (exclusive)". */
export function boundsText(b: OccursBounds, fmt: DateFormat = formatDateTime): string {
  if (b.empty) return "no instant can match";
  const lower = b.lower === undefined ? undefined : `${fmt(b.lower)} (${b.lowerInclusive ? "inclusive" : "exclusive"})`;
  const upper = b.upper === undefined ? undefined : `${fmt(b.upper)} (${b.upperInclusive ? "inclusive" : "exclusive"})`;
  let text = lower && upper ? `from ${lower} to ${upper}` : lower ? `from ${lower} on` : upper ? `until ${upper}` : "any time";
  if (b.exclude) text += `, except ${fmt(b.exclude.start)} to ${fmt(b.exclude.end)}`;
  return text;
}

/** "+3", "−2" or "no change" between two counts. */
export function changeText(before: number, after: number): string {
  const d = after - before;
  if (d === 0) return "no change";
  return d > 0 ? `+${formatCount(d)}` : `−${formatCount(-d)}`;
}
