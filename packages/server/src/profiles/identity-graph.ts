// Identity stitching: identities that appear together in one record join one
// profile (a private identity graph). Implemented as union-find over profile ids
// inside a workspace that covers one ingestion batch: the store loads the graph
// membership of the batch's identities, the workspace decides every link in
// memory, and the store writes the outcome in the same transaction as the records.
//
// Guardrail (AEP: 50 identities per graph, configurable): a link that would make a
// graph larger than the cap is REFUSED, never partially applied. If the identity
// already belongs to another graph, the two graphs stay apart; if it belongs to no
// graph yet, it stays unlinked (not stored in any graph). The record itself is still
// stored under its primary identity, and each refusal is reported with its reason so
// the batch status can show it. Refusing (rather than evicting old identities) keeps
// existing profiles and their memberships stable.
//
// Stable ids: when two graphs merge, the older one (smaller id) survives; graphs
// created in this batch get temporary negative ids until the store allocates real
// ones, in creation order, so the outcome does not depend on the store.
import type { Identity } from "./types.js";
import { identityKey } from "./validate.js";

export const GRAPH_LIMIT_CODE = "IDENTITY_GRAPH_LIMIT";

export interface RefusedLink {
  identity: Identity;
  /** Final profile id of the graph the identity would have joined (resolve with finalId). */
  graph: number;
  /** Graph the identity already belongs to, if any. */
  otherGraph: number | null;
  code: typeof GRAPH_LIMIT_CODE;
  message: string;
}

export interface StitchResult {
  /** Graph of the record's primary identity (temporary id while the batch is open). */
  graph: number;
  refused: RefusedLink[];
}

export interface WorkspaceOutcome {
  /** Identities that had no graph before the batch, with their graph. */
  assigned: Array<{ identity: Identity; graph: number }>;
  /** Existing graphs absorbed into another one (`from` disappears). */
  merges: Array<{ from: number; into: number }>;
  /** Temporary ids of graphs created in this batch that survive, in creation order. */
  created: number[];
  /** Size of every graph whose size the batch changed (created, grown or merged), by root id. */
  sizes: Map<number, number>;
}

export class GraphWorkspace {
  private readonly graphOf = new Map<string, number>();
  private readonly parent = new Map<number, number>();
  private readonly sizeOf = new Map<number, number>();
  private readonly newIdentities = new Map<string, Identity>();
  private readonly createdOrder: number[] = [];
  /** Graphs whose size changed (may include graphs merged away since; outcome() keeps the roots). */
  private readonly grown = new Set<number>();
  private nextTemp = -1;

  /**
   * @param existing graph id of every already-stored identity the batch mentions
   * @param sizes current identity count of those graphs; needed only for the graphs of identities
   *   that appear in a record with other identities (a lone identity links nothing), and asking
   *   for one that was not given throws rather than guess
   * @param cap identities per graph
   */
  constructor(existing: ReadonlyMap<string, number>, sizes: ReadonlyMap<number, number>, private readonly cap: number) {
    for (const [k, g] of existing) this.graphOf.set(k, g);
    for (const [g, s] of sizes) this.sizeOf.set(g, s);
  }

  find(g: number): number {
    let root = g;
    while (this.parent.has(root)) root = this.parent.get(root)!;
    // Path compression keeps long merge chains within a big batch cheap.
    let cur = g;
    while (cur !== root) {
      const next = this.parent.get(cur)!;
      this.parent.set(cur, root);
      cur = next;
    }
    return root;
  }

  size(g: number): number {
    const root = this.find(g);
    const s = this.sizeOf.get(root);
    if (s === undefined) throw new Error(`the size of graph ${root} was not loaded`);
    return s;
  }

  /** Graph of an identity as of now, or undefined. */
  graphOfIdentity(i: Identity): number | undefined {
    const g = this.graphOf.get(identityKey(i));
    return g === undefined ? undefined : this.find(g);
  }

  private newGraph(): number {
    const g = this.nextTemp--;
    this.sizeOf.set(g, 0);
    this.createdOrder.push(g);
    return g;
  }

  private assign(i: Identity, g: number): void {
    const k = identityKey(i);
    this.graphOf.set(k, g);
    this.newIdentities.set(k, i);
    this.sizeOf.set(g, this.size(g) + 1);
    this.grown.add(g);
  }

  /** Older graph survives: real ids beat temporary ones, smaller real ids beat larger, earlier temps beat later. */
  private static survivor(a: number, b: number): [number, number] {
    if (a > 0 && b > 0) return a < b ? [a, b] : [b, a];
    if (a > 0) return [a, b];
    if (b > 0) return [b, a];
    return a > b ? [a, b] : [b, a];
  }

  private union(a: number, b: number): number {
    const [keep, gone] = GraphWorkspace.survivor(a, b);
    const size = this.size(keep) + this.size(gone);
    this.parent.set(gone, keep);
    this.sizeOf.set(keep, size);
    this.sizeOf.delete(gone);
    this.grown.add(keep);
    return keep;
  }

  /** Links the identities of one record; `identities[0]` is the record's primary identity. */
  stitch(identities: readonly Identity[]): StitchResult {
    const refused: RefusedLink[] = [];
    const [primary, ...others] = identities;
    if (primary === undefined) throw new Error("stitch needs at least one identity");
    let anchor = this.graphOfIdentity(primary);
    if (anchor === undefined) {
      anchor = this.newGraph();
      this.assign(primary, anchor);
    }
    for (const i of others) {
      const g = this.graphOfIdentity(i);
      if (g === anchor) continue;
      if (g === undefined) {
        if (this.size(anchor) + 1 <= this.cap) this.assign(i, anchor);
        else refused.push(this.refusal(i, anchor, null));
        continue;
      }
      if (this.size(anchor) + this.size(g) <= this.cap) anchor = this.union(anchor, g);
      else refused.push(this.refusal(i, anchor, g));
    }
    return { graph: anchor, refused };
  }

  private refusal(i: Identity, graph: number, other: number | null): RefusedLink {
    const joined = other === null ? this.size(graph) + 1 : this.size(graph) + this.size(other);
    return {
      identity: i, graph, otherGraph: other, code: GRAPH_LIMIT_CODE,
      message: `identity ${i.namespace}:${i.id} was not linked: the identity graph would have ${joined} identities, more than the limit of ${this.cap}`,
    };
  }

  outcome(): WorkspaceOutcome {
    const assigned = [...this.newIdentities.entries()].map(([k, identity]) => ({ identity, graph: this.find(this.graphOf.get(k)!) }));
    const merges: Array<{ from: number; into: number }> = [];
    for (const g of this.parent.keys()) {
      if (g > 0) merges.push({ from: g, into: this.find(g) });
    }
    const created = this.createdOrder.filter((g) => this.find(g) === g);
    // Only changed sizes: a graph the batch merely read (or added events to) keeps its stored size.
    const sizes = new Map<number, number>();
    for (const g of this.grown) if (this.find(g) === g) sizes.set(g, this.sizeOf.get(g)!);
    return { assigned, merges, created, sizes };
  }
}

/**
 * Maps workspace ids to final ids once the store has allocated real ids for the
 * created graphs (`allocated[i]` belongs to `outcome.created[i]`).
 */
export function finalIdResolver(ws: GraphWorkspace, outcome: WorkspaceOutcome, allocated: readonly number[]): (g: number) => number {
  const real = new Map<number, number>();
  outcome.created.forEach((temp, i) => real.set(temp, allocated[i]!));
  return (g: number) => {
    const root = ws.find(g);
    if (root > 0) return root;
    const r = real.get(root);
    if (r === undefined) throw new Error(`graph ${g} has no allocated id`);
    return r;
  };
}
