/**
 * What a definition can be affected by, read from its AST, so that an incoming
 * event or profile record re-evaluates only the definitions it can change
 * instead of every definition of the sandbox.
 *
 * The index must never miss a definition (a miss is a wrong membership), so
 * every rule errs towards "may affect":
 * - event types: for every event condition (chain steps, `xEvent[...]`
 *   filters, select/exists/forall/aggregate bindings over xEvent) the set of
 *   `eventType` values an event must have to satisfy it; a condition that does
 *   not pin the type, or any other use of `xEvent`, makes the definition a
 *   wildcard (affected by every event). Types are lower-cased because
 *   `equals(x, false)` compares case-insensitively.
 * - profile fields: every field and member name used anywhere in the query; a
 *   profile record affects the definition when one of its top-level keys is
 *   among them (a superset: names inside event conditions also count).
 */
import { walk, type Expr, type Query } from "@segmentd/pql";

export interface DefinitionFootprint {
  /** Lower-cased event types that can affect the definition; "any" when not pinned; empty when it has no event condition. */
  eventTypes: Set<string> | "any";
  /** Field and member names the query reads (a superset of its top-level profile fields). */
  fieldNames: Set<string>;
  /** Ids referenced through inSegment(...). */
  segmentRefs: Set<string>;
}

function isXEvent(e: Expr): boolean {
  return e.type === "XEvent";
}

function isEventTypePath(e: Expr): boolean {
  return (e.type === "Field" && e.name === "eventType") || (e.type === "Member" && e.name === "eventType");
}

function stringLiteral(e: Expr): string | null {
  return e.type === "Literal" && e.kind === "string" && typeof e.value === "string" ? e.value.toLowerCase() : null;
}

/** Event types an event must have for `e` to hold for it; null when `e` does not pin the type. */
export function requiredEventTypes(e: Expr): Set<string> | null {
  switch (e.type) {
    case "Binary": {
      if (e.op === "and") {
        const l = requiredEventTypes(e.left);
        const r = requiredEventTypes(e.right);
        if (l && r) return new Set([...l].filter((t) => r.has(t)));
        return l ?? r;
      }
      if (e.op === "or") {
        const l = requiredEventTypes(e.left);
        const r = requiredEventTypes(e.right);
        return l && r ? new Set([...l, ...r]) : null;
      }
      if (e.op === "=") {
        const lit = isEventTypePath(e.left) ? stringLiteral(e.right) : isEventTypePath(e.right) ? stringLiteral(e.left) : null;
        return lit === null ? null : new Set([lit]);
      }
      if (e.op === "in" && isEventTypePath(e.left) && e.right.type === "List") {
        const values = e.right.elements.map(stringLiteral);
        return values.every((v): v is string => v !== null) ? new Set(values) : null;
      }
      return null;
    }
    case "Method": {
      if (e.name === "equals" && isEventTypePath(e.receiver) && e.args[0]) {
        const lit = stringLiteral(e.args[0]);
        return lit === null ? null : new Set([lit]);
      }
      return null;
    }
    case "Occurs":
      return requiredEventTypes(e.subject);
    default:
      return null;
  }
}

export function footprintOf(query: Query): DefinitionFootprint {
  const fieldNames = new Set<string>();
  const segmentRefs = new Set<string>();
  let types: Set<string> | "any" = new Set();
  let xEventNodes = 0;
  let understood = 0;
  const addCondition = (cond: Expr | undefined): void => {
    const t = cond ? requiredEventTypes(cond) : null;
    if (t === null) types = "any";
    else if (types !== "any") for (const x of t) types.add(x);
  };
  walk(query, (n) => {
    switch (n.type) {
      case "XEvent":
        xEventNodes++;
        break;
      case "Field":
      case "Member":
        fieldNames.add(n.name);
        break;
      case "Call":
        if (n.name === "inSegment" && n.args[0]?.type === "Literal" && typeof n.args[0].value === "string") segmentRefs.add(n.args[0].value);
        break;
      case "Chain":
        if (isXEvent(n.source)) {
          understood++;
          for (const s of n.steps) addCondition(s.what);
        }
        break;
      case "Filter":
        if (isXEvent(n.object)) {
          understood++;
          addCondition(n.condition);
        }
        break;
      case "Select":
      case "Quantifier":
      case "AggregateOver":
        for (const b of n.bindings) {
          if (isXEvent(b.source)) {
            understood++;
            addCondition(b.condition);
          }
        }
        break;
      default:
        break;
    }
  });
  // Any xEvent use not recognised above (e.g. `xEvent.count()`) can be affected by any event.
  if (xEventNodes > understood) types = "any";
  return { eventTypes: types, fieldNames, segmentRefs };
}

/** Definition ids by what can affect them. Rebuilt whenever the definition set changes. */
export class ReverseIndex<D extends { id: string; footprint: DefinitionFootprint }> {
  private readonly byEventType = new Map<string, D[]>();
  private readonly anyEvent: D[] = [];
  private readonly byField = new Map<string, D[]>();
  private readonly byRef = new Map<string, D[]>();
  /** True when some definition references another through inSegment (a change can cascade). */
  readonly hasDependents: boolean;

  constructor(readonly definitions: readonly D[]) {
    for (const d of definitions) {
      const f = d.footprint;
      if (f.eventTypes === "any") this.anyEvent.push(d);
      else for (const t of f.eventTypes) push(this.byEventType, t, d);
      for (const name of f.fieldNames) push(this.byField, name, d);
      for (const id of f.segmentRefs) push(this.byRef, id, d);
    }
    // Each mapped type's list already holds the "any event" definitions (computed once here, not per event).
    if (this.anyEvent.length > 0) {
      for (const [t, pinned] of this.byEventType) this.byEventType.set(t, [...new Set([...pinned, ...this.anyEvent])]);
    }
    this.hasDependents = this.byRef.size > 0;
  }

  /** Definitions an event of this type can affect (a shared array: do not modify). */
  forEvent(eventType: string | null): D[] {
    if (eventType === null) return this.anyEvent;
    return this.byEventType.get(eventType.toLowerCase()) ?? this.anyEvent;
  }

  /** Definitions a profile record with these top-level keys can affect. */
  forProfileKeys(keys: Iterable<string>): D[] {
    const out = new Set<D>();
    for (const k of keys) for (const d of this.byField.get(k) ?? []) out.add(d);
    return [...out];
  }

  /** Definitions that reference one of these definitions through inSegment. */
  dependentsOf(ids: Iterable<string>): D[] {
    const out = new Set<D>();
    for (const id of ids) for (const d of this.byRef.get(id) ?? []) out.add(d);
    return [...out];
  }
}

function push<D>(m: Map<string, D[]>, k: string, d: D): void {
  const list = m.get(k);
  if (list) list.push(d);
  else m.set(k, [d]);
}

/** Event bodies grouped by lower-cased eventType (the key "" holds events without a string type). */
export function groupEventsByType(events: readonly Record<string, unknown>[]): Map<string, Record<string, unknown>[]> {
  const m = new Map<string, Record<string, unknown>[]>();
  for (const e of events) {
    const t = e["eventType"];
    const k = typeof t === "string" ? t.toLowerCase() : "";
    const list = m.get(k);
    if (list) list.push(e);
    else m.set(k, [e]);
  }
  return m;
}

const NO_EVENTS: Record<string, unknown>[] = [];

/**
 * The events a definition needs to see. An event whose type the footprint
 * does not map to the definition never changes its result (the index's
 * guarantee, checked by a property test), so evaluating on the mapped events
 * only gives the same answer at a fraction of the cost: time values are
 * parsed per event and per definition. Time order is kept for chains.
 */
export function eventsFor(footprint: DefinitionFootprint, all: readonly Record<string, unknown>[], byType: Map<string, Record<string, unknown>[]>): readonly Record<string, unknown>[] {
  const types = footprint.eventTypes;
  if (types === "any") return all;
  if (types.size === 0) return NO_EVENTS;
  if (types.size === 1) {
    for (const t of types) return byType.get(t) ?? NO_EVENTS;
  }
  // Several types: one pass over all events keeps their (time) order without a sort.
  let total = 0;
  for (const t of types) total += byType.get(t)?.length ?? 0;
  if (total === 0) return NO_EVENTS;
  const picked: Record<string, unknown>[] = [];
  for (const e of all) {
    const t = e["eventType"];
    if (types.has(typeof t === "string" ? t.toLowerCase() : "")) picked.push(e);
  }
  return picked;
}
