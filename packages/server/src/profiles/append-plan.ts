// Turns a batch of validated records into the writes a store must make, given
// what the store already holds for the batch's identities and fragments. Shared
// by the embedded and PostgreSQL stores so both stitch and merge identically;
// pure, so it is tested without a database.
import { GraphWorkspace, finalIdResolver, type RefusedLink, type WorkspaceOutcome } from "./identity-graph.js";
import type { Identity, JsonObject, ValidRecord } from "./types.js";
import { identityKey } from "./validate.js";
import { deepMerge } from "./xdm-object.js";

export interface LoadedState {
  /** Graph id of every stored identity of the batch, by identityKey. */
  graphs: Map<string, number>;
  /**
   * Identity count of those graphs: at least of the graphs of identities that appear in a record
   * with other identities (the only ones stitching can grow; see GraphWorkspace).
   */
  sizes: Map<number, number>;
  /** Stored fragment of this dataset per primary identityKey. */
  fragments: Map<string, { timestamp: number; body: JsonObject }>;
}

export interface FragmentWrite {
  primary: Identity;
  graph: number;
  timestamp: number;
  body: JsonObject;
}

export interface EventWrite {
  eventId: string;
  primary: Identity;
  graph: number;
  timestamp: number;
  /** The event as JSON text (events are stored as sent, never merged). */
  json: string;
  index: number;
}

export interface RefusedLinkReport {
  index: number;
  identity: Identity;
  code: string;
  message: string;
}

export interface AppendPlan {
  outcome: WorkspaceOutcome;
  /** Call after allocating ids for outcome.created; returns the writes with final ids. */
  finalize(allocated: readonly number[]): FinalWrites;
}

export interface FinalWrites {
  assigned: Array<{ identity: Identity; graph: number }>;
  merges: Array<{ from: number; into: number }>;
  /** Final size of every graph whose size changed (new graphs included). */
  sizes: Map<number, number>;
  createdIds: number[];
  fragments: FragmentWrite[];
  events: EventWrite[];
  refused: RefusedLinkReport[];
  touchedGraphs: number[];
  /** The final graph of each record, in the order of the records planned. */
  recordGraphs: Float64Array;
}

/** Every identity whose stored graph the store must load before planning. */
export function identitiesOf(records: readonly ValidRecord[]): Identity[] {
  const seen = new Map<string, Identity>();
  for (const r of records) for (const i of r.identities) seen.set(identityKey(i), i);
  return [...seen.values()];
}

/**
 * Stored graphs whose size planning needs (`loaded.graphs` filled): those of the identities of
 * records that carry more than one identity. A record with a single identity links nothing, so
 * an event batch (one identity per event) needs no sizes at all.
 */
export function graphsToSize(records: readonly ValidRecord[], graphs: ReadonlyMap<string, number>): number[] {
  const out = new Set<number>();
  for (const r of records) {
    if (r.identities.length < 2) continue;
    for (const i of r.identities) {
      const g = graphs.get(identityKey(i));
      if (g !== undefined) out.add(g);
    }
  }
  return [...out];
}

/** Combines a stored fragment with a new record: the newer one wins per attribute. */
export function mergeFragment(prev: { timestamp: number; body: JsonObject } | undefined, next: { timestamp: number; body: JsonObject }):
  { timestamp: number; body: JsonObject } {
  if (prev === undefined) return next;
  if (next.timestamp >= prev.timestamp) return { timestamp: next.timestamp, body: deepMerge(prev.body, next.body) };
  // A late record older than what is stored only fills gaps.
  return { timestamp: prev.timestamp, body: deepMerge(next.body, prev.body) };
}

export function planAppend(records: readonly ValidRecord[], loaded: LoadedState, cap: number, ingestedAt: number): AppendPlan {
  const ws = new GraphWorkspace(loaded.graphs, loaded.sizes, cap);
  const perRecord: Array<{ record: ValidRecord; graph: number; refused: RefusedLink[] }> = [];
  for (const record of records) {
    const { graph, refused } = ws.stitch(record.identities);
    perRecord.push({ record, graph, refused });
  }
  const outcome = ws.outcome();
  return {
    outcome,
    finalize(allocated) {
      // Every record is stitched by now, so fin() gives each graph its final id at once.
      const fin = finalIdResolver(ws, outcome, allocated);
      const fragments = new Map<string, FragmentWrite>();
      const events: EventWrite[] = [];
      const refused: RefusedLinkReport[] = [];
      const touched = new Set<number>();
      const recordGraphs = new Float64Array(perRecord.length);
      for (let n = 0; n < perRecord.length; n++) {
        const { record, graph, refused: rs } = perRecord[n]!;
        const g = fin(graph);
        recordGraphs[n] = g;
        touched.add(g);
        for (const r of rs) refused.push({ index: record.index, identity: r.identity, code: r.code, message: r.message });
        const timestamp = record.timestamp ?? ingestedAt;
        if (record.kind === "experienceevent") {
          events.push({ eventId: record.eventId!, primary: record.primary, graph: g, timestamp, json: record.json, index: record.index });
          continue;
        }
        const k = identityKey(record.primary);
        const prev = fragments.get(k) ?? loaded.fragments.get(k);
        const merged = mergeFragment(prev, { timestamp, body: record.body });
        fragments.set(k, { primary: record.primary, graph: g, ...merged });
      }
      const sizes = new Map<number, number>();
      for (const [g, s] of outcome.sizes) {
        const f = fin(g);
        sizes.set(f, s);
        touched.add(f);
      }
      // Every stored graph the batch mentions counts as touched, as every graph the batch created.
      for (const g of loaded.graphs.values()) touched.add(fin(g));
      return {
        assigned: outcome.assigned.map((a) => ({ identity: a.identity, graph: fin(a.graph) })),
        merges: outcome.merges.map((m) => ({ from: m.from, into: fin(m.into) })),
        sizes,
        createdIds: outcome.created.map((g) => fin(g)),
        fragments: [...fragments.values()],
        events,
        refused,
        // A typed array sorts numbers without a comparator call per comparison.
        touchedGraphs: Array.from(Float64Array.from(touched).sort()),
        recordGraphs,
      };
    },
  };
}
