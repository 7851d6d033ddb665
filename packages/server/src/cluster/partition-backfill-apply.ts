/**
 * A streaming worker's side of a backfill (issue #40, hub side: partition-backfill.ts): a `b`
 * message of a partition, applied in stream order with the partition's events, inside the batch
 * whose fenced write (applyPartitionBatch) stores the partition's new position. So a chunk is
 * written exactly once: a worker killed before the batch's commit leaves the position before it,
 * and the next owner applies it again from the start.
 *
 * Before the hub reads its fence, a `v` message on every partition reloads the worker's catalog:
 * from there on the engine writes the definition's memberships only with the new version, so the
 * stored statuses the hub's evaluation compares with are not moved afterwards by the previous
 * version (a worker behind the stream still applying events from before the edit).
 *
 * For a chunk:
 * 1. The definition version it names must be the stored one (else a newer backfill runs: skipped),
 *    and the worker's catalog is reloaded once per run (a worker that restarted since the `v`).
 * 2. Each profile of the chunk is written as the snapshot decided it, unless its data changed after
 *    the fence (the hub's change log, read from PostgreSQL: every process's writes): then the
 *    engine's own verdict on its current state decides it (the snapshot did not see that change).
 *    This happens while the engine holds none of those profiles (holdIdle), and the engine's
 *    cached states learn what was written.
 * 3. After the partition's last chunk, the profiles of the partition changed after the fence that
 *    no chunk named get the engine's verdict too: an event evaluated before step 1 ran with the
 *    catalog's previous version.
 * Changes go without `from` (the store compares with the stored status): a profile the engine
 * already moved is not moved twice. Realized memberships of windowed definitions are re-checked
 * at the next tick (the engine's sweep schedules their exits).
 */
import type { MembershipChange, MembershipReads } from "../profiles/store.js";
import type { Membership, TenantScope } from "../profiles/types.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import type { DefinitionCatalog } from "../streaming/definition-catalog.js";
import type { MembershipSink, StreamingEngine } from "../streaming/engine.js";
import type { PartitionMessage } from "./partition-wire.js";
import { partitionOf } from "./partitions.js";

/** What the worker reads of PostgreSQL for a chunk (PostgresProfileStore). */
export interface BackfillApplyStore extends Pick<MembershipReads, "getMemberships"> {
  /** Profiles whose data changed after the version, from the change log table; null: the log does not reach back to it. */
  changedAfterInLog(scope: TenantScope, since: number): Promise<ReadonlySet<string> | null>;
}

/** The partition's engine and the batch's sink, as partition-worker.ts holds them. */
export interface BackfillApplyRun {
  engine: StreamingEngine;
  sink: MembershipSink & { overlaid(scope: TenantScope, profileId: string, stored: Membership[]): Membership[] };
}

/** Engine verdicts (state loads) in flight at once for the profiles changed after the fence. */
const VERDICTS_AT_ONCE = 8;

export type BackfillMessage = Extract<PartitionMessage, { k: "b" }>;

export interface BackfillApplyStats {
  /** `v` messages applied (the catalog reloaded). */
  switches: number;
  chunks: number;
  skipped: number;
  /** Profiles decided on the engine's verdict (changed after the fence). */
  fenced: number;
  written: number;
}

export class PartitionBackfillApplier {
  readonly stats: BackfillApplyStats = { switches: 0, chunks: 0, skipped: 0, fenced: 0, written: 0 };
  /** Runs whose catalog reload this process did (the catalog is shared by the partitions). */
  private readonly reloaded = new Set<string>();

  constructor(private readonly o: { store: BackfillApplyStore; meta: MetadataStore; catalog: DefinitionCatalog; partitions: number }) {}

  /**
   * A backfill's `v` message: the catalog drops the sandbox's definitions, so everything after this
   * message is evaluated with the current version (the hub reads its fence once every partition
   * applied it: no membership written after is the previous version's).
   */
  switchTo(tenant: TenantContext): void {
    // The hub stored the version (in the shared PostgreSQL) before it published this message.
    this.o.catalog.invalidate(scopeOf(tenant));
    this.stats.switches++;
  }

  async apply(p: number, run: BackfillApplyRun, tenant: TenantContext, m: BackfillMessage): Promise<void> {
    const scope = scopeOf(tenant);
    // 1. The version the hub evaluated, and the catalog holding it.
    const rec = await this.o.meta.definitions.get(scope, m.def);
    if (rec === undefined || rec.definition.updateTime !== m.v) {
      this.stats.skipped++;
      return;
    }
    if (!this.reloaded.has(m.run)) {
      this.o.catalog.invalidate(scope);
      this.reloaded.add(m.run);
    }
    const set = await this.o.catalog.get(tenant, "continuous");
    const live = set.byId.get(m.def);
    if (live === undefined) {
      this.stats.skipped++;
      return;
    }
    this.stats.chunks++;
    // 2. The chunk, and (3.) after the last one the partition's other profiles changed after the fence.
    const changed = await this.o.store.changedAfterInLog(scope, m.f);
    const snapshot = new Map<string, "realized" | "exited">();
    for (const [pid, s] of m.ch) snapshot.set(String(pid), s === 1 ? "realized" : "exited");
    const pids = [...snapshot.keys()];
    if (m.last && changed !== null) {
      for (const pid of changed) if (!snapshot.has(pid) && partitionOf(tenant.sandbox.sandboxId, pid, this.o.partitions) === p) pids.push(pid);
    }
    const realized: Array<{ profileId: string; definitionId: string }> = [];
    let pending = pids;
    while (pending.length > 0) {
      const res = await run.engine.holdIdle(tenant, pending, async (held, verdict) => {
        const changes: MembershipChange[] = [];
        const again: string[] = [];
        for (const pid of held) {
          const s = snapshot.get(pid);
          // A windowed verdict is stale once the window moved past the snapshot's evaluation (the sweep
          // may have exited the profile since, without a data change): the engine decides those on now.
          if (s !== undefined && changed !== null && !changed.has(pid) && live.windowMs === null) changes.push({ profileId: pid, definitionId: m.def, status: s, source: "backfill", at: m.at });
          else again.push(pid);
        }
        this.stats.fenced += again.length;
        // A few at a time: each loads the profile's state and memberships from PostgreSQL.
        for (let i = 0; i < again.length; i += VERDICTS_AT_ONCE) {
          await Promise.all(again.slice(i, i + VERDICTS_AT_ONCE).map(async (pid) => {
            const qualifies = await verdict(pid, m.def);
            // The profile is gone (deleted: the lifecycle wrote its exits).
            if (qualifies === null) return;
            const stored = run.sink.overlaid(scope, pid, await this.o.store.getMemberships(scope, pid)).find((x) => x.definitionId === m.def)?.status ?? null;
            if (qualifies && stored !== "realized") changes.push({ profileId: pid, definitionId: m.def, status: "realized", source: "backfill", at: m.at });
            else if (!qualifies && stored === "realized") changes.push({ profileId: pid, definitionId: m.def, status: "exited", source: "backfill", at: m.at });
          }));
        }
        if (changes.length === 0) return changes;
        // Into the batch's fenced write, without `from`: the store compares with the stored status.
        await run.sink.write(scope, changes);
        this.stats.written += changes.length;
        for (const c of changes) if (c.status === "realized") realized.push({ profileId: c.profileId, definitionId: c.definitionId });
        return changes;
      });
      pending = res.busy;
      if (pending.length > 0) await new Promise((r) => setTimeout(r, 2));
    }
    // A windowed membership's exit is the sweep's: it re-checks these at the next tick.
    if (live.windowMs !== null && realized.length > 0) run.engine.recheck(tenant, realized);
  }
}
