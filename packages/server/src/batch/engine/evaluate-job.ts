/**
 * The batch engine: evaluates every definition of a job over all profiles and
 * works out the membership changes, WITHOUT writing anything. The caller
 * (job-runner.ts) writes the changes in one store transaction, so a reader
 * sees either the previous job's memberships or this job's, never half.
 *
 * One scan of the profile store per distinct merge policy (profiles are merged
 * once per policy by the store). Within a scan, each chunk is evaluated by:
 *   1. the SQL back end: every SQL-covered definition is a column of one
 *      SELECT over the staged chunk (sql/staging.ts);
 *   2. the in-memory compiled evaluator (`compile` from @segmentd/pql) for the
 *      rest, in dependency order, with `inSegment` seeing this job's results
 *      for definitions already evaluated (earlier in the order or in an
 *      earlier policy's scan) and the stored memberships otherwise.
 * SQL-covered definitions never reference others (inSegment is not covered),
 * so evaluating them first respects the dependency order.
 *
 * That scan-per-job path is the "sql" and "js" back ends. The default,
 * "columnar", evaluates over the resident columnar snapshot instead
 * (columnar-engine.ts).
 */
import { compile, type CompiledQuery, toBoolean } from "@segmentd/pql";
import type { ScannedProfile } from "../../profiles/store.js";
import type { JsonObject, MembershipStatus, MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { SqlCompiler } from "../sql/compile-sql.js";
import { SqliteDialect } from "../sql/dialect.js";
import { SqliteChunkEvaluator, eventInstant, type StagedEntry } from "../sql/staging.js";
import { evaluateColumnar } from "./columnar-engine.js";
import { readsStoredMemberships } from "./reads-memberships.js";
import { dependencyOrder } from "./dependency-order.js";
import { MembershipSetBuilder, membershipWrites } from "./membership-output.js";
import { PartitionTally } from "./partition-split.js";
import { usesEvents } from "./uses-events.js";
import { emptyCounters, JobCancelledError, type Backend, type DefinitionCounters, type EvaluationOptions, type EvaluationOutcome, type EvaluationStore, type JobDefinition } from "./evaluation-types.js";

// The types live in evaluation-types.ts so that columnar-engine.ts can share them without
// importing this file back (no import circle); callers keep importing them from here.
export { JobCancelledError };
export type { Backend, DefinitionCounters, EvaluationOptions, EvaluationOutcome, EvaluationStore, JobDefinition };

interface Group {
  policy: MergePolicySpec & { id: string };
  sql: JobDefinition[];
  js: JobDefinition[];
  predicates: string[];
}

function storedStatus(entity: JsonObject, id: string): MembershipStatus | null {
  const sm = entity["segmentMembership"];
  const ups = sm !== null && typeof sm === "object" && !Array.isArray(sm) ? sm["ups"] : undefined;
  const m = ups !== null && typeof ups === "object" && !Array.isArray(ups) ? ups[id] : undefined;
  const s = m !== null && typeof m === "object" && !Array.isArray(m) ? m["status"] : undefined;
  return s === "realized" || s === "exited" ? s : null;
}

/** Groups by merge policy, in dependency order of their definitions. */
function plan(ordered: readonly JobDefinition[], backend: Backend, compiler: SqlCompiler, fallbacks: Record<string, string>, jsReason = "in-memory back end selected"): Group[] {
  const groups = new Map<string, Group>();
  for (const d of ordered) {
    let g = groups.get(d.policy.id);
    if (g === undefined) {
      g = { policy: d.policy, sql: [], js: [], predicates: [] };
      groups.set(d.policy.id, g);
    }
    if (backend === "js") {
      fallbacks[d.id] = jsReason;
      g.js.push(d);
      continue;
    }
    const r = d.references.length > 0 ? { ok: false as const, reason: "inSegment is evaluated after the SQL pass" } : compiler.compile(d.query);
    if (r.ok) {
      g.sql.push(d);
      g.predicates.push(r.sql);
    } else {
      fallbacks[d.id] = r.reason;
      g.js.push(d);
    }
  }
  return [...groups.values()];
}

export async function evaluateJob(store: EvaluationStore, scope: TenantScope, definitions: readonly JobDefinition[], opts: EvaluationOptions): Promise<EvaluationOutcome> {
  const ordered = dependencyOrder(definitions);
  let backend = opts.backend ?? "columnar";
  const membershipReader = ordered.find((d) => readsStoredMemberships(d.query));
  if (backend === "columnar" && membershipReader === undefined) return evaluateColumnar(store, scope, ordered, opts, opts.snapshots);
  let jsReason: string | undefined;
  if (backend === "columnar") {
    backend = "js";
    jsReason = `in-memory: definition ${membershipReader!.id} reads segmentMembership directly or inSegment with a computed id, which the columnar snapshot does not hold`;
  }
  const inJob = new Set(ordered.map((d) => d.id));
  const fallbacks: Record<string, string> = {};
  const groups = plan(ordered, backend, new SqlCompiler(new SqliteDialect(), { events: "ev" }, opts.now), fallbacks, jsReason);
  const referenced = new Set(ordered.flatMap((d) => d.references).filter((r) => inJob.has(r)));
  // Results kept across scans only for definitions some later definition references.
  const crossScan = new Map<string, Set<string>>();
  const evaluated = new Set<string>();
  const counters = new Map(ordered.map((d) => [d.id, emptyCounters()]));
  const builders = new Map(ordered.map((d) => [d.id, new MembershipSetBuilder(d.id)]));
  const tally = opts.split === undefined ? null : new PartitionTally(opts.split);
  const profilesByPolicy: Record<string, number> = {};
  let processed = 0;
  let totalProfiles = 0;

  for (const g of groups) {
    const defs = [...g.sql, ...g.js];
    const n = defs.length;
    const nSql = g.sql.length;
    const compiled: CompiledQuery[] = g.js.map((d) => compile(d.query));
    const needsOverride = g.js.some((d) => d.references.some((r) => inJob.has(r)));
    const sqlEval = nSql > 0 ? new SqliteChunkEvaluator(g.predicates) : null;
    let groupProfiles = 0;
    const slotProfiles = tally === null ? null : new Int32Array(opts.split!.partitions.length);
    const slotEntries = tally === null ? null : new Int32Array(opts.split!.partitions.length);
    let entriesSeen = 0;
    try {
      // Without identity stitching an identity with only events is a profile of its own, so
      // its events must be read even when no definition looks at them.
      const events = g.policy.identityGraph.type !== "pdg" || defs.some((d) => usesEvents(d.query));
      for await (const chunk of store.scanProfiles(scope, g.policy, { chunkSize: opts.chunkSize ?? 2000, events })) {
        if (opts.isCancelled?.()) throw new JobCancelledError();
        const flags = sqlEval?.evaluate(chunk.map(stage)) ?? new Uint8Array(0);
        entriesSeen += chunk.length;
        // Entries of one profile are contiguous (identityGraph none yields one per identity);
        // a profile qualifies when any of its entries does.
        let i = 0;
        while (i < chunk.length) {
          const pid = chunk[i]!.profileId;
          const qual = new Uint8Array(n);
          const namespaces = new Set<string>();
          const first = chunk[i]!;
          const from = i;
          for (; i < chunk.length && chunk[i]!.profileId === pid; i++) {
            const entry = chunk[i]!;
            for (const id of entry.identities) namespaces.add(id.namespace);
            const own = new Uint8Array(n);
            for (let j = 0; j < nSql; j++) own[j] = flags[i * nSql + j]! === 1 && !(defs[j]!.excludeOptOut && entry.optedOut) ? 1 : 0;
            if (g.js.length > 0) evaluateInMemory(entry, defs, own, nSql, compiled, needsOverride ? { inJob, evaluated, crossScan } : null, opts.now);
            for (let j = 0; j < n; j++) qual[j] = qual[j]! | own[j]!;
          }
          groupProfiles++;
          // Numeric ids (the stores' pids): a string that is not one becomes NaN, which the store refuses by name.
          const numericPid = Number(pid);
          const slot = tally === null ? -1 : tally.slot(pid);
          if (slotProfiles !== null) {
            slotProfiles[slot]!++;
            slotEntries![slot]! += i - from;
          }
          for (let j = 0; j < n; j++) {
            const d = defs[j]!;
            const prev = storedStatus(first.entity, d.id);
            const q = qual[j] === 1;
            tallyProfile(counters.get(d.id)!, builders.get(d.id)!, q, prev, numericPid, namespaces);
            // The partition's share too when the outcome is split.
            if (tally !== null) tallyProfile(tally.countersOf(d.id)[slot]!, tally.builder(d.id, slot), q, prev, numericPid, namespaces);
            if (qual[j] === 1 && referenced.has(d.id)) setOf(crossScan, d.id).add(pid);
          }
        }
        processed += chunk.length === 0 ? 0 : countProfiles(chunk);
        opts.onProgress?.(processed);
      }
    } finally {
      sqlEval?.close();
    }
    for (const d of defs) evaluated.add(d.id);
    if (slotProfiles !== null) {
      tally!.countScan(slotProfiles);
      tally!.countEntries(g.policy.id, slotEntries!);
    }
    profilesByPolicy[g.policy.id] = entriesSeen;
    totalProfiles = Math.max(totalProfiles, groupProfiles);
  }
  const memberships = [...builders.values()].filter((b) => b.size > 0).map((b) => b.finish());
  return {
    memberships,
    writes: membershipWrites(memberships),
    counters,
    totalProfiles,
    profilesByPolicy,
    sqlDefinitions: groups.flatMap((g) => g.sql.map((d) => d.id)),
    inMemoryDefinitions: fallbacks,
    ...(tally === null ? {} : { byPartition: tally.finish(ordered.map((d) => d.id)) }),
  };
}

/** One profile's verdict on one definition, counted and (when its membership changes) collected. */
function tallyProfile(c: DefinitionCounters, b: MembershipSetBuilder, qualifies: boolean, prev: MembershipStatus | null, pid: number, namespaces: ReadonlySet<string>): void {
  if (qualifies) {
    c.qualified++;
    for (const ns of namespaces) c.byNamespace[ns] = (c.byNamespace[ns] ?? 0) + 1;
    if (prev === "realized") c.existing++;
    else {
      c.realized++;
      (prev === "exited" ? b.reentered : b.entered).push(pid);
    }
  } else if (prev === "realized") {
    c.exited++;
    b.exited.push(pid);
  }
}

function setOf(m: Map<string, Set<string>>, k: string): Set<string> {
  let s = m.get(k);
  if (s === undefined) {
    s = new Set();
    m.set(k, s);
  }
  return s;
}

function countProfiles(chunk: readonly ScannedProfile[]): number {
  let k = 0;
  for (let i = 0; i < chunk.length; i++) if (i === 0 || chunk[i]!.profileId !== chunk[i - 1]!.profileId) k++;
  return k;
}

function stage(p: ScannedProfile): StagedEntry {
  return { doc: JSON.stringify(p.entity), events: p.events.map((e) => ({ ts: eventInstant(e.body), doc: JSON.stringify(e.body) })) };
}

interface JobView {
  inJob: ReadonlySet<string>;
  /** Definitions whose results for every profile are final (earlier scans). */
  evaluated: ReadonlySet<string>;
  crossScan: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * Evaluates the in-memory definitions (indexes nSql..) of one entry into `own`.
 * With a job view, `segmentMembership.ups` is rewritten so that inSegment sees
 * this job's results for definitions of the job already evaluated.
 */
function evaluateInMemory(entry: ScannedProfile, defs: readonly JobDefinition[], own: Uint8Array, nSql: number, compiled: readonly CompiledQuery[], view: JobView | null, now: number): void {
  let profile: Record<string, unknown> = entry.entity;
  let ups: Record<string, unknown> | null = null;
  const setStatus = (id: string, q: boolean) => {
    if (ups === null) return;
    if (q) ups[id] = { status: "realized", lastQualificationTime: new Date(now).toISOString() };
    else delete ups[id];
  };
  if (view !== null) {
    const sm = entry.entity["segmentMembership"];
    const stored = sm !== null && typeof sm === "object" && !Array.isArray(sm) ? sm["ups"] : undefined;
    ups = stored !== null && typeof stored === "object" && !Array.isArray(stored) ? { ...stored } : {};
    profile = { ...entry.entity, segmentMembership: { ...(sm as object | undefined), ups } };
    for (const id of view.evaluated) if (view.inJob.has(id)) setStatus(id, view.crossScan.get(id)?.has(entry.profileId) ?? false);
    for (let j = 0; j < nSql; j++) setStatus(defs[j]!.id, own[j] === 1);
  }
  const events = entry.events.map((e) => e.body);
  for (let k = 0; k < compiled.length; k++) {
    const j = nSql + k;
    const d = defs[j]!;
    const q = !(d.excludeOptOut && entry.optedOut) && toBoolean(compiled[k]!({ profile, events, now }));
    own[j] = q ? 1 : 0;
    setStatus(d.id, q);
  }
}
