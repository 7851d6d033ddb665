/**
 * How an interact request evaluates the edge definitions of its sandbox
 * without running all of them (AEP allows 150 per sandbox) on every request.
 * Built once per definition set (the catalog's LiveSet), from each
 * definition's parsed query. Every definition falls in one of three kinds:
 *
 *  - **profile** — reads no event (`xEvent` nowhere) and no clock (`now`,
 *    `today`, relative periods, `occurs`, `currentMonth()`…): its result is a
 *    function of the location's profile view (attributes, memberships, opt-out)
 *    alone, so it is computed once per profile revision and cached with it
 *    (the store bumps the revision whenever attributes or memberships change).
 *  - **event** — can only be true when at least one of the events it is given
 *    exists (a chain over `xEvent` with a step that needs a match, an
 *    `exists … from xEvent`, or `and`/`or` combinations of those). It is given
 *    the events of the types its footprint maps (reverse-index.ts), so when the
 *    profile holds no event of those types it is false without being run. The
 *    request therefore runs only the event definitions indexed under the event
 *    types the profile holds (plus the "any type" ones when it holds events).
 *  - **always** — anything else (a clock outside event conditions, a negated
 *    event condition…): run on every request, as before.
 *
 * The results are exactly those of running every definition: a skipped event
 * definition is false, except a realized segment of segments (kept, as
 * `qualifies` does) — realized ones are found from the profile's memberships.
 * test/edge/evaluation-plan.test.ts checks this against the full loop.
 */
import { lookupBuiltin, parse, walk, type Expr, type Query } from "@segmentd/pql";
import type { DefinitionRecord, DefinitionRepository, TenantScope } from "../stores/types.js";
import type { LiveDefinition, LiveSet, PredicateContext } from "../streaming/definition-catalog.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import { eventsFor, footprintOf, groupEventsByType, type DefinitionFootprint } from "../streaming/reverse-index.js";

export type EdgeDefinitionKind = "profile" | "event" | "always";

/** Global functions whose value does not depend on the clock or the events. */
const CLOCK_FREE_CALLS = new Set(["insegment", "if", "mapentry", "date"]);
const CLOCK_CALLS = new Set(["currentmonth", "currentyear", "currentdayofmonth"]);

/** True when the query reads neither events nor the clock (its result depends on the profile view only). */
export function isProfileOnly(query: Query): boolean {
  let ok = true;
  walk(query, (n) => {
    if (!ok) return false;
    switch (n.type) {
      case "XEvent":
      case "TimeWord":
      case "RelPeriod":
      case "Occurs":
      case "Chain":
        ok = false;
        return false;
      case "Call": {
        const name = n.name.toLowerCase();
        if (CLOCK_CALLS.has(name) || !CLOCK_FREE_CALLS.has(name)) ok = false;
        return ok;
      }
      case "Method":
        // Built-in methods read their receiver and arguments only; anything unknown counts as unsafe.
        if (lookupBuiltin(n.name, "method") === undefined) ok = false;
        return ok;
      default:
        return true;
    }
  });
  return ok;
}

function isEventSource(e: Expr): boolean {
  return e.type === "XEvent" || (e.type === "Filter" && e.object.type === "XEvent");
}

/**
 * True when `e`, read as a predicate, can only be true if the event list it is
 * evaluated with is not empty. Errs towards false (then the definition is run).
 */
export function needsAnEvent(e: Expr): boolean {
  switch (e.type) {
    case "Chain":
      // The chain scans its source for each step in turn; a step needing one match fails on no events.
      return isEventSource(e.source) && e.steps.some((s) => (s.count ?? 1) >= 1);
    case "Quantifier":
      return e.quantifier === "exists" && e.bindings.some((b) => isEventSource(b.source));
    case "Binary":
      if (e.op === "and") return needsAnEvent(e.left) || needsAnEvent(e.right);
      if (e.op === "or") return needsAnEvent(e.left) && needsAnEvent(e.right);
      return false;
    default:
      return false;
  }
}

export function kindOf(d: LiveDefinition, query: Query | null): EdgeDefinitionKind {
  if (query === null) return "always";
  const types = d.footprint.eventTypes;
  if (types !== "any" && types.size === 0 && isProfileOnly(query)) return "profile";
  if (needsAnEvent(query.body)) return "event";
  return "always";
}

/** Per-profile-revision results of the profile definitions. */
interface ProfileResults {
  /** The plan that computed them (a profile's slot may hold another definition set's results). */
  plan: EdgePlan;
  revision: number;
  /** Indices of the profile definitions that qualify. */
  qualifying: number[];
  /** Indices of the profile definitions whose result differs from the membership the profile holds. */
  changed: number[];
  /** Indices of event definitions the profile holds as realized (they exit or stay when skipped). */
  realizedEvent: number[];
}

export interface EdgeDecision {
  /** Qualifying definitions, in the set's order. */
  qualifying: LiveDefinition[];
  /** Definitions whose result differs from the membership the profile holds, in the set's order. */
  changes: Array<{ definition: LiveDefinition; qualifies: boolean }>;
}

/**
 * The profile a decision is for, as far as the plan's cache goes: its revision (bumped
 * whenever attributes or memberships change) and a slot where the plan keeps its results for
 * that revision (EdgeProfile has both).
 */
export interface PlanCacheHolder {
  revision: number;
  planCache?: unknown;
}

function cachedResults(held: PlanCacheHolder, plan: EdgePlan): ProfileResults | undefined {
  const r = held.planCache as ProfileResults | undefined;
  return r !== undefined && r.plan === plan ? r : undefined;
}

export interface ProfileView {
  profile: Record<string, unknown>;
  ups: Record<string, MembershipEntry>;
}

const NO_EVENTS: Record<string, unknown>[] = [];

export class EdgePlan {
  readonly kinds: EdgeDefinitionKind[];
  private readonly profileIdx: number[] = [];
  private readonly alwaysIdx: number[] = [];
  /** Event definitions by lower-cased event type (the types their footprint maps). */
  private readonly eventByType = new Map<string, number[]>();
  /** Event definitions affected by events of any type. */
  private readonly eventAnyType: number[] = [];
  private readonly indexOf = new Map<string, number>();
  /** Definitions that profile definitions read through inSegment (a change to one of them invalidates the cached results). */
  private readonly profileRefs = new Set<string>();
  /** Request stamp per definition: which event definitions this request has already run. */
  private readonly seen: Uint32Array;
  private stamp = 0;
  /** Stamp per definition: realized in the profile profileResults is computing (see there). */
  private readonly realized: Uint32Array;
  private realizedStamp = 0;
  /** Scratch list of eventsOf. */
  private readonly picked: Record<string, unknown>[] = [];
  /** Profile results of a location that does not hold the profile (the view is always the same). */
  private unknownProfile: ProfileResults | null = null;

  constructor(
    readonly set: LiveSet,
    queries: ReadonlyMap<string, Query>,
  ) {
    const defs = set.definitions;
    this.seen = new Uint32Array(defs.length);
    this.realized = new Uint32Array(defs.length);
    this.kinds = defs.map((d, i) => {
      this.indexOf.set(d.id, i);
      const kind = kindOf(d, queries.get(d.id) ?? null);
      if (kind === "profile") {
        this.profileIdx.push(i);
        for (const ref of d.footprint.segmentRefs) this.profileRefs.add(ref);
      }
      else if (kind === "always") this.alwaysIdx.push(i);
      else {
        const types = d.footprint.eventTypes;
        if (types === "any") this.eventAnyType.push(i);
        else {
          for (const t of types) {
            const list = this.eventByType.get(t);
            if (list) list.push(i);
            else this.eventByType.set(t, [i]);
          }
        }
      }
      return kind;
    });
  }

  /**
   * The decision for a profile (`held` is the location's entry, the cache key;
   * null when the location does not hold it) and its events, the incoming one
   * included, at `now`.
   */
  decide(held: PlanCacheHolder | null, view: ProfileView, optedOut: boolean, events: readonly Record<string, unknown>[], now: number): EdgeDecision {
    const defs = this.set.definitions;
    const ups = view.ups;
    const fixed = this.profileResults(held, view, optedOut, now);
    const qualifying: number[] = fixed.qualifying.slice();
    const changed: number[] = fixed.changed.slice();
    const stamp = this.nextStamp();
    const out: Decision = { qualifying, changed, ups, optedOut, pc: { profile: view.profile, events: NO_EVENTS, now } };

    // Event definitions indexed under the types the profile holds, each once.
    const grouped = groupEventsByType(events);
    if (events.length > 0) {
      for (const t of grouped.keys()) {
        const list = this.eventByType.get(t);
        if (list === undefined) continue;
        for (const i of list) {
          if (this.seen[i] === stamp) continue;
          this.seen[i] = stamp;
          run(defs[i]!, i, this.eventsOf(defs[i]!.footprint, events, grouped), out);
        }
      }
      for (const i of this.eventAnyType) {
        if (this.seen[i] === stamp) continue;
        this.seen[i] = stamp;
        run(defs[i]!, i, events, out);
      }
    }
    // Event definitions not run have no event to see: false, unless a realized segment of segments.
    for (const i of fixed.realizedEvent) {
      if (this.seen[i] === stamp) continue;
      const d = defs[i]!;
      if (d.excludeOptOut && optedOut) changed.push(i);
      else if (d.queryType === "segment-of-segments") qualifying.push(i);
      else changed.push(i);
    }
    // Anything else runs on every request, with the events its footprint maps (as the full loop did).
    for (const i of this.alwaysIdx) run(defs[i]!, i, this.eventsOf(defs[i]!.footprint, events, grouped), out);

    sortSmall(qualifying);
    sortSmall(changed);
    return {
      qualifying: qualifying.map((i) => defs[i]!),
      changes: changed.map((i) => ({ definition: defs[i]!, qualifies: !(ups[defs[i]!.id]?.status === "realized") })),
    };
  }

  /**
   * The location applied this request's own changes to `held` (one revision bump, from
   * `revisionBefore`): keep its cached profile results instead of recomputing them on the next
   * request. They stay valid when no profile definition reads (through inSegment) a membership
   * that changed: attributes and opt-out did not change, and a changed profile definition's new
   * membership is its cached result. Any other revision change (a projection in between) drops them.
   */
  carryForward(held: PlanCacheHolder, revisionBefore: number, changes: ReadonlyArray<{ definition: LiveDefinition; qualifies: boolean }>): void {
    const r = cachedResults(held, this);
    if (r === undefined || r.revision !== revisionBefore || held.revision !== revisionBefore + 1) return;
    // Runs on every request that changes a membership: plain loops over the (few) changes, no sets.
    for (const c of changes) if (this.profileRefs.has(c.definition.id)) return;
    // The results are updated in place: they belong to this profile's slot alone (decide copies
    // the lists it extends), and the lists hold no duplicates.
    const { changed, realizedEvent } = r;
    for (const c of changes) {
      const i = this.indexOf.get(c.definition.id);
      if (i === undefined) continue;
      // A change of its own: the membership now holds the cached result.
      const at = changed.indexOf(i);
      if (at >= 0) changed.splice(at, 1);
      if (this.kinds[i] !== "event") continue;
      const was = realizedEvent.indexOf(i);
      if (c.qualifies && was < 0) realizedEvent.push(i);
      else if (!c.qualifies && was >= 0) realizedEvent.splice(was, 1);
    }
    r.revision = held.revision;
  }

  /**
   * `eventsFor`, without a new array per definition run when the footprint maps several types
   * (the "multiple events" definitions): all the events when every one is of those types, else
   * the picked ones in a scratch array, which the next call reuses. A predicate reads its
   * events during its call only.
   */
  private eventsOf(footprint: DefinitionFootprint, all: readonly Record<string, unknown>[], byType: Map<string, Record<string, unknown>[]>): readonly Record<string, unknown>[] {
    const types = footprint.eventTypes;
    if (types === "any" || types.size < 2) return eventsFor(footprint, all, byType);
    let total = 0;
    for (const t of types) total += byType.get(t)?.length ?? 0;
    if (total === 0) return NO_EVENTS;
    if (total === all.length) return all;
    const picked = this.picked;
    picked.length = 0;
    for (const e of all) {
      const t = e["eventType"];
      if (types.has(typeof t === "string" ? t.toLowerCase() : "")) picked.push(e);
    }
    return picked;
  }

  private nextRealizedStamp(): number {
    if (this.realizedStamp === 0xffffffff) {
      this.realized.fill(0);
      this.realizedStamp = 0;
    }
    return ++this.realizedStamp;
  }

  private nextStamp(): number {
    if (this.stamp === 0xffffffff) {
      this.seen.fill(0);
      this.stamp = 0;
    }
    return ++this.stamp;
  }

  private profileResults(held: PlanCacheHolder | null, view: ProfileView, optedOut: boolean, now: number): ProfileResults {
    const hit = held === null ? this.unknownProfile : cachedResults(held, this);
    if (hit !== null && hit !== undefined && (held === null || hit.revision === held.revision)) return hit;
    const defs = this.set.definitions;
    const r: ProfileResults = { plan: this, revision: held?.revision ?? 0, qualifying: [], changed: [], realizedEvent: [] };
    // One pass over the memberships the profile holds (read in place: Object.entries would
    // allocate a pair per membership) marks the realized definitions of this set, so that the
    // profile definitions below read a mark instead of looking their id up in the memberships.
    const mark = this.nextRealizedStamp();
    const realized = this.realized;
    const ups = view.ups;
    for (const id in ups) {
      if (!Object.hasOwn(ups, id) || ups[id]!.status !== "realized") continue;
      const i = this.indexOf.get(id);
      if (i === undefined) continue;
      realized[i] = mark;
      if (this.kinds[i] === "event") r.realizedEvent.push(i);
    }
    const pc: PredicateContext = { profile: view.profile, events: NO_EVENTS, now };
    for (const i of this.profileIdx) {
      const d = defs[i]!;
      const was = realized[i] === mark;
      // Profile definitions read no clock: `now` cannot change their result.
      const q = qualifiesWith(d, pc, optedOut, was);
      if (q) r.qualifying.push(i);
      if (q !== was) r.changed.push(i);
    }
    if (held === null) this.unknownProfile = r;
    else held.planCache = r;
    return r;
  }
}

/** The running decision of one request (a plain object: no closure per request on the hot path). */
interface Decision {
  qualifying: number[];
  changed: number[];
  ups: Record<string, MembershipEntry>;
  optedOut: boolean;
  /** The predicates' context, one per request: `events` is set for each definition run. */
  pc: PredicateContext;
}

function run(d: LiveDefinition, i: number, events: readonly Record<string, unknown>[], out: Decision): void {
  const was = out.ups[d.id]?.status === "realized";
  out.pc.events = events;
  const q = qualifiesWith(d, out.pc, out.optedOut, was);
  if (q) out.qualifying.push(i);
  if (q !== was) out.changed.push(i);
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

function sameFootprint(a: DefinitionFootprint, b: DefinitionFootprint | undefined): boolean {
  if (b === undefined) return false;
  const typesEqual = a.eventTypes === "any" || b.eventTypes === "any" ? a.eventTypes === b.eventTypes : sameSet(a.eventTypes, b.eventTypes);
  return typesEqual && sameSet(a.fieldNames, b.fieldNames) && sameSet(a.segmentRefs, b.segmentRefs);
}

/**
 * Sorts a short list of definition indices in place (insertion sort): a request's lists hold
 * a handful, mostly in order already, and Array.prototype.sort with a comparator allocates a
 * work copy on every call (≈ 1 KB per request, measured with the sampling heap profiler).
 */
function sortSmall(a: number[]): void {
  for (let i = 1; i < a.length; i++) {
    const x = a[i]!;
    let j = i - 1;
    while (j >= 0 && a[j]! > x) {
      a[j + 1] = a[j]!;
      j--;
    }
    a[j + 1] = x;
  }
}

/** One definition's result for the profile, as the edge decides it. */
export function qualifies(d: LiveDefinition, profile: Record<string, unknown>, events: readonly Record<string, unknown>[], now: number, optedOut: boolean, was: boolean): boolean {
  return qualifiesWith(d, { profile, events, now }, optedOut, was);
}

/**
 * `qualifies` with a context the caller reuses across the definitions it runs (a request runs
 * dozens: one object each was most of what the evaluation allocated). Predicates read their
 * context during the call only.
 */
function qualifiesWith(d: LiveDefinition, pc: PredicateContext, optedOut: boolean, was: boolean): boolean {
  if (d.excludeOptOut && optedOut) return false;
  // Segment of segments: disqualified only by the 24-hourly pass, never by a request.
  if (was && d.queryType === "segment-of-segments") return true;
  return d.predicate(pc);
}

/** Builds (once per definition set) the plans of the sets it is given; reads the definitions' queries. */
export class EdgePlans {
  private readonly plans = new WeakMap<LiveSet, Promise<EdgePlan>>();

  constructor(private readonly definitions: Pick<DefinitionRepository, "getMany">) {}

  /** The plan of `set`, the definition set of the sandbox `scope`. */
  get(set: LiveSet, scope: TenantScope): Promise<EdgePlan> {
    let p = this.plans.get(set);
    if (p === undefined) {
      p = this.build(set, scope);
      // A failed read must not stick: the next request retries.
      p.catch(() => this.plans.delete(set));
      this.plans.set(set, p);
    }
    return p;
  }

  private async build(set: LiveSet, scope: TenantScope): Promise<EdgePlan> {
    const records = set.definitions.length === 0 ? new Map<string, DefinitionRecord>() : await this.definitions.getMany(scope, set.definitions.map((d) => d.id));
    const queries = new Map<string, Query>();
    const live = new Map(set.definitions.map((d) => [d.id, d]));
    for (const [id, r] of records) {
      try {
        const q = parse(r.canonicalText);
        // A definition changed since the set was loaded (the catalog reloads on the bus event):
        // its query may not be the predicate's; such a definition is run on every request.
        if (sameFootprint(footprintOf(q), live.get(id)?.footprint)) queries.set(id, q);
      } catch {
        // Unparsable here (cannot happen for a live definition): it is run on every request.
      }
    }
    return new EdgePlan(set, queries);
  }
}
