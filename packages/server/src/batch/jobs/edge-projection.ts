/**
 * A batch job's membership changes reach the edge locations (issue #40's projection bug): edge
 * definitions read the hub's memberships a location was projected (inSegment of a batch audience,
 * and the 24-hourly segment-of-segments pass), so a profile that a job took out of — or put into —
 * an audience an edge definition reads is projected again to the locations that hold it.
 *
 * Off the job's critical path: the job is answered SUCCEEDED at once and the projection follows,
 * one job at a time per sandbox. Bounded: only profiles some location holds are projected (the
 * job's sets, which may name millions, are matched against the locations' held ids), in chunks
 * with a turn of the event loop between them. A chunk whose projection fails is tried again.
 *
 * batch/ imports nothing of edge/: the projector comes in structurally (app.edge.projector).
 */
import type { Logger } from "../../platform/logger.js";
import type { MembershipSet } from "../../profiles/membership-sets.js";
import type { MembershipReads } from "../../profiles/store.js";
import type { TenantScope } from "../../profiles/types.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import { isPublished } from "../../stores/records.js";
import type { DefinitionRecord, MetadataStore } from "../../stores/types.js";

/** What this needs of the edge projector (edge/projector.ts). */
export interface EdgeProjectionTarget {
  /** Hub profile ids some location holds; null when a location cannot list them. */
  heldProfileIds(tenant: TenantContext): Promise<ReadonlySet<string> | null>;
  project(tenant: TenantContext, profileIds: readonly string[]): Promise<number>;
}

export interface BatchEdgeProjectionOptions {
  metadata: MetadataStore;
  edge: EdgeProjectionTarget;
  tenantOf: (scope: TenantScope) => TenantContext | undefined;
  logger?: Pick<Logger, "info" | "error">;
  /** The transition log: a fleet job's changes are read back from it (fleetJobWritten). */
  transitions?: Pick<MembershipReads, "listTransitions">;
  /** Profiles projected per chunk (default 200). */
  chunkSize?: number;
  /** Attempts per chunk (default 5), waiting `retryMs` × attempt between them (default 200 ms). */
  attempts?: number;
  retryMs?: number;
}

const PAGE = 1000;
/** Transitions of a fleet job read back when no location can list what it holds. */
const FLEET_UNLISTED_LIMIT = 1_000_000;

export class BatchEdgeProjection {
  /** Per sandbox: the projection running (jobs' projections follow one another). */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly pending = new Set<Promise<void>>();
  /** Profiles projected since start (tests, logs). */
  projected = 0;

  constructor(private readonly o: BatchEdgeProjectionOptions) {}

  /** A job wrote these sets: queues the projection of the held profiles they changed. Never throws, never waits. */
  jobWritten(scope: TenantScope, sets: readonly MembershipSet[]): void {
    const changed = sets.filter((s) => s.entered.length + s.reentered.length + s.exited.length > 0);
    if (changed.length === 0) return;
    this.queue(scope, () => this.run(scope, changed));
  }

  /**
   * A job the worker fleet wrote (#44): its changes are not in this process, so the held profiles'
   * transitions of the job's instant are read back from the store (by the (definition, profile)
   * index, a chunk of held profiles at a time) and those that moved are projected. Never throws,
   * never waits.
   */
  fleetJobWritten(scope: TenantScope, definitionIds: readonly string[], at: number): void {
    if (definitionIds.length === 0) return;
    this.queue(scope, () => this.runFleet(scope, definitionIds, at));
  }

  private queue(scope: TenantScope, work: () => Promise<void>): void {
    const k = `${scope.orgId}\u0000${scope.sandboxName}`;
    const p = (this.chains.get(k) ?? Promise.resolve())
      .then(work)
      .catch((err: unknown) => this.o.logger?.error({ err }, "batch job: projection to the edge locations failed"));
    const tracked = p.finally(() => {
      this.pending.delete(tracked);
      if (this.chains.get(k) === tracked) this.chains.delete(k);
    });
    this.chains.set(k, tracked);
    this.pending.add(tracked);
  }

  /** Resolves when every queued projection is done (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private async run(scope: TenantScope, sets: readonly MembershipSet[]): Promise<void> {
    const tenant = this.o.tenantOf(scope);
    if (tenant === undefined) return;
    const read = await this.readOnEdge(tenant);
    const relevant = sets.filter((s) => read.has(s.definitionId));
    if (relevant.length === 0) return;
    const held = await this.o.edge.heldProfileIds(tenant);
    let ids: string[];
    if (held === null) {
      // A location that cannot list what it holds: every changed profile is offered (project() skips those no location holds).
      ids = [...new Set(relevant.flatMap((s) => [...s.entered, ...s.reentered, ...s.exited].map(String)))];
    } else {
      if (held.size === 0) return;
      ids = intersect(held, relevant);
    }
    await this.projectAll(tenant, ids);
  }

  private async runFleet(scope: TenantScope, definitionIds: readonly string[], at: number): Promise<void> {
    const tenant = this.o.tenantOf(scope);
    const transitions = this.o.transitions;
    if (tenant === undefined || transitions === undefined) return;
    const read = await this.readOnEdge(tenant);
    const relevant = definitionIds.filter((id) => read.has(id));
    if (relevant.length === 0) return;
    const held = await this.o.edge.heldProfileIds(tenant);
    const query = { definitionIds: relevant, sources: ["batch" as const], since: at, until: at + 1 };
    const ids = new Set<string>();
    if (held === null) {
      // A location that cannot list what it holds: every profile the job moved (project() skips those no location holds).
      for (const t of await transitions.listTransitions(scope, { ...query, limit: FLEET_UNLISTED_LIMIT })) ids.add(t.profileId);
    } else {
      // Only ids a store can hold (numeric): a location's other ids changed in no job.
      const list = [...held].filter((id) => {
        const n = Number(id);
        return Number.isSafeInteger(n) && String(n) === id;
      });
      for (let i = 0; i < list.length; i += PAGE) {
        const part = list.slice(i, i + PAGE);
        for (const t of await transitions.listTransitions(scope, { ...query, profileIds: part, limit: part.length * relevant.length })) ids.add(t.profileId);
      }
    }
    await this.projectAll(tenant, [...ids]);
  }

  private async projectAll(tenant: TenantContext, ids: readonly string[]): Promise<void> {
    const chunk = this.o.chunkSize ?? 200;
    for (let i = 0; i < ids.length; i += chunk) {
      await this.projectChunk(tenant, ids.slice(i, i + chunk));
      this.projected += Math.min(chunk, ids.length - i);
      // Requests and the next job run between chunks.
      await new Promise((r) => setImmediate(r));
    }
  }

  private async projectChunk(tenant: TenantContext, ids: readonly string[]): Promise<void> {
    const attempts = this.o.attempts ?? 5;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.o.edge.project(tenant, ids);
        return;
      } catch (err) {
        if (attempt >= attempts) throw err;
        this.o.logger?.error({ err, attempt }, "batch job: projecting a chunk to the edge locations failed; trying again");
        await new Promise((r) => setTimeout(r, (this.o.retryMs ?? 200) * attempt));
      }
    }
  }

  /**
   * The definitions edge evaluation reads: the published edge definitions and, transitively, every
   * definition they name with inSegment.
   */
  private async readOnEdge(tenant: TenantContext): Promise<Set<string>> {
    const scope = scopeOf(tenant);
    const read = new Set<string>();
    let frontier: string[] = [];
    const take = (rec: DefinitionRecord) => {
      for (const ref of rec.references) if (!read.has(ref)) {
        read.add(ref);
        frontier.push(ref);
      }
    };
    for (let offset = 0; ; offset += PAGE) {
      const page = await this.o.metadata.definitions.list(scope, { filters: { synchronous: true }, sort: [{ field: "id", direction: "asc" }], offset, limit: PAGE });
      for (const rec of page.items) {
        if (!isPublished(rec.definition)) continue;
        read.add(rec.definition.id);
        take(rec);
      }
      if (page.items.length < PAGE) break;
    }
    while (frontier.length > 0) {
      const next = frontier;
      frontier = [];
      for (const rec of (await this.o.metadata.definitions.getMany(scope, next)).values()) take(rec);
    }
    return read;
  }
}

/** The held profiles among the sets' changes: one pass over the typed arrays, no string per changed profile. */
function intersect(held: ReadonlySet<string>, sets: readonly MembershipSet[]): string[] {
  const numeric = new Set<number>();
  for (const id of held) {
    const n = Number(id);
    if (Number.isSafeInteger(n) && String(n) === id) numeric.add(n);
  }
  const out = new Set<string>();
  for (const s of sets) {
    for (const arr of [s.entered, s.reentered, s.exited]) {
      for (let i = 0; i < arr.length; i++) if (numeric.has(arr[i]!)) out.add(String(arr[i]));
    }
  }
  return [...out];
}
