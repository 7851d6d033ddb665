/**
 * The columnar back end of a job (the default): every definition runs as one
 * `compileColumnar` predicate over the resident snapshot of its merge policy
 * (columnar/snapshot.ts), brought up to date first through the store's change
 * feed. Nothing is re-read or re-parsed per job except the profiles that
 * changed, and the membership statuses, which are read in bulk from the store
 * (`listMemberPids`) so realized/existing/exited and `inSegment` of definitions
 * outside the job are always current.
 *
 * Order: definitions run in dependency order; a definition referenced with
 * `inSegment` by a later one of the same job has its result (per profile)
 * written into the `segmentMembership.ups.<id>.status` column its dependents
 * read. Cancellation is checked between scan chunks and between definitions.
 */
import type { MembershipSet } from "../../profiles/store.js";
import type { MembershipStatus, MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { SnapshotCache } from "../columnar/cache.js";
import type { Column } from "../columnar/layout.js";
import { compileDefinition, type ColumnarCompiled } from "../columnar/predicate.js";
import { BuildCancelledError, membersOfPids, statusOverrides, type Snapshot, type SnapshotPart } from "../columnar/snapshot.js";
import { emptyCounters, JobCancelledError, type DefinitionCounters, type EvaluationOptions, type EvaluationOutcome, type EvaluationStore, type JobDefinition } from "./evaluation-types.js";
import { MembershipSetBuilder, membershipWrites } from "./membership-output.js";
import { PartitionTally } from "./partition-split.js";
import { usesEvents } from "./uses-events.js";
import { DEFAULT_LIMITS } from "../../platform/config.js";
import { ApiError } from "../../services/errors.js";
import { EvaluationBudget } from "../../services/evaluation-budget.js";
import type { Query } from "@segmentd/pql";
import type { EvaluationPool } from "../pool/evaluation-pool.js";
import { partFlags } from "../pool/part-flags.js";

function policyKey(p: MergePolicySpec): string {
  return JSON.stringify([p.identityGraph.type, p.attributeMerge.type, p.attributeMerge.order ?? null]);
}

/** Per-profile result over a snapshot's global ordinals. */
interface Result {
  snap: Snapshot;
  qual: Uint8Array;
}

export async function evaluateColumnar(
  store: EvaluationStore,
  scope: TenantScope,
  ordered: readonly JobDefinition[],
  opts: EvaluationOptions,
  cache: SnapshotCache = new SnapshotCache(),
): Promise<EvaluationOutcome> {
  const inJob = new Set(ordered.map((d) => d.id));
  const referencedLater = new Set(ordered.flatMap((d) => d.references).filter((r) => inJob.has(r)));
  const cancelled = () => opts.isCancelled?.() === true;

  // 1. Snapshots, one per merge policy semantics (several policy ids may share one).
  const snaps = new Map<string, Snapshot>();
  const policies = new Map<string, MergePolicySpec>();
  const needEvents = new Map<string, boolean>();
  for (const d of ordered) {
    const k = policyKey(d.policy);
    policies.set(k, d.policy);
    // Without identity stitching an identity with only events is a profile of its own: events are always read.
    needEvents.set(k, (needEvents.get(k) ?? false) || d.policy.identityGraph.type !== "pdg" || usesEvents(d.query));
  }
  let readBefore = 0;
  let lastReported = -1;
  const report = (n: number) => {
    if (n === lastReported) return;
    lastReported = n;
    opts.onProgress?.(n);
  };
  for (const [k, policy] of policies) {
    try {
      const snap = await cache.get(store, scope, policy, {
        events: needEvents.get(k)!,
        ...(opts.chunkSize === undefined ? {} : { chunkSize: opts.chunkSize }),
        isCancelled: cancelled,
        onProgress: (n) => report(readBefore + n),
      });
      snaps.set(k, snap);
      readBefore += snap.profileCount;
    } catch (e) {
      if (e instanceof BuildCancelledError) throw new JobCancelledError();
      throw e;
    }
  }

  // 2. Stored statuses, read in bulk when needed.
  const storedIds = new Map<string, Promise<Float64Array>>();
  const memberIds = (id: string, status: MembershipStatus): Promise<Float64Array> => {
    const k = `${status}\u0000${id}`;
    let p = storedIds.get(k);
    if (p === undefined) {
      p = store.listMemberPids(scope, id, status);
      storedIds.set(k, p);
    }
    return p;
  };
  const results = new Map<string, Result>();
  const toGlobal = async (snap: Snapshot, ref: string): Promise<Uint8Array> => {
    const out = new Uint8Array(snap.ordinals);
    const r = results.get(ref);
    if (r !== undefined && r.snap === snap) return r.qual;
    if (r !== undefined) {
      for (let g = 0; g < r.qual.length; g++) {
        if (r.qual[g] !== 1) continue;
        const t = snap.locate(r.snap.profileIdOf(g));
        if (t >= 0) out[t] = 1;
      }
      return out;
    }
    if (inJob.has(ref)) return out; // not evaluated (cannot happen in dependency order)
    return membersOfPids(snap, await memberIds(ref, "realized"));
  };
  /** Status columns per part for one definition's references. */
  const overridesFor = async (snap: Snapshot, refs: readonly string[]): Promise<Array<Map<string, Column>>> => {
    const members = new Map<string, Uint8Array>();
    for (const ref of refs) members.set(ref, await toGlobal(snap, ref));
    return statusOverrides(snap, members);
  };

  // 3. Definitions in dependency order.
  const counters = new Map<string, DefinitionCounters>();
  const memberships: MembershipSet[] = [];
  const fallbacks: Record<string, string> = {};
  const columnarDefinitions: string[] = [];
  const compiledCache = opts.compiled ?? new Map<string, ColumnarCompiled>();
  const definitionMs: Record<string, number> = {};
  const tally = opts.split === undefined ? null : new PartitionTally(opts.split);
  if (tally !== null) for (const snap of new Set(snaps.values())) tally.countScan(tally.snapshotProfiles(snap.parts()));
  for (const d of ordered) {
    if (cancelled()) throw new JobCancelledError();
    const t0 = performance.now();
    const snap = snaps.get(policyKey(d.policy))!;
    const compiled = compiledCache.get(d.id) ?? compileDefinition(d.query, opts.now);
    compiledCache.set(d.id, compiled);
    if (compiled.columnar) columnarDefinitions.push(d.id);
    else fallbacks[d.id] = compiled.reason ?? "evaluated on row objects";
    const overrides = await overridesFor(snap, d.references);
    // Per-profile budgets, no deadline (a job may be long): a definition that is too costly for a
    // profile's data fails the job at that profile instead of holding the event loop.
    let qual: Uint8Array;
    try {
      // In the evaluation pool when there is one (the event loop stays free while a large snapshot is evaluated).
      qual = await qualifyOnSnapshot(cache.pool, snap, d.query, opts.now, overrides, d.excludeOptOut, new EvaluationBudget(opts.limits ?? DEFAULT_LIMITS, { deadline: false }), compiled);
    } catch (err) {
      // The budget's errors name the definition.
      if (err instanceof ApiError) throw new Error(`definition '${d.id}': ${err.message}`);
      throw err;
    }
    if (referencedLater.has(d.id)) results.set(d.id, { snap, qual });

    // Previous statuses: 1 realized, 2 exited.
    const prev = new Uint8Array(snap.ordinals);
    const [realized, exited] = await Promise.all([memberIds(d.id, "realized"), memberIds(d.id, "exited")]);
    for (let i = 0; i < exited.length; i++) {
      const g = snap.locatePid(exited[i]!);
      if (g >= 0) prev[g] = 2;
    }
    for (let i = 0; i < realized.length; i++) {
      const g = snap.locatePid(realized[i]!);
      if (g >= 0) prev[g] = 1;
    }
    storedIds.delete(`realized\u0000${d.id}`);
    storedIds.delete(`exited\u0000${d.id}`);

    const c: DefinitionCounters = emptyCounters();
    // Numeric ids (the stores' pids): a string that is not one becomes NaN, which the store refuses by name.
    const out = new MembershipSetBuilder(d.id);
    // Split by partition: each profile counted in its partition's slot as well.
    const pcs = tally === null ? null : tally.countersOf(d.id);
    for (const { part, offset } of snap.parts()) {
      const nsLen = part.namespaces.length;
      const nsCount = new Int32Array(nsLen);
      const stamp = new Int32Array(nsLen).fill(-1);
      const { ordinalStart, nsStart, nsCodes, profileIds } = part;
      const n = part.ordinals;
      const slots = tally === null ? null : tally.slotsOfPart(part);
      const slotNs = pcs === null ? null : new Int32Array(pcs.length * nsLen);
      // Masked (replaced or removed) profiles never qualify and have no located status: skipped here.
      for (let o = 0; o < n; o++) {
        const g = offset + o;
        const q = qual[g]!;
        const p = prev[g]!;
        if (q === 0 && p !== 1) continue;
        const slot = slots === null ? -1 : tally!.check(slots[o]!, part, o);
        const pc = slot < 0 ? null : pcs![slot]!;
        if (q === 1) {
          c.qualified++;
          for (let r = ordinalStart[o]!; r < ordinalStart[o + 1]!; r++) {
            for (let x = nsStart[r]!; x < nsStart[r + 1]!; x++) {
              const ns = nsCodes[x]!;
              if (stamp[ns] === o) continue;
              stamp[ns] = o;
              nsCount[ns]!++;
              if (slotNs !== null) slotNs[slot * nsLen + ns]!++;
            }
          }
          if (p === 1) c.existing++;
          else {
            c.realized++;
            (p === 2 ? out.reentered : out.entered).push(Number(profileIds[o]!));
          }
          if (pc !== null) {
            pc.qualified++;
            if (p === 1) pc.existing++;
            else {
              pc.realized++;
              const b = tally!.builder(d.id, slot);
              (p === 2 ? b.reentered : b.entered).push(Number(profileIds[o]!));
            }
          }
        } else {
          c.exited++;
          out.exited.push(Number(profileIds[o]!));
          if (pc !== null) {
            pc.exited++;
            tally!.builder(d.id, slot).exited.push(Number(profileIds[o]!));
          }
        }
      }
      part.namespaces.forEach((ns, code) => {
        if (nsCount[code]! > 0) c.byNamespace[ns] = (c.byNamespace[ns] ?? 0) + nsCount[code]!;
        if (slotNs === null) return;
        for (let slot = 0; slot < pcs!.length; slot++) {
          const k = slotNs[slot * nsLen + code]!;
          if (k > 0) pcs![slot]!.byNamespace[ns] = (pcs![slot]!.byNamespace[ns] ?? 0) + k;
        }
      });
    }
    counters.set(d.id, c);
    if (out.size > 0) memberships.push(out.finish());
    definitionMs[d.id] = performance.now() - t0;
  }
  let totalProfiles = 0;
  const profilesByPolicy: Record<string, number> = {};
  for (const d of ordered) {
    const snap = snaps.get(policyKey(d.policy))!;
    totalProfiles = Math.max(totalProfiles, snap.profileCount);
    profilesByPolicy[d.policy.id] = snap.entryCount;
    tally?.countEntries(d.policy.id, tally.snapshotEntries(snap.parts()));
  }
  report(Math.max(totalProfiles, lastReported));
  return {
    memberships, writes: membershipWrites(memberships), counters, totalProfiles, profilesByPolicy, sqlDefinitions: [], inMemoryDefinitions: fallbacks, columnarDefinitions, definitionMs,
    ...(tally === null ? {} : { byPartition: tally.finish(ordered.map((d) => d.id)) }),
  };
}

/**
 * One predicate over every profile of a snapshot (`overrides`: the inSegment status columns per
 * part), in the evaluation pool when there is one: 1 at the global ordinal of each live profile
 * that qualifies. Jobs and edit impact both evaluate through it.
 */
export async function qualifyOnSnapshot(
  pool: EvaluationPool | null,
  snap: Snapshot,
  query: Query,
  now: number,
  overrides: ReadonlyArray<Map<string, Column>>,
  excludeOptOut: boolean,
  budget: EvaluationBudget,
  compiled?: ColumnarCompiled,
): Promise<Uint8Array> {
  const flags = await partFlags(pool, snap, query, now, overrides, budget, compiled);
  const qual = new Uint8Array(snap.ordinals);
  snap.parts().forEach(({ part, masked, offset }, k) => {
    const out = flags[k];
    if (out !== null && out !== undefined) entryFlagsToProfiles(part, masked, out, excludeOptOut, qual, offset);
  });
  return qual;
}

/**
 * Entry flags → profile flags: a profile qualifies when one of its entries does (and, with
 * excludeOptOut, that entry has not opted out). Masked base profiles are left out.
 */
function entryFlagsToProfiles(part: SnapshotPart, masked: Uint8Array | null, out: Uint8Array, excludeOptOut: boolean, qual: Uint8Array, offset: number): void {
  const { optedOut, ordinalStart } = part;
  const n = part.ordinals;
  if (part.rows === n) {
    // One entry per profile (pdg): entry r is profile r.
    for (let o = 0; o < n; o++) {
      if (out[o] === 1 && !(excludeOptOut && optedOut[o] === 1) && (masked === null || masked[o] === 0)) qual[offset + o] = 1;
    }
    return;
  }
  for (let o = 0; o < n; o++) {
    if (masked !== null && masked[o] === 1) continue;
    for (let r = ordinalStart[o]!; r < ordinalStart[o + 1]!; r++) {
      if (out[r] === 1 && !(excludeOptOut && optedOut[r] === 1)) {
        qual[offset + o] = 1;
        break;
      }
    }
  }
}
