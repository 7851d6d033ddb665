/**
 * How the streaming engine groups its live definitions and what each reads of a profile's
 * state: one group per merge policy (each has its own merged view), a group's candidates, the
 * events of a definition's mapped types, and how long a state's events are kept.
 */
import type { LiveDefinition, LiveSet } from "./definition-catalog.js";
import { allEventBodies, eventBodiesOfType, eventBodiesOfTypes, type ProfileState } from "./profile-state.js";
import type { DefinitionFootprint } from "./reverse-index.js";

const DAY_MS = 24 * 60 * 60 * 1000;

export function policyKey(d: LiveDefinition): string {
  return d.policy.id ?? "none";
}

export const NO_EVENTS: Record<string, unknown>[] = [];

/**
 * The events of a state a definition needs to see (see `eventsFor` in
 * reverse-index.ts): only the events of its mapped types, in time order.
 */
export function eventsOf(footprint: DefinitionFootprint, state: ProfileState): readonly Record<string, unknown>[] {
  const types = footprint.eventTypes;
  if (types === "any") return allEventBodies(state);
  if (types.size === 0) return NO_EVENTS;
  if (types.size === 1) {
    for (const t of types) return eventBodiesOfType(state, t);
  }
  return eventBodiesOfTypes(state, types);
}

/** The candidates that `group` (one merge policy's definitions) evaluates. */
export function candidatesOf(groups: readonly LiveDefinition[][], group: readonly LiveDefinition[], candidates: readonly LiveDefinition[]): readonly LiveDefinition[] {
  return groups.length === 1 ? candidates : candidates.filter((d) => policyKey(d) === policyKey(group[0]!));
}

export function retentionOf(set: LiveSet): number {
  // Streaming windows are shorter than a day (decisions §1); keep a day at least.
  return Math.max(DAY_MS, set.maxWindowMs) + 60 * 60 * 1000;
}

const groupCache = new WeakMap<LiveSet, LiveDefinition[][]>();

/** Definitions by merge policy (each policy has its own merged view of a profile); computed once per set. */
export function policyGroups(set: LiveSet): LiveDefinition[][] {
  const cached = groupCache.get(set);
  if (cached) return cached;
  const m = new Map<string, LiveDefinition[]>();
  for (const d of set.definitions) {
    const k = policyKey(d);
    const g = m.get(k);
    if (g) g.push(d);
    else m.set(k, [d]);
  }
  const groups = [...m.values()];
  groupCache.set(set, groups);
  return groups;
}
