// The delivery engine: follows the enabled dataflows (DataflowDirectory), keeps the transition
// log's settled horizon (log-horizon.ts) and runs one FlowRunner per dataflow it holds the lease
// of. With PostgreSQL several hubs share the database: a flow is delivered by the hub holding its
// session advisory lock (taken on a dedicated connection; lost with it, when another hub takes
// over from the stored state). Serves DeliveryReports (stats, runs, resend) to the API.
import type pg from "pg";
import type { Registry } from "prom-client";
import type { ProfileStore } from "../../profiles/store.js";
import { ApiError } from "../../services/errors.js";
import { type MergePolicySpec, type TenantScope } from "../../profiles/types.js";
import type { Dataflow, DataflowDirectory, DeliveryReports, DeliveryStats } from "../types.js";
import { FlowRunner } from "./flow-runner.js";
import { LogHorizon } from "./log-horizon.js";
import { deliveryMetrics, type DeliveryMetrics } from "./metrics.js";
import { DeliveryStateStore, type RunRow } from "./state-store.js";

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
}

export interface Deliverer {
  reports: DeliveryReports & {
    /** Dead letters of a flow back to its queue (all, or these unit ids); how many. */
    replayDead(scope: TenantScope, flowId: string, unitIds?: string[]): Promise<number>;
    deadLetters(scope: TenantScope, flowId: string): Promise<Array<{ unitId: string; webhookId: string; items: number; attempts: number; lastError: unknown }>>;
  };
  /** Whether this server delivers the flow and has nothing left to do for it now (tests, shutdown). */
  idle(scope: TenantScope, flowId: string): boolean;
  /** Resolves once the state is open and the first flows started. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

const DEFAULT_POLICY: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const flowKey = (scope: TenantScope, flowId: string) => JSON.stringify([scope.orgId, scope.sandboxName, flowId]);

export class DeliveryEngine {
  private state: DeliveryStateStore | null = null;
  private horizon: LogHorizon | null = null;
  private readonly runners = new Map<string, FlowRunner>();
  private readonly metrics: DeliveryMetrics;
  private readonly now: () => number;
  private pollTimer: NodeJS.Timeout | null = null;
  private reconcileTimer: NodeJS.Timeout | null = null;
  private leaseClient: pg.PoolClient | null = null;
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
        // Webhooks only in this version (docs/activation.md "Delivery").
        const flows = (await this.deps.directory.listEnabled()).filter((f) => f.target.kind === "webhook");
        const wanted = new Map(flows.map((f) => [flowKey(f.scope, f.flowId), f]));
        for (const [k, r] of this.runners) if (!wanted.has(k)) await this.stopRunner(k, r);
        for (const [k, f] of wanted) await this.ensure(k, f);
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
    const r = this.runners.get(k);
    if (f === null || f.state !== "enabled" || f.target.kind !== "webhook") {
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
    try {
      await runner.start();
    } catch (err) {
      this.runners.delete(k);
      await runner.stop();
      throw err;
    }
  }

  private async stopRunner(k: string, r: FlowRunner): Promise<void> {
    this.runners.delete(k);
    await r.stop();
    await this.release(k);
  }

  /** PostgreSQL: the flow's session advisory lock on the lease connection; embedded: one process owns the data directory. */
  private async lease(k: string): Promise<boolean> {
    const pool = this.state!.pool;
    if (pool === null) return true;
    if (this.leased.has(k)) return true;
    if (this.leaseClient === null) {
      const c = await pool.connect();
      c.on("error", () => this.leaseLost(c));
      this.leaseClient = c;
    }
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
    this.leaseClient?.release();
    this.leaseClient = null;
    await this.opening?.catch(() => undefined);
    if (this.pollTimer !== null) clearTimeout(this.pollTimer);
    await this.state?.close();
  }

  // ---- reports ---------------------------------------------------------------

  async stats(scope: TenantScope, flowId: string): Promise<DeliveryStats> {
    await this.ready;
    await this.openState();
    const s = await this.state!.flow(scope, flowId);
    const live = this.runner(scope, flowId)?.live() ?? { retrying: 0, lagSeconds: 0 };
    return { sent: s?.sent ?? 0, failed: s?.failed ?? 0, retrying: live.retrying, dead: s?.dead ?? 0, lagSeconds: live.lagSeconds, lastError: s?.lastError ?? null };
  }

  async runs(scope: TenantScope, flowId: string, q: { offset: number; limit: number }): Promise<{ items: unknown[]; total: number }> {
    await this.ready;
    await this.openState();
    const r = await this.state!.runs(scope, flowId, q.offset, q.limit);
    return { items: r.items.map(flowRun), total: r.total };
  }

  async run(scope: TenantScope, runId: string): Promise<unknown | null> {
    await this.ready;
    await this.openState();
    const r = await this.state!.run(scope, runId);
    return r === null ? null : flowRun(r);
  }

  /** The flow's runner here, started now if the flow was just enabled; a 503 when another hub delivers it (or it is not a webhook flow). */
  private async runnerHere(scope: TenantScope, flowId: string): Promise<FlowRunner> {
    await this.ready;
    if (this.runner(scope, flowId) === undefined) {
      const f = await this.deps.directory.get(scope, flowId);
      if (f !== null && f.state === "enabled" && f.target.kind === "webhook") await this.ensure(flowKey(scope, flowId), f);
    }
    const r = this.runner(scope, flowId);
    if (r === undefined) {
      throw new ApiError(503, "SEGMENTD-DELIVERY-ELSEWHERE-503", `Dataflow '${flowId}' is not delivered by this server (another server holds its delivery lease, or it is not a webhook flow); retry shortly`);
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

  async deadLetters(scope: TenantScope, flowId: string): Promise<Array<{ unitId: string; webhookId: string; items: number; attempts: number; lastError: unknown }>> {
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
  };
  return { reports, ready: engine.ready, idle: (s, f) => engine.runner(s, f)?.idle() ?? false, stop: () => engine.stop() };
}
