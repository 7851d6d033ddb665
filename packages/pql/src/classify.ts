/**
 * `classify`: which evaluation methods a definition qualifies for — batch
 * always; edge (`synchronous`) when its meaning matches one of the five query
 * types of decisions.md §1; streaming (`continuous`) by the same rules except
 * that a definition made only of inSegment references is not streaming.
 *
 * The meaning comes from classify/analyze.ts (event conditions in any
 * spelling, negation, profile attributes, inSegment references, ignore-year)
 * and classify/windows.ts (window arithmetic). This file applies the rules,
 * resolves referenced definitions and words the reasons. docs/eligibility.md
 * states every rule and decision.
 *
 * `classify` throws the parser's PqlError for a string that does not parse;
 * on any tree it returns a classification (it never evaluates anything).
 */
import type { Query } from "./ast.js";
import { analyze, type Analysis } from "./classify/analyze.js";
import { EDGE_WINDOW_LIMIT_MS, describeDuration, resolveBound, type Lookback } from "./classify/windows.js";
import { parse } from "./parser.js";

export type QueryType = "single-event" | "profile-only" | "single-event-with-profile" | "segment-of-segments" | "multiple-events";

export interface ClassifyOptions {
  /** The definition behind an inSegment id (its PQL text or tree), or undefined when no such definition exists. */
  resolveSegment?(id: string): string | Query | undefined;
  /** The id of the definition being classified, so that a reference back to it is reported as a cycle. */
  id?: string;
}

/** One event condition as classify sees it. */
export interface ClassifiedEvent {
  /** How it is written: "chain", "select", "exists", "forall", "filter", "aggregate". */
  spelling: string;
  /** Events it needs (COUNT(n), `count() >= n`). */
  count: number;
  negated: boolean;
  /** Longest time before now a qualifying event can have happened, in ms; null when unbounded. */
  windowMs: number | null;
  /** What the window is anchored on: now (a relative window), a fixed date, a profile date, or nothing. */
  anchor: "now" | "fixed-date" | "profile-date" | "none";
}

export interface Classification {
  batch: true;
  continuous: boolean;
  synchronous: boolean;
  queryType: QueryType | null;
  reasons: string[];
  events: ClassifiedEvent[];
  /** Literal ids of inSegment references, in source order, without duplicates. */
  segmentRefs: string[];
  ignoreYear: boolean;
  profileAttributes: boolean;
}

type RefState =
  | { status: "profile-only" }
  | { status: "not-profile-only" }
  | { status: "unknown" }
  | { status: "unchecked" }
  | { status: "invalid" }
  | { status: "cycle"; path: string[] };

export function classify(query: string | Query, options: ClassifyOptions = {}): Classification {
  const q = typeof query === "string" ? parse(query) : query;
  const resolver = new SegmentResolver(options);
  return decide(analyze(q), resolver, options.id ? [options.id] : []);
}

function decide(a: Analysis, resolver: SegmentResolver, stack: string[]): Classification {
  const reasons: string[] = [];
  const events = resolveEvents(a);
  const eventCount = events.reduce((n, e) => n + e.count, 0);
  const ids = [...new Set(a.segmentRefs.map((r) => r.id).filter((id): id is string => id !== null))];

  if (a.ignoreYear) {
    reasons.push(
      "the definition uses 'ignore year' on a date (getMonth/getDayOfMonth/currentMonth/currentDayOfMonth), which only batch evaluation supports",
    );
  }
  if (events.some((e) => e.negated)) {
    reasons.push("the definition requires an event not to happen (a negated event), which edge and streaming evaluation do not support");
  }
  if (a.unsupported.length > 0) {
    reasons.push(`the definition uses ${[...new Set(a.unsupported)].join(", ")}, which edge and streaming evaluation cannot check`);
  }
  windowReasons(events, reasons);

  // References: existence and cycles always matter; profile-only-ness only next to events.
  const states = new Map(ids.map((id) => [id, resolver.state(id, stack)]));
  if (a.segmentRefs.some((r) => r.id === null)) {
    reasons.push("it refers to an audience with an id that is not a fixed text, so the audience cannot be checked");
  }
  const unknown = ids.filter((id) => states.get(id)!.status === "unknown");
  if (unknown.length > 0) reasons.push(`it refers to ${audiences(unknown)} which ${unknown.length === 1 ? "does" : "do"} not exist`);
  const invalid = ids.filter((id) => states.get(id)!.status === "invalid");
  if (invalid.length > 0) reasons.push(`it refers to ${audiences(invalid)} whose expression cannot be read`);
  const cycle = ids.map((id) => states.get(id)!).find((s): s is Extract<RefState, { status: "cycle" }> => s.status === "cycle");
  if (cycle) reasons.push(`its audience references form a cycle: ${cycle.path.map((p) => `'${p}'`).join(" → ")}`);
  if (eventCount > 0) {
    const what = eventCount === 1 ? "an event" : "events";
    const notProfileOnly = ids.filter((id) => states.get(id)!.status === "not-profile-only");
    if (notProfileOnly.length > 0) {
      reasons.push(`it combines ${what} with ${audiences(notProfileOnly)} which ${notProfileOnly.length === 1 ? "is" : "are"} not profile-only`);
    }
    // Without a resolver the references cannot be shown to be profile-only (the exception needs proof).
    const unchecked = ids.filter((id) => states.get(id)!.status === "unchecked");
    if (unchecked.length > 0) {
      reasons.push(`it combines ${what} with ${audiences(unchecked)} which could not be checked to be profile-only`);
    }
  }

  const synchronous = reasons.length === 0;
  let queryType: QueryType | null = null;
  if (synchronous) {
    if (eventCount === 0) queryType = ids.length > 0 ? "segment-of-segments" : "profile-only";
    else if (eventCount === 1) queryType = a.profile || ids.length > 0 ? "single-event-with-profile" : "single-event";
    else queryType = "multiple-events";
  }
  const onlyReferences = synchronous && queryType === "segment-of-segments" && !a.profile;
  if (onlyReferences) {
    reasons.push("it is made only of audience references (inSegment), which streaming evaluation does not support (edge evaluation does)");
  }
  return {
    batch: true,
    continuous: synchronous && !onlyReferences,
    synchronous,
    queryType,
    reasons,
    events: events.map(({ spelling, count, negated, windowMs, anchor }) => ({ spelling, count, negated, windowMs, anchor })),
    segmentRefs: ids,
    ignoreYear: a.ignoreYear,
    profileAttributes: a.profile,
  };
}

/** Resolves each event's bound, following references to other events; a reference cycle is unbounded. */
function resolveEvents(a: Analysis): ClassifiedEvent[] {
  const memo = new Map<number, Lookback>();
  const visiting = new Set<number>();
  const lookback = (id: number): Lookback => {
    const known = memo.get(id);
    if (known) return known;
    if (visiting.has(id)) return { why: "none" };
    visiting.add(id);
    const r = resolveBound(a.events[id]!.bound, lookback);
    visiting.delete(id);
    memo.set(id, r);
    return r;
  };
  return a.events.map((e) => {
    const l = lookback(e.id);
    return {
      spelling: e.spelling,
      count: e.count,
      negated: e.negated,
      windowMs: "ms" in l ? l.ms : null,
      anchor: "ms" in l ? "now" : l.why,
    };
  });
}

function windowReasons(events: ClassifiedEvent[], reasons: string[]): void {
  const need = "edge and streaming evaluation need a window of less than 24 hours before now";
  if (events.some((e) => e.anchor === "none")) reasons.push(`an event has no time window; ${need}`);
  if (events.some((e) => e.anchor === "fixed-date")) reasons.push(`an event's time window is a fixed date, not relative to now; ${need}`);
  if (events.some((e) => e.anchor === "profile-date")) {
    reasons.push(`an event's time window is relative to a profile date, not to now; ${need}`);
  }
  const longest = Math.max(-1, ...events.map((e) => e.windowMs ?? -1));
  if (longest >= EDGE_WINDOW_LIMIT_MS) {
    reasons.push(`the event window is ${describeDuration(longest)}; edge and streaming evaluation need less than 24 hours`);
  }
}

function audiences(ids: string[]): string {
  return ids.length === 1 ? `the audience '${ids[0]}',` : `the audiences ${ids.map((i) => `'${i}'`).join(", ")},`;
}

/** Looks referenced definitions up once per classify call and decides whether each is profile-only. */
class SegmentResolver {
  private readonly memo = new Map<string, RefState>();

  constructor(private readonly options: ClassifyOptions) {}

  state(id: string, stack: string[]): RefState {
    if (stack.includes(id)) return { status: "cycle", path: [...stack.slice(stack.indexOf(id)), id] };
    const known = this.memo.get(id);
    if (known) return known;
    const s = this.compute(id, [...stack, id]);
    // A cycle seen from inside depends on the path taken: not memoised.
    if (s.status !== "cycle") this.memo.set(id, s);
    return s;
  }

  private compute(id: string, stack: string[]): RefState {
    if (!this.options.resolveSegment) return { status: "unchecked" };
    const def = this.options.resolveSegment(id);
    if (def === undefined) return { status: "unknown" };
    let q: Query;
    try {
      q = typeof def === "string" ? parse(def) : def;
    } catch {
      return { status: "invalid" };
    }
    const a = analyze(q);
    // "Profile-only" is about content: no event condition here or in anything it references.
    let profileOnly = a.events.length === 0 && a.unsupported.length === 0;
    for (const r of a.segmentRefs) {
      if (r.id === null) {
        profileOnly = false;
        continue;
      }
      const s = this.state(r.id, stack);
      if (s.status === "cycle") return s;
      if (s.status !== "profile-only") profileOnly = false;
    }
    return { status: profileOnly ? "profile-only" : "not-profile-only" };
  }
}
