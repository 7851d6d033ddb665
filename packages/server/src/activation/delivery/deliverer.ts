// The delivery engine: follows the enabled dataflows (DataflowDirectory), keeps the transition
// log's settled horizon (log-horizon.ts) and runs one FlowRunner per dataflow it holds the lease
// of. With PostgreSQL several hubs share the database: a flow is delivered by the hub holding its
// session advisory lock (taken on a dedicated connection; lost with it, when another hub takes
// over from the stored state). Serves DeliveryReports (stats, runs, resend) to the API.
import { rm } from "node:fs/promises";
import type pg from "pg";
import type { Registry } from "prom-client";
import type { ProfileStore } from "../../profiles/store.js";
import { ApiError } from "../../services/errors.js";
import { type MergePolicySpec, type TenantScope } from "../../profiles/types.js";
import type { Dataflow, DataflowDirectory, DeadLetter, DeliveryReports, DeliveryStats } from "../types.js";
import { FileExporter, type FileExportOptions, type FileExportReports } from "./file-export.js";
import { FileExportStore, type ExportRunRow } from "./file-export-store.js";
import { flowExportDir, runExportDir } from "./file-writer.js";
import { FlowRunner } from "./flow-runner.js";
import { LogHorizon } from "./log-horizon.js";
import { deliveryMetrics, type DeliveryMetrics } from "./metrics.js";
import { DeliveryStateStore, type RunRow } from "./state-store.js";
import { DELIVERY_ELSEWHERE } from "../delivery-commands.js";

export interface DelivererDeps {
  directory: DataflowDirectory;
  profiles: ProfileStore;
  /** Where the delivery state lives: the data directory (embedded) or the database. */
  storage: { dataDir: string; databaseUrl?: string | undefined };
  allowPrivateNetworks: boolean;
  metrics?: Registry;
  /** The tenant's default merge policy for attribute reads (default: the identity graph, timestamp-ordered). */
  mergePolicy?: (scope: TenantScope) => Promise<MergePolicySpec>;
  now?: () => number;
  onError?: (err: unknown, what: string) => void;
  /** How often the log horizon and the flow list are looked at (ms). */
  pollMs?: number;
  reconcileMs?: number;
  /** File destinations: page size, file split limits, how often the schedule is looked at. */
  fileExports?: FileExportOptions;
}

export interface Deliverer {
  reports: DeliveryReports;
  /** Whether this server delivers the flow and has nothing left to do for it now (tests, shutdown). */
  idle(scope: TenantScope, flowId: string): boolean;
  /** Resolves once the state is open and the first flows started. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

const DEFAULT_POLICY: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
/** Flows a FlowRunner delivers transition by transition (file flows export on a schedule instead). */
function streamed(f: Dataflow): boolean {
  return f.target.kind === "webhook" || f.target.kind === "nats";
}
const flowKey = (scope: TenantScope, flowId: string) => JSON.stringify([scope.orgId, scope.sandboxName, flowId]);

export class DeliveryEngine {
  private state: DeliveryStateStore | null = null;
  private horizon: LogHorizon | null = null;
  private readonly runners = new Map<string, FlowRunner>();
  /** Runners whose start (log position, snapshot jobs) is under way. */
  private readonly starting = new Map<string, Promise<void>>();
  /** File flows export on a schedule (file-export.ts), each under the same lease as a runner. */
  private readonly exporters = new Map<string, FileExporter>();
  private fileStore: FileExportStore | null = null;
  private fileOpening: Promise<FileExportStore> | null = null;
  /** Exporters stopping (a run finishing its page): a new one for the flow waits, so two never write one run. */
  private readonly exportersStopping = new Map<string, Promise<void>>();
  private readonly metrics: DeliveryMetrics;
  private readonly now: () => number;
  private pollTimer: NodeJS.Timeout | null = null;
  private reconcileTimer: NodeJS.Timeout | null = null;
  private leaseClient: pg.PoolClient | null = null;
  private leaseConnecting: Promise<pg.PoolClient> | null = null;
  private readonly leased = new Set<string>();
  private stopped = false;
  private polling = false;
  private reconciling: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private opening: Promise<void> | null = null;
  readonly ready: Promise<void>;

  constructor(private readonly deps: DelivererDeps) {
    this.metrics = deliveryMetrics(deps.metrics);
    this.now = deps.now ?? Date.now;
    this.ready = this.open();
    this.ready.catch((err: unknown) => this.error(err, "delivery engine start"));
  }

  private error(err: unknown, what: string): void {
    this.deps.onError?.(err, what);
  }

  private async open(): Promise<void> {
    this.unsubscribe = this.deps.directory.onChange((scope, flowId) => void this.refresh(scope, flowId).catch((err: unknown) => this.error(err, `dataflow ${flowId}`)));
    await this.reconcile();
    this.reconcileTimer = setInterval(() => void this.reconcile().catch((err: unknown) => this.error(err, "dataflows")), this.deps.reconcileMs ?? 5000);
  }

  /**
   * The delivery state and the log horizon, opened when the first webhook flow (or a report) needs
   * them: a server without dataflows creates nothing and reads nothing.
   */
  private openState(): Promise<void> {
    this.opening ??= (async () => {
      const state = await DeliveryStateStore.open(this.deps.storage);
      const horizon = new LogHorizon(this.deps.profiles, this.now);
      await horizon.init(await state.lowestEnqueued());
      // A new flow starts where the log is settled: wait for that (PostgreSQL: the transactions
      // running at start have ended), so that `ready` means every enabled flow is delivering.
      while ((await horizon.advance()) === null && !this.stopped) await new Promise((r) => setTimeout(r, 50));
      this.state = state;
      this.horizon = horizon;
      this.schedulePoll();
    })();
    this.opening.catch(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private schedulePoll(): void {
    if (this.stopped) return;
    this.pollTimer = setTimeout(() => void this.poll(), this.deps.pollMs ?? 50);
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopped || this.horizon === null) return;
    this.polling = true;
    try {
      const before = this.horizon!.settled;
      const after = await this.horizon!.advance();
      if (after !== null && after !== before) for (const r of this.runners.values()) r.wake();
    } catch (err) {
      this.error(err, "transition log");
    } finally {
      this.polling = false;
      this.schedulePoll();
    }
  }

  /** Starts, updates and stops runners to match the enabled dataflows (and the leases held). */
  reconcile(): Promise<void> {
    this.reconciling ??= (async () => {
      try {
        const enabled = await this.deps.directory.listEnabled();
        const flows = enabled.filter(streamed);
        const wanted = new Map(flows.map((f) => [flowKey(f.scope, f.flowId), f]));
        for (const [k, r] of this.runners) if (!wanted.has(k)) await this.stopRunner(k, r);
        for (const [k, f] of wanted) await this.ensure(k, f);
        const files = new Map(enabled.filter(isFileFlow).map((f) => [flowKey(f.scope, f.flowId), f]));
        // The list may predate a flow created meanwhile (its exporter started by refresh): asked again before stopping.
        for (const [k, x] of this.exporters) if (!files.has(k) && !(await this.stillFileFlow(x.flow))) await this.stopExporter(k, x);
        for (const [k, f] of files) await this.ensureExporter(k, f);
      } finally {
        this.reconciling = null;
      }
    })();
    return this.reconciling;
  }

  private async refresh(scope: TenantScope, flowId: string): Promise<void> {
    await this.ready;
    const k = flowKey(scope, flowId);
    const f = await this.deps.directory.get(scope, flowId);
    const x = this.exporters.get(k);
    if (x !== undefined && (f === null || f.state !== "enabled" || !isFileFlow(f))) await this.stopExporter(k, x);
    if (f === null) await this.dropFileFlow(scope, flowId);
    else if (f.state === "enabled" && isFileFlow(f)) await this.ensureExporter(k, f);
    const r = this.runners.get(k);
    if (f === null || f.state !== "enabled" || !streamed(f)) {
      if (r !== undefined) await this.stopRunner(k, r);
      if (f === null && this.state !== null) await this.state.dropFlow(scope, flowId);
      return;
    }
    await this.ensure(k, f);
  }

  private async ensure(k: string, f: Dataflow): Promise<void> {
    if (this.stopped) return;
    const r = this.runners.get(k);
    if (r !== undefined) {
      r.update(f);
      return;
    }
    await this.openState();
    if (this.stopped || this.runners.has(k)) return;
    if (!(await this.lease(k)) || this.stopped || this.runners.has(k)) return;
    const runner = new FlowRunner(f, {
      profiles: this.deps.profiles,
      state: this.state!,
      metrics: this.metrics,
      horizon: () => this.horizon!.settled,
      mergePolicy: this.deps.mergePolicy ?? (async () => DEFAULT_POLICY),
      allowPrivateNetworks: this.deps.allowPrivateNetworks,
      now: this.now,
      onError: (err, what) => this.error(err, what),
    });
    this.runners.set(k, runner);
    const started = runner.start();
    this.starting.set(k, started.catch(() => undefined));
    try {
      await started;
    } catch (err) {
      this.runners.delete(k);
      await runner.stop();
      throw err;
    } finally {
      this.starting.delete(k);
    }
  }

  /**
   * Resolves once the flow is delivered here from a fixed log position (true), or is not
   * delivered here (false): the API answers a create or enable after this, so a transition
   * written after the answer is sent as a transition, not folded into the first snapshot.
   */
  async delivering(scope: TenantScope, flowId: string): Promise<boolean> {
    await this.refresh(scope, flowId);
    const k = flowKey(scope, flowId);
    await this.starting.get(k);
    return this.runners.has(k) || this.exporters.has(k);
  }

  private async stopRunner(k: string, r: FlowRunner): Promise<void> {
    this.runners.delete(k);
    await r.stop();
    await this.release(k);
  }

  // ---- file exports ------------------------------------------------------------

  /** The file export state, opened when the first file flow (or a report about one) needs it. */
  private openFiles(): Promise<FileExportStore> {
    this.fileOpening ??= FileExportStore.open(this.deps.storage).then((st) => (this.fileStore = st));
    this.fileOpening.catch(() => {
      this.fileOpening = null;
    });
    return this.fileOpening;
  }

  private async ensureExporter(k: string, f: Dataflow): Promise<void> {
    if (this.stopped) return;
    const x = this.exporters.get(k);
    if (x !== undefined) {
      x.update(f);
      return;
    }
    await this.exportersStopping.get(k);
    // The log horizon (incremental files read the settled log) and the lease come with the delivery state.
    await this.openState();
    const store = await this.openFiles();
    if (this.stopped || this.exporters.has(k)) return;
    if (!(await this.lease(k)) || this.stopped || this.exporters.has(k)) return;
    const exporter = new FileExporter(f, {
      profiles: this.deps.profiles,
      store,
      dataDir: this.deps.storage.dataDir,
      horizon: () => this.horizon?.settled ?? null,
      mergePolicy: this.deps.mergePolicy ?? (async () => DEFAULT_POLICY),
      now: this.now,
      onError: (err, what) => this.error(err, what),
      options: this.deps.fileExports ?? {},
    });
    this.exporters.set(k, exporter);
    try {
      await exporter.start();
    } catch (err) {
      this.exporters.delete(k);
      await exporter.stop();
      await this.release(k);
      throw err;
    }
  }

  private async stopExporter(k: string, x: FileExporter): Promise<void> {
    this.exporters.delete(k);
    await this.stopping(k, x);
    await this.release(k);
  }

  private stopping(k: string, x: FileExporter): Promise<void> {
    const p = x.stop().finally(() => {
      if (this.exportersStopping.get(k) === p) this.exportersStopping.delete(k);
    });
    this.exportersStopping.set(k, p);
    return p;
  }

  private async stillFileFlow(f: Dataflow): Promise<boolean> {
    const now = await this.deps.directory.get(f.scope, f.flowId);
    return now !== null && now.state === "enabled" && isFileFlow(now);
  }

  /** A deleted file flow: its export state and its files go with it (the API can no longer reach them). */
  private async dropFileFlow(scope: TenantScope, flowId: string): Promise<void> {
    const store = await this.openFiles();
    await store.dropFlow(scope, flowId);
    await rm(flowExportDir(this.deps.storage.dataDir, scope, flowId), { recursive: true, force: true });
  }

  exporter(scope: TenantScope, flowId: string): FileExporter | undefined {
    return this.exporters.get(flowKey(scope, flowId));
  }

  private async isFile(scope: TenantScope, flowId: string): Promise<boolean> {
    const f = await this.deps.directory.get(scope, flowId);
    return f !== null && isFileFlow(f);
  }

  async exportRuns(scope: TenantScope, flowId: string, q: { offset: number; limit: number }): Promise<{ items: ExportRunRow[]; total: number }> {
    return (await this.openFiles()).runs(scope, flowId, q.offset, q.limit);
  }

  async exportRun(scope: TenantScope, flowId: string, runId: string): Promise<ExportRunRow | null> {
    const r = await (await this.openFiles()).run(scope, runId);
    return r !== null && r.flowId === flowId ? r : null;
  }

  /** "Export now": a run queued on this server's exporter (started now if the flow was just enabled); 503 when another hub exports it. */
  async exportNow(scope: TenantScope, flowId: string): Promise<{ runId: string }> {
    await this.ready;
    const f = await this.deps.directory.get(scope, flowId);
    if (f === null || !isFileFlow(f)) throw new ApiError(400, "SEGMENTD-DESTINATION-400", `Flow '${flowId}' is not a file export flow`);
    const k = flowKey(scope, flowId);
    if (f.state === "enabled" && !this.exporters.has(k)) await this.ensureExporter(k, f);
    const x = this.exporters.get(k);
    if (x === undefined) {
      throw new ApiError(503, DELIVERY_ELSEWHERE, `Dataflow '${flowId}' is not exported by this server (another server holds its delivery lease); retry shortly`);
    }
    return { runId: await x.exportNow() };
  }

  /** PostgreSQL: the flow's session advisory lock on the lease connection; embedded: one process owns the data directory. */
  private async lease(k: string): Promise<boolean> {
    const pool = this.state!.pool;
    if (pool === null) return true;
    if (this.leased.has(k)) return true;
    if (this.leaseClient === null) {
      // One connection however many flows ask at once (a second one would hold its locks, unreleased, past stop()).
      this.leaseConnecting ??= pool.connect().then((c) => {
        c.on("error", () => this.leaseLost(c));
        this.leaseClient = c;
        return c;
      }).finally(() => {
        this.leaseConnecting = null;
      });
      await this.leaseConnecting;
    }
    if (this.leaseClient === null) return false;
    const rows = await this.leaseClient.query<{ ok: boolean }>("SELECT pg_try_advisory_lock(hashtext('segmentd.delivery'), hashtext($1)) AS ok", [k]);
    if (rows.rows[0]?.ok === true) this.leased.add(k);
    return this.leased.has(k);
  }

  private async release(k: string): Promise<void> {
    if (!this.leased.delete(k) || this.leaseClient === null) return;
    await this.leaseClient.query("SELECT pg_advisory_unlock(hashtext('segmentd.delivery'), hashtext($1))", [k]).catch(() => undefined);
  }

  /** The lease connection broke: every lock is gone, so every runner stops (another hub may take them). */
  private leaseLost(c: pg.PoolClient): void {
    if (this.leaseClient !== c) return;
    this.leaseClient = null;
    c.release(true);
    this.leased.clear();
    for (const [k, r] of this.runners) {
      this.runners.delete(k);
      void r.stop();
    }
    for (const [k, x] of this.exporters) {
      this.exporters.delete(k);
      void this.stopping(k, x);
    }
  }

  runner(scope: TenantScope, flowId: string): FlowRunner | undefined {
    return this.runners.get(flowKey(scope, flowId));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.ready.catch(() => undefined);
    if (this.pollTimer !== null) clearTimeout(this.pollTimer);
    if (this.reconcileTimer !== null) clearInterval(this.reconcileTimer);
    this.unsubscribe?.();
    await this.reconciling?.catch(() => undefined);
    for (const [k, r] of this.runners) await this.stopRunner(k, r);
    for (const [k, x] of this.exporters) await this.stopExporter(k, x);
    await this.fileOpening?.catch(() => undefined);
    await this.fileStore?.close();
    this.leaseClient?.release();
    this.leaseClient = null;
    await this.opening?.catch(() => undefined);
    if (this.pollTimer !== null) clearTimeout(this.pollTimer);
    await this.state?.close();
  }

  // ---- reports ---------------------------------------------------------------

  async stats(scope: TenantScope, flowId: string): Promise<DeliveryStats> {
    await this.ready;
    if (await this.isFile(scope, flowId)) {
      const t = await (await this.openFiles()).totals(scope, flowId);
      return { sent: t.rows, failed: t.failed, retrying: 0, dead: 0, lagSeconds: 0, lastError: t.lastError };
    }
    await this.openState();
    const s = await this.state!.flow(scope, flowId);
    const live = this.runner(scope, flowId)?.live() ?? { retrying: 0, lagSeconds: 0 };
    return { sent: s?.sent ?? 0, failed: s?.failed ?? 0, retrying: live.retrying, dead: s?.dead ?? 0, lagSeconds: live.lagSeconds, lastError: s?.lastError ?? null };
  }

  async runs(scope: TenantScope, flowId: string, q: { offset: number; limit: number }): Promise<{ items: unknown[]; total: number }> {
    await this.ready;
    if (await this.isFile(scope, flowId)) {
      const r = await this.exportRuns(scope, flowId, q);
      return { items: r.items.map(exportFlowRun), total: r.total };
    }
    await this.openState();
    const r = await this.state!.runs(scope, flowId, q.offset, q.limit);
    return { items: r.items.map(flowRun), total: r.total };
  }

  async run(scope: TenantScope, runId: string): Promise<unknown | null> {
    await this.ready;
    await this.openState();
    const r = await this.state!.run(scope, runId);
    if (r !== null) return flowRun(r);
    const x = await (await this.openFiles()).run(scope, runId);
    return x === null ? null : exportFlowRun(x);
  }

  /** The flow's runner here, started now if the flow was just enabled; a 503 when another hub delivers it (or it is not a webhook or NATS flow). */
  private async runnerHere(scope: TenantScope, flowId: string): Promise<FlowRunner> {
    await this.ready;
    if (this.runner(scope, flowId) === undefined) {
      const f = await this.deps.directory.get(scope, flowId);
      if (f !== null && f.state === "enabled" && streamed(f)) await this.ensure(flowKey(scope, flowId), f);
    }
    const r = this.runner(scope, flowId);
    if (r === undefined) {
      throw new ApiError(503, DELIVERY_ELSEWHERE, `Dataflow '${flowId}' is not delivered by this server (another server holds its delivery lease, or it is not a webhook or NATS flow); retry shortly`);
    }
    return r;
  }

  async resend(scope: TenantScope, flowId: string, audienceIds?: string[]): Promise<{ runId: string }> {
    const r = await this.runnerHere(scope, flowId);
    return { runId: await r.resend(audienceIds) };
  }

  async replayDead(scope: TenantScope, flowId: string, unitIds?: string[]): Promise<number> {
    const r = await this.runnerHere(scope, flowId);
    return r.replay(unitIds);
  }

  async deadLetters(scope: TenantScope, flowId: string): Promise<DeadLetter[]> {
    await this.ready;
    await this.openState();
    const units = await this.state!.units(scope, flowId, "dead");
    return units.map((u) => ({ unitId: u.unitId, webhookId: `msg_${flowId}_${u.unitId}`, items: u.items.length, attempts: u.attempts, lastError: u.lastError === null ? null : JSON.parse(u.lastError) as unknown }));
  }
}

/** AEP's flow-run shape (Flow Service `GET /runs`). */
function flowRun(r: RunRow): unknown {
  const status = r.dead > 0 ? "partialSuccess" : r.failed > 0 && r.sent === 0 ? "inProgress" : "success";
  return {
    id: r.runId,
    flowId: r.flowId,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    metrics: {
      durationSummary: { startedAtUTC: r.createdAt, completedAtUTC: r.updatedAt },
      recordSummary: { inputRecordCount: r.sent + r.dead, outputRecordCount: r.sent, failedRecordCount: r.dead },
      segmentd: { kind: r.kind, failedAttempts: r.failed },
    },
    activities: [{ id: "delivery", name: r.kind === "resend" ? "Activate now" : "Streaming delivery", statusSummary: { status } }],
    statusSummary: { status, ...(r.errors.length > 0 ? { errors: r.errors.map((e) => ({ code: e.status === undefined ? "SEGMENTD-DELIVERY-ERROR" : `SEGMENTD-DELIVERY-HTTP-${e.status}`, message: e.message, at: e.at })) } : {}) },
  };
}

/** A file export run in AEP's flow-run shape (record and file counts; segmentd's run status and trigger). */
export function exportFlowRun(r: ExportRunRow): unknown {
  // An expired run succeeded; only its files are gone (segmentd.status says so).
  const status = r.status === "success" || r.status === "expired" ? "success" : r.status === "failed" ? "failed" : "inProgress";
  const updatedAt = r.finishedAt ?? r.startedAt ?? r.createdAt;
  return {
    id: r.runId,
    flowId: r.flowId,
    createdAt: r.createdAt,
    updatedAt,
    metrics: {
      durationSummary: { startedAtUTC: r.startedAt ?? r.createdAt, ...(r.finishedAt === null ? {} : { completedAtUTC: r.finishedAt }) },
      recordSummary: { inputRecordCount: r.rows, outputRecordCount: r.rows, failedRecordCount: 0 },
      fileSummary: { outputFileCount: r.files },
      sizeSummary: { outputBytes: r.bytes },
      segmentd: { kind: "file-export", trigger: r.trigger, status: r.status, scheduledFor: r.dueAt === null ? null : new Date(r.dueAt).toISOString() },
    },
    activities: [{ id: "file-export", name: r.trigger === "manual" ? "Export now" : "Scheduled file export", statusSummary: { status } }],
    statusSummary: { status, ...(r.error === null || r.status !== "failed" ? {} : { errors: [{ code: "SEGMENTD-FILE-EXPORT-ERROR", message: r.error, at: new Date(updatedAt).toISOString() }] }) },
  };
}

function isFileFlow(f: Dataflow): boolean {
  return f.target.kind === "file";
}

/** The plugin hook: starts delivery for every enabled dataflow. */
export function startDeliverer(deps: DelivererDeps): Deliverer {
  const engine = new DeliveryEngine(deps);
  const reports = {
    stats: (s: TenantScope, f: string) => engine.stats(s, f),
    runs: (s: TenantScope, f: string, q: { offset: number; limit: number }) => engine.runs(s, f, q),
    run: (s: TenantScope, id: string) => engine.run(s, id),
    resend: (s: TenantScope, f: string, a?: string[]) => engine.resend(s, f, a),
    replayDead: (s: TenantScope, f: string, ids?: string[]) => engine.replayDead(s, f, ids),
    deadLetters: (s: TenantScope, f: string) => engine.deadLetters(s, f),
    delivering: (s: TenantScope, f: string) => engine.delivering(s, f),
    files: {
      exportRuns: (s, f, q) => engine.exportRuns(s, f, q),
      exportRun: (s, f, id) => engine.exportRun(s, f, id),
      exportNow: (s, f) => engine.exportNow(s, f),
      runDir: (s, f, id) => runExportDir(deps.storage.dataDir, s, f, id),
    } satisfies FileExportReports,
  };
  return { reports, ready: engine.ready, idle: (s, f) => engine.runner(s, f)?.idle() ?? engine.exporter(s, f)?.idle() ?? false, stop: () => engine.stop() };
}
