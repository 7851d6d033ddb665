/**
 * Backfill benchmark (issue #40, acceptance 3), one command:
 *
 *   npm run bench:backfill -- [--profiles 1000000] [--events 10000000] [--db bench/.data/backfill.db] [--reuse]
 *                             [--workers N] [--direct-store] [--chunk 2000] [--database-url postgres://…] [--snapshot-dir DIR]
 *                             [--computed [--computed-scan]]
 *
 * Time to a complete audience: a continuous definition D created over the bench's demo data
 * (bench/batch.ts's generator and loader: 1M profiles, 10M events by default) until its backfill
 * reports complete, against a batch job's evaluation of D plus writing its changes, in the same run
 * and over the same resident snapshot. The services are wired as batch/http/plugin.ts wires them —
 * the metadata store, the definition service and its bus, the live definition catalog and the
 * streaming engine (its holdIdle is the backfill's live gate), the snapshot cache with the
 * evaluation pool (the server's default: cores − 1 workers), the backfill runner following the
 * catalog — without HTTP, so that the figures are the backfill's own.
 *
 * 1. loads the data in a child process (bench/batch.ts --load-only; skipped with --reuse);
 * 2. builds the resident snapshot once (timed on its own), then one unmeasured evaluation of
 *    another definition hands it to the evaluation pool (paid once by the first job of a server);
 * 3. (a) the reference: D as a batch definition, evaluated as a job evaluates it (evaluateJob
 *    over the snapshot) and its changes written (applyMembershipSets), timed;
 * 4. (b) D created as a continuous definition: time from the create call until its backfill
 *    reports succeeded; its members must equal (a)'s;
 * 5. (c) D edited into D' (members added and removed): the reference for D' first (as in 3), then
 *    the edit's backfill: its time, the transitions it wrote (must be the net change between the
 *    two audiences) and its members (must equal D''s);
 * 6. peak RSS, and wall and CPU seconds of each phase (the CPU of every thread of this process).
 *
 * --computed (issue #41, acceptance 3): after 2., instead of 3.–5., a computed attribute's first
 * evaluation (create → PROCESSED) against a batch job of a definition reading it
 * (bench/lib/computed-backfill.ts).
 *
 * --database-url: PostgreSQL for the profile store, metadata and batch repository (the profile
 * schema `segmentd_bench_backfill`, loaded in process unless --reuse; the metadata in a schema of
 * the URL's search_path, as the server does). Writes only under bench/.data (or --db) and a temp dir.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import pg from "pg";
import { parse } from "@segmentd/pql";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { WorkerProfileStore } from "../packages/server/src/profiles/embedded/worker-store.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import { loadDemo } from "./lib/demo-load.js";
import type { ProfileStore } from "../packages/server/src/profiles/store.js";
import type { TenantScope } from "../packages/server/src/profiles/types.js";
import { defaultConfig } from "../packages/server/src/platform/config.js";
import { withDefaultUser } from "../packages/server/src/platform/pg-url.js";
import { ManualClock } from "../packages/server/src/platform/clock.js";
import { InProcessBus } from "../packages/server/src/platform/bus.js";
import { openMetadataStore } from "../packages/server/src/stores/open-store.js";
import type { MetadataStore } from "../packages/server/src/stores/types.js";
import { DefinitionService } from "../packages/server/src/services/definitions.js";
import { definitionExpander } from "../packages/server/src/computed/expand.js";
import { MergePolicyService } from "../packages/server/src/services/merge-policies.js";
import { TenantDirectory, scopeOf, type TenantContext } from "../packages/server/src/services/tenancy.js";
import { createStreaming } from "../packages/server/src/streaming/plugin.js";
import { SnapshotCache } from "../packages/server/src/batch/columnar/cache.js";
import { evaluateJob } from "../packages/server/src/batch/engine/evaluate-job.js";
import type { JobDefinition } from "../packages/server/src/batch/engine/evaluation-types.js";
import { evaluatedPolicy } from "../packages/server/src/batch/jobs/job-runner.js";
import { openBatchRepository } from "../packages/server/src/batch/store/open.js";
import { BackfillRunner } from "../packages/server/src/batch/backfill/backfill-runner.js";
import { startCpuProfile } from "./lib/cpu-profile.js";
import type { BackfillView } from "../packages/server/src/batch/backfill/backfill-types.js";

const { values: args } = parseArgs({
  options: {
    profiles: { type: "string", default: "1000000" },
    events: { type: "string", default: "10000000" },
    db: { type: "string", default: "bench/.data/backfill.db" },
    reuse: { type: "boolean", default: false },
    /** Evaluation pool threads (the server's default: cores − 1, at least 1); 0: the main thread. */
    workers: { type: "string", default: String(Math.max(1, os.availableParallelism() - 1)) },
    /** The embedded store on the main thread instead of its worker thread (the server's default). */
    "direct-store": { type: "boolean", default: false },
    /** Changes per backfill write (the runner's default when absent). */
    chunk: { type: "string", default: "" },
    "database-url": { type: "string", default: "" },
    /** A CPU profile of the main thread (node:inspector) during (b), the backfill of the new definition, to this file. */
    "cpu-profile": { type: "string", default: "" },
    /** Keeps the resident snapshot in this directory between runs (with --reuse: loaded instead of built; not measured either way). */
    "snapshot-dir": { type: "string", default: "" },
    /** After (b) and (c): the time the backfill spent in each call of the profile store, metadata store and batch repository. */
    explain: { type: "boolean", default: false },
    /** #41: a computed attribute's first evaluation instead of the backfills (bench/lib/computed-backfill.ts). */
    computed: { type: "boolean", default: false },
    /** With --computed: the same attribute through the store scan too (slow at 1M profiles). */
    "computed-scan": { type: "boolean", default: false },
  },
});

const NOW = Date.UTC(2026, 10, 21);
const ORG = "BENCH@AdobeOrg";
/** PostgreSQL: the profile store's schema (kept for --reuse), and the metadata's (fresh each run; the batch repository's is it + `_batch`). */
const PG_SCHEMA = "segmentd_bench_backfill";
const PG_META_SCHEMA = "segmentd_bench_backfill_meta";
/** D: a profile attribute or a purchase in the last day (≈ 12 % of the profiles). */
const D = 'loyalty.points >= 8000 or xEvent[eventType = "commerce.purchases" and timestamp occurs < 1 days before now].count() > 0';
/** D': a higher threshold (members leave) or a cart add in the last day (members enter). */
const D_EDITED = 'loyalty.points >= 12000 or xEvent[eventType = "commerce.productListAdds" and timestamp occurs < 1 days before now].count() > 0';
/** Hands the snapshot to the evaluation pool before anything is timed (not measured). */
const WARM_UP = 'homeAddress.countryCode = "FR"';

const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GB`;
const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const s2 = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const peak = () => process.resourceUsage().maxRSS * 1024;

/** A target line: `target <what>: <value> met|MISSED` (the other benches' format). */
function target(what: string, value: string, met: boolean): void {
  console.log(`target ${what}: ${value} ${met ? "met" : "MISSED"}`);
}

/** Wall and CPU (every thread of this process) of one phase. */
async function timed<T>(f: () => Promise<T>): Promise<{ value: T; ms: number; cpuMs: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await f();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { value, ms, cpuMs: (c.user + c.system) / 1000 };
}

/** Calls (count, wall ms summed: overlapping calls add up) by "what.method", while `on`. */
const calls = new Map<string, { n: number; ms: number }>();
let counting = false;

/** `o` with its methods timed into `calls` (--explain): where the backfill waits. */
function counted<T extends object>(what: string, o: T, deep = false): T {
  if (!args.explain) return o;
  return new Proxy(o, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      // The metadata store's parts (definitions, mergePolicies) are objects of methods.
      if (deep && typeof prop === "string" && typeof v === "object" && v !== null) return counted(`${what}.${prop}`, v);
      if (typeof v !== "function" || typeof prop !== "string") return v;
      return (...a: unknown[]) => {
        const t0 = performance.now();
        const r = (v as (...x: unknown[]) => unknown).apply(target, a);
        const add = () => {
          if (!counting) return;
          const k = `${what}.${prop}`;
          const c = calls.get(k) ?? { n: 0, ms: 0 };
          c.n++;
          c.ms += performance.now() - t0;
          calls.set(k, c);
        };
        if (r instanceof Promise) return r.finally(add);
        add();
        return r;
      };
    },
  });
}

function printCalls(label: string): void {
  const top = [...calls].sort((a, b) => b[1].ms - a[1].ms).slice(0, 12);
  console.log(`  ${label}: calls by wall time (overlapping calls add up): ${top.map(([k, c]) => `${k} ${c.n}× ${s2(c.ms)}`).join(", ")}`);
  calls.clear();
}

/** The PostgreSQL load (the embedded one runs bench/batch.ts's loader in a child process). */
async function loadInProcess(store: ProfileStore, scope: TenantScope, profiles: number, events: number): Promise<void> {
  const r = await loadDemo(store, scope, { profiles, events, now: NOW });
  console.log(`load (in process): ${profiles} profiles + ${events} events in ${s(r.ms)}`);
}

function openProfiles(url: string, file: string): ProfileStore {
  if (url !== "") return new PostgresProfileStore({ connectionString: url, schema: PG_SCHEMA });
  if (args["direct-store"]) return new EmbeddedProfileStore({ path: file, synchronous: "normal", cacheMiB: 1024 });
  return new WorkerProfileStore({ path: file });
}

/** The members of an audience, sorted (profile ids as the store keeps them). */
async function membersOf(store: ProfileStore, scope: TenantScope, id: string): Promise<Float64Array> {
  return (await store.listMemberPids(scope, id, "realized")).slice().sort();
}

function sameMembers(a: Float64Array, b: Float64Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** |a \ b| + |b \ a| of two sorted id lists. */
function symmetricDifference(a: Float64Array, b: Float64Array): number {
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && a[i]! < b[j]!)) {
      n++;
      i++;
    } else if (i >= a.length || b[j]! < a[i]!) {
      n++;
      j++;
    } else {
      i++;
      j++;
    }
  }
  return n;
}

async function main(): Promise<void> {
  const profiles = Number(args.profiles);
  const events = Number(args.events);
  const url = args["database-url"]!;
  const file = path.resolve(args.db!);
  const workers = Number(args.workers);
  const cpus = os.cpus();
  console.log(`cpu: ${cpus[0]?.model ?? "unknown"} × ${cpus.length}, node ${process.version}; ${args.reuse ? "the data already loaded (--reuse)" : `${profiles} profiles, ${events} events`}; ` +
    `${url === "" ? `embedded store${args["direct-store"] ? " (main thread)" : " (worker thread)"}` : "PostgreSQL"}; evaluation pool ${workers}; load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);

  // 1. The data: bench/batch.ts's loader in a child process (the measured process holds only what the service holds).
  if (url === "" && !args.reuse) {
    mkdirSync(path.dirname(file), { recursive: true });
    const t0 = performance.now();
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(new URL("./batch.ts", import.meta.url)), "--load-only",
      "--profiles", String(profiles), "--events", String(events), "--db", file], { stdio: "inherit" });
    if (child.status !== 0) throw new Error(`the loader process failed (status ${child.status}, signal ${child.signal})`);
    console.log(`loader process done in ${s(performance.now() - t0)}`);
  }
  if (url === "") {
    // A fresh membership state (an earlier run, or bench:batch over the same file, wrote some).
    const raw = new Database(file);
    raw.exec("DELETE FROM memberships; DELETE FROM transitions;");
    raw.close();
  }

  const dataDir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-backfill-"));
  const config = defaultConfig();
  config.dataDir = dataDir;
  config.organizations = [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }];
  const tenants = new TenantDirectory(config);
  const tenant: TenantContext = tenants.resolve(ORG, "prod")!;
  const scope = scopeOf(tenant);
  let metaUrl = "";
  if (url !== "") {
    const c = new pg.Client({ connectionString: withDefaultUser(url) });
    await c.connect();
    if (!args.reuse) await c.query(`DROP SCHEMA IF EXISTS ${PG_SCHEMA} CASCADE`);
    else await c.query(`DO $$ BEGIN IF to_regclass('${PG_SCHEMA}.memberships') IS NOT NULL THEN DELETE FROM ${PG_SCHEMA}.memberships; DELETE FROM ${PG_SCHEMA}.transitions; END IF; END $$`);
    await c.query(`DROP SCHEMA IF EXISTS ${PG_META_SCHEMA} CASCADE; DROP SCHEMA IF EXISTS ${PG_META_SCHEMA}_batch CASCADE; CREATE SCHEMA ${PG_META_SCHEMA}`);
    await c.end();
    const u = new URL(url);
    u.searchParams.set("options", `-c search_path=${PG_META_SCHEMA}`);
    metaUrl = u.toString();
  }
  const store = openProfiles(url, file);
  if (url !== "" && !args.reuse) await loadInProcess(store, scope, profiles, events);
  const metadata: MetadataStore = await openMetadataStore(url === "" ? { dataDir } : { dataDir, databaseUrl: metaUrl });
  const repo = openBatchRepository(url === "" ? { dataDir } : { dataDir, databaseUrl: metaUrl });
  const clock = new ManualClock(NOW);
  const bus = new InProcessBus();
  // Definitions may read computed attributes (--computed), as the server's do.
  const definitions = new DefinitionService(metadata, clock, bus, definitionExpander(metadata.computedAttributes));
  const mergePolicies = new MergePolicyService(metadata, clock, bus);
  const streaming = createStreaming({ meta: metadata, hub: store, clock, bus, onError: (err) => console.error("streaming:", err) });
  const snapshotDir = args["snapshot-dir"] === "" ? {} : { dir: path.resolve(args["snapshot-dir"]!), storeIdentity: url === "" ? file : url };
  const snapshots = new SnapshotCache({ evaluationWorkers: workers, ...snapshotDir, onWarning: (m) => console.log(`  snapshot: ${m}`) });
  /** Backfills that ended, and those waited for, by definition id. */
  const ended = new Map<string, BackfillView>();
  const waiters = new Map<string, (v: BackfillView) => void>();
  const chunk = args.chunk === "" ? {} : { chunkSize: Number(args.chunk) };
  const runner = new BackfillRunner({
    metadata: counted("metadata", metadata, true), profiles: counted("profiles", store), repo: counted("repo", repo), clock, snapshots, ...chunk,
    tenantOf: (sc) => tenants.resolve(sc.orgId, sc.sandboxName),
    limits: (sc) => tenants.resolve(sc.orgId, sc.sandboxName)?.limits,
    live: { settled: streaming.engine.settled.bind(streaming.engine), holdIdle: streaming.engine.holdIdle.bind(streaming.engine), recheck: streaming.engine.recheck.bind(streaming.engine) },
    onFinished: (v) => {
      const w = waiters.get(v.definitionId);
      waiters.delete(v.definitionId);
      if (w === undefined) ended.set(v.definitionId, { ...v });
      else w({ ...v });
    },
  });
  // As batch/http/plugin.ts: the runner follows the live catalog.
  const unfollow = streaming.catalog.follow((e) => {
    runner.definitionChanged(tenant, e.definitionId, e.change).catch((err: unknown) => console.error("backfill not queued:", err));
  });

  const policyRecord = await mergePolicies.create(tenant, {
    name: "bench pdg", schema: { name: "_xdm.context.profile" }, identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" }, default: true,
  });
  const policy = { id: policyRecord.id, ...evaluatedPolicy(policyRecord) };
  const methods = (live: boolean) => ({ batch: { enabled: !live }, continuous: { enabled: live }, synchronous: { enabled: false } });
  const input = (name: string, pql: string, live: boolean, excludeOptOut = true) => ({
    name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL" as const, format: "pql/text" as const, value: pql }, evaluationInfo: methods(live), mergePolicyId: policy.id,
    dataGovernancePolicy: { excludeOptOut },
  });
  /** The definition as a job evaluates it (job-runner.ts definitionsOf, backfill-runner.ts jobDefinition). */
  const jobDefinitionOf = async (id: string): Promise<JobDefinition> => {
    const rec = (await metadata.definitions.get(scope, id))!;
    return { id, query: parse(rec.canonicalText), references: rec.references, excludeOptOut: rec.definition.dataGovernancePolicy.excludeOptOut, policy };
  };
  /** A batch job's evaluation of one definition plus writing its changes (job-runner.ts run). */
  const referenceJob = async (label: string, pql: string, excludeOptOut = true) => {
    const def = await jobDefinitionOf((await definitions.create(tenant, input(label, pql, false, excludeOptOut))).id);
    let evalMs = 0;
    const t = await timed(async () => {
      const t0 = performance.now();
      const outcome = await evaluateJob(store, scope, [def], { now: NOW, snapshots, limits: tenant.limits });
      evalMs = performance.now() - t0;
      await store.applyMembershipSets(scope, outcome.memberships, { source: "batch", at: NOW });
      return outcome.counters.get(def.id)!;
    });
    const members = await membersOf(store, scope, def.id);
    console.log(`(${label}) reference — a batch job's evaluation of the definition + writing its changes: ${s2(t.ms)} = evaluation ${s2(evalMs)} + writing ${s2(t.ms - evalMs)} ` +
      `(${t.value.realized} entered, ${t.value.exited} exited); CPU ${s2(t.cpuMs)}; ${members.length} members`);
    return { ms: t.ms, cpuMs: t.cpuMs, members };
  };
  /** The backfill that `change` queues, until it ended: wall and CPU from the change's call. */
  const backfillOf = async (change: () => Promise<string>) => {
    let id = "";
    const t = await timed(async () => {
      id = await change();
      const v = ended.get(id);
      return v ?? new Promise<BackfillView>((resolve) => waiters.set(id, resolve));
    });
    ended.delete(id);
    const v = t.value;
    if (v.state !== "succeeded") throw new Error(`backfill of ${id} ${v.state}: ${v.error ?? ""}`);
    return { id, view: v, ms: t.ms, cpuMs: t.cpuMs };
  };

  // 2. The resident snapshot, built once.
  const build = await timed(() => snapshots.get(store, scope, policy, { events: true }));
  console.log(`snapshot: ${build.value.profileCount} profiles, ${build.value.base.events.length} events built in ${s(build.ms)} (CPU ${s(build.cpuMs)}; once, resident); ` +
    `RSS ${gb(process.memoryUsage().rss)}, peak so far ${gb(peak())}`);
  /** A batch definition evaluated once as a job evaluates it, nothing written: its members. */
  const warmUp = async (label: string, pql: string) => {
    const def = await jobDefinitionOf((await definitions.create(tenant, input(label, pql, false))).id);
    return (await evaluateJob(store, scope, [def], { now: NOW, snapshots })).counters.get(def.id)!.qualified;
  };
  const warm = await timed(() => warmUp("warm-up", WARM_UP));
  console.log(`  warm-up: another definition evaluated once in ${s(warm.ms)} (the snapshot handed to the evaluation pool; not measured)`);
  const close = async () => {
    unfollow();
    await runner.stop();
    await streaming.close();
    await snapshots.close();
    await repo.close();
    await metadata.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  if (args.computed) {
    const { runComputedBackfill } = await import("./lib/computed-backfill.js");
    const passed = await runComputedBackfill({
      tenant, store, metadata, snapshots, clock, referenceJob, warmUp, timed, target, scan: args["computed-scan"]!,
      sizes: `${build.value.profileCount} profiles / ${build.value.base.events.length} events`,
    });
    await close();
    if (!passed) {
      console.log("MEMBERS DIFFER FROM THE ATTRIBUTE'S COUNT (see above)");
      process.exitCode = 1;
    }
    return;
  }

  // 3–4. The reference, then D created as a continuous definition.
  const ref = await referenceJob("D", D);
  const stopProfile = await startCpuProfile(args["cpu-profile"]!, "(b)");
  counting = true;
  const created = await backfillOf(async () => (await definitions.create(tenant, input("D (continuous)", D, true))).id);
  counting = false;
  await stopProfile();
  const live = await membersOf(store, scope, created.id);
  const b = created.view;
  const evaluateMs = Date.parse(b.evaluatedAt!) - Date.parse(b.startedAt!);
  console.log(`(b) D created as a continuous definition → backfill complete in ${s2(created.ms)} (CPU ${s2(created.cpuMs)}); ` +
    `${b.entered} entered, ${b.exited} exited, ${b.fenced} fenced, ${b.total} changes decided; ${live.length} members, ${sameMembers(live, ref.members) ? "equal to the reference's" : "DIFFERENT from the reference's"}`);
  const ratio = created.ms / ref.ms;
  console.log(`  ratio backfill / reference = ${ratio.toFixed(2)} (wall), ${(created.cpuMs / ref.cpuMs).toFixed(2)} (CPU); the backfill's stored times have a manual clock (${evaluateMs} ms: not measured)`);
  if (args.explain) printCalls("(b)");
  let ok = sameMembers(live, ref.members) && b.entered === ref.members.length && b.exited === 0;

  // 5. The edit: D' references first, then D edited.
  const refEdited = await referenceJob("D'", D_EDITED);
  counting = true;
  const edited = await backfillOf(async () => {
    await definitions.overwrite(tenant, created.id, input("D (continuous)", D_EDITED, true));
    return created.id;
  });
  counting = false;
  if (args.explain) printCalls("(c)");
  const after = await membersOf(store, scope, created.id);
  const net = symmetricDifference(live, refEdited.members);
  const e = edited.view;
  const written = e.entered + e.exited;
  const editOk = sameMembers(after, refEdited.members) && written === net;
  console.log(`(c) D edited into D' → backfill complete in ${s2(edited.ms)} (CPU ${s2(edited.cpuMs)}); ${e.entered} entered + ${e.exited} exited = ${written} transitions written ` +
    `(net change ${net}: ${written === net ? "only the net change" : "NOT the net change"}); ${after.length} members, ${sameMembers(after, refEdited.members) ? "equal to the reference's" : "DIFFERENT from the reference's"}; ` +
    `ratio to D''s reference ${(edited.ms / refEdited.ms).toFixed(2)}`);
  ok &&= editOk;
  // One more than expected: a doubled transition shows (the stores answer 10,000 without a limit).
  const log = await store.listTransitions(scope, { definitionId: created.id, limit: ref.members.length + net + 1 });
  const doubled = log.length !== ref.members.length + net;
  console.log(`  transition log of D: ${log.length} (${doubled ? "NOT" : "equal to"} its members after (b) + the edit's net change)`);
  ok &&= !doubled;

  console.log(`peak RSS ${gb(peak())}; load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  // The sizes the snapshot holds (with --reuse, whatever the file was loaded with).
  const sizes = `${build.value.profileCount} profile entries / ${build.value.base.events.length} events`;
  target(`time to a complete audience ≤ one batch job's evaluation of it + writing its changes (${sizes})`,
    `${s2(created.ms)} against ${s2(ref.ms)}, ratio ${ratio.toFixed(2)}`, ratio <= 1);
  target("an edit's backfill ≤ the batch job of the edited definition", `${s2(edited.ms)} against ${s2(refEdited.ms)}, ratio ${(edited.ms / refEdited.ms).toFixed(2)}`, edited.ms <= refEdited.ms);

  await close();
  if (!ok) {
    console.log("MEMBERS OR TRANSITIONS DIFFER (see above)");
    process.exitCode = 1;
  }
}

await main();
