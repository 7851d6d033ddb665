// One file destination's exporter (docs/activation.md "File export"): at each scheduled instant
// (file-schedule.ts), or when asked ("export now"), a run writes one file series per selected
// audience into <dataDir>/exports/<org>/<sandbox>/<flow>/<run>/ — full mode every current member,
// incremental mode (after an audience's first, full file) the transitions of the log since the
// last run — then a manifest.json, then marks the run successful. Members and transitions are read
// in pages (a million-member audience is never held at once); attributes and identities are read
// as webhook payloads are (payload.ts). A run interrupted by a crash is found at the next start,
// marked failed and its directory removed; the schedule does not move past it, so it runs again.
import { randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import type { ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { Dataflow, FileTarget } from "../types.js";
import type { ExportManifest, ExportRunRow, FileExportStore, ManifestFile } from "./file-export-store.js";
import { anchorOf, dueAfter, firstDue, FREQUENCY_MS, nextAfterRun } from "./file-schedule.js";
import { csvHeader, csvLine, PartWriter, runExportDir, valueAt, writeFileAtomic } from "./file-writer.js";
import { buildPayload, type ProfilePayload } from "./payload.js";
import type { UnitItem } from "./state-store.js";

export interface FileExportOptions {
  /** Members or transitions read per page (default 2,000). */
  pageSize?: number;
  /** A file is split after this many rows (default 1,000,000). */
  maxFileRows?: number;
  /** ... or after this many bytes before compression (default 512 MiB). */
  maxFileBytes?: number;
  /** How often the schedule is looked at (default 5 s; a due instant is never waited past this). */
  tickMs?: number;
  /** After a failed scheduled run, the next attempt waits this long (default 60 s). */
  retryMs?: number;
  /** The files of a flow's newest this many successful runs are kept; older runs' files are removed (default 30). */
  keepRuns?: number;
}

export interface FileExportDeps {
  profiles: ProfileStore;
  store: FileExportStore;
  dataDir: string;
  /** How far the transition log is settled (log-horizon.ts). */
  horizon(): number | null;
  mergePolicy(scope: TenantScope): Promise<MergePolicySpec>;
  now(): number;
  onError(err: unknown, what: string): void;
  options: FileExportOptions;
}

/** What the file routes read (served beside DeliveryReports as `reports.files`). */
export interface FileExportReports {
  exportRuns(scope: TenantScope, flowId: string, q: { offset: number; limit: number }): Promise<{ items: ExportRunRow[]; total: number }>;
  exportRun(scope: TenantScope, flowId: string, runId: string): Promise<ExportRunRow | null>;
  /** Queues a run now; 503 when another server exports this flow, 400 when it is not a file flow. */
  exportNow(scope: TenantScope, flowId: string): Promise<{ runId: string }>;
  /** Where this server keeps a run's files. */
  runDir(scope: TenantScope, flowId: string, runId: string): string;
}

/** Longest wait for the log horizon to reach a run's start. */
const SETTLE_WAIT_MS = 30_000;
export const INTERRUPTED = "interrupted: the server stopped during the run; its files were removed";
class Stopped extends Error {}

export class FileExporter {
  private running = false;
  private again = false;
  private stopped = false;
  private started = false;
  private timer: NodeJS.Timeout | null = null;
  private retryAt = 0;
  private current: Promise<void> | null = null;

  constructor(public flow: Dataflow, private readonly deps: FileExportDeps) {}

  private get target(): FileTarget {
    if (this.flow.target.kind !== "file") throw new Error(`flow ${this.flow.flowId} is not a file flow`);
    return this.flow.target;
  }

  /** Recovers runs a crash interrupted, then follows the schedule. */
  async start(): Promise<void> {
    const { store } = this.deps;
    for (const r of await store.runsIn(this.flow.scope, this.flow.flowId, ["running"])) {
      await rm(runExportDir(this.deps.dataDir, this.flow.scope, this.flow.flowId, r.runId), { recursive: true, force: true });
      await store.failRun(this.flow.scope, r.runId, INTERRUPTED, this.deps.now());
    }
    this.started = true;
    this.wake();
  }

  update(flow: Dataflow): void {
    this.flow = flow;
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.current?.catch(() => undefined);
  }

  /** Idle: no run in progress or queued (tests). */
  idle(): boolean {
    return !this.running;
  }

  async exportNow(): Promise<string> {
    const runId = randomUUID();
    await this.deps.store.queueRun(this.flow.scope, this.flow.flowId, runId, "manual", null, this.deps.now());
    this.wake();
    return runId;
  }

  wake(): void {
    // Not before start() has loaded the stored state: a step on a half-loaded runner would
    // take every audience for added (a second snapshot) or race the crash recovery.
    if (this.stopped || !this.started) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.current = this.loop();
  }

  private async loop(): Promise<void> {
    let wait = this.deps.options.tickMs ?? 5000;
    try {
      do {
        this.again = false;
        wait = Math.min(wait, await this.step());
      } while (this.again && !this.stopped);
    } catch (err) {
      if (!(err instanceof Stopped)) this.deps.onError(err, `file export ${this.flow.flowId}`);
    } finally {
      this.running = false;
    }
    if (this.stopped) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), Math.max(1, wait));
  }

  /** Runs what is queued or due; returns how long to wait before looking again. */
  private async step(): Promise<number> {
    const { store } = this.deps;
    const scope = this.flow.scope;
    const tick = this.deps.options.tickMs ?? 5000;
    const schedule = await this.syncSchedule();
    for (;;) {
      if (this.stopped) return tick;
      const queued = (await store.runsIn(scope, this.flow.flowId, ["queued"]))[0];
      if (queued !== undefined) {
        await this.execute(queued);
        continue;
      }
      const st = schedule === null ? null : await store.flow(scope, this.flow.flowId);
      const now = this.deps.now();
      if (st === null) return tick;
      if (now >= st.nextDue && now >= this.retryAt) {
        // Instants missed while the server was down: one run, for the latest of them.
        const due = Math.max(st.nextDue, firstDue(st.anchor, st.periodMs, now));
        await store.queueRun(scope, this.flow.flowId, randomUUID(), "schedule", due, now);
        continue;
      }
      return Math.min(tick, Math.max(1, Math.max(st.nextDue, this.retryAt) - now));
    }
  }

  /** Stores the schedule when first seen or changed; null when the flow has no audience (nothing to schedule). */
  private async syncSchedule(): Promise<{ anchor: number; periodMs: number } | null> {
    const anchor = anchorOf(this.flow);
    if (anchor === null) return null;
    const periodMs = FREQUENCY_MS[this.target.frequency];
    const st = await this.deps.store.flow(this.flow.scope, this.flow.flowId);
    if (st !== null && st.anchor === anchor && st.periodMs === periodMs) return { anchor, periodMs };
    const nextDue = st === null || st.lastDue === null ? firstDue(anchor, periodMs, this.deps.now()) : dueAfter(anchor, periodMs, st.lastDue);
    await this.deps.store.saveSchedule(this.flow.scope, this.flow.flowId, { anchor, periodMs, nextDue });
    return { anchor, periodMs };
  }

  /**
   * The log position a run exports through: the settled horizon once it has reached the last
   * transition committed when the run started (so "export now" right after a write includes it);
   * past SETTLE_WAIT_MS (a long transaction holding a gap) whatever is settled then.
   */
  private async settledHorizon(): Promise<number> {
    const target = (await this.deps.profiles.transitionLogSeqs(Number.MAX_SAFE_INTEGER, 1)).max;
    const deadline = Date.now() + SETTLE_WAIT_MS;
    for (;;) {
      const h = this.deps.horizon();
      if (h !== null && (h >= target || Date.now() > deadline)) return h;
      if (this.stopped) throw new Stopped("stopped");
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async execute(run: ExportRunRow): Promise<void> {
    const { store, profiles } = this.deps;
    const flow = this.flow;
    const scope = flow.scope;
    const target = this.target;
    const startedAt = this.deps.now();
    await store.startRun(scope, run.runId, startedAt);
    const dir = runExportDir(this.deps.dataDir, scope, flow.flowId, run.runId);
    const writers: PartWriter[] = [];
    try {
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true });
      const through = await this.settledHorizon();
      const st = await store.flow(scope, flow.flowId);
      // A scheduled run exports the audiences whose start has come; "export now" every selected one.
      const at = run.dueAt ?? Number.POSITIVE_INFINITY;
      const audiences = [...new Set(flow.segmentSelectors.filter((s) => s.startTime <= at).map((s) => s.audienceId))];
      const incremental = target.mode === "incremental";
      const from = incremental ? st?.throughSeq ?? null : null;
      const done = new Set(incremental ? st?.doneAudiences ?? [] : []);
      const policy = await this.deps.mergePolicy(scope);
      const files: ManifestFile[] = [];
      for (const a of audiences) {
        const full = !incremental || from === null || !done.has(a);
        const series = new PartSeries(dir, a, full ? "full" : "incremental", target, flow, this.deps.options, writers);
        if (full) {
          let after = "0";
          for (;;) {
            this.checkStopped();
            const members = await profiles.listMembers(scope, a, { status: "realized", afterProfileId: after, limit: this.pageSize() });
            if (members.length === 0) break;
            const items: UnitItem[] = members.map((m) => ({ seq: 0, profileId: m.profileId, audienceId: a, status: "realized", at: Date.parse(m.lastQualificationTime) }));
            await series.add(await buildPayload(profiles, scope, items, flow.profileSelectors, policy));
            after = members[members.length - 1]!.profileId;
            if (members.length < this.pageSize()) break;
          }
        } else {
          let after = from!;
          for (;;) {
            this.checkStopped();
            const rows = await profiles.readTransitionLog(scope, { afterSeq: after, throughSeq: through, definitionIds: [a], limit: this.pageSize() });
            if (rows.length === 0) break;
            const items: UnitItem[] = rows.map((r) => ({ seq: r.seq, profileId: r.profileId, audienceId: a, status: r.to === "exited" ? "exited" : "realized", at: r.at }));
            await series.add(await buildPayload(profiles, scope, items, flow.profileSelectors, policy));
            after = rows[rows.length - 1]!.seq;
            if (rows.length < this.pageSize()) break;
          }
        }
        files.push(...(await series.finish()));
        done.add(a);
      }
      const finishedAt = this.deps.now();
      const manifest: ExportManifest = {
        runId: run.runId, flowId: flow.flowId, trigger: run.trigger, scheduledFor: run.dueAt === null ? null : new Date(run.dueAt).toISOString(),
        mode: target.mode, format: target.format, compression: target.gzip ? "GZIP" : "NONE", audiences,
        attributes: flow.profileSelectors.attributes.map((p) => p.replace(/^xdm:/, "")), identityNamespaces: [...flow.profileSelectors.identityNamespaces],
        files, logPositions: { from, through }, startedAt: new Date(startedAt).toISOString(), finishedAt: new Date(finishedAt).toISOString(),
      };
      await writeFileAtomic(dir, "manifest.json", `${JSON.stringify(manifest, null, 2)}\n`);
      const selected = new Set(flow.segmentSelectors.map((s) => s.audienceId));
      const progress = { throughSeq: through, doneAudiences: incremental ? [...done].filter((a) => selected.has(a)) : [] };
      const sched = run.trigger === "schedule" && run.dueAt !== null && st !== null
        ? { nextDue: nextAfterRun(st.anchor, st.periodMs, run.dueAt, finishedAt), lastDue: run.dueAt } : {};
      await store.finishRun(scope, flow.flowId, manifest, finishedAt, { ...progress, ...sched });
      if (run.trigger === "schedule") this.retryAt = 0;
      // Marked expired first (no longer served), then removed.
      for (const old of await store.expireRuns(scope, flow.flowId, Math.max(1, this.deps.options.keepRuns ?? 30), finishedAt)) {
        await rm(runExportDir(this.deps.dataDir, scope, flow.flowId, old), { recursive: true, force: true });
      }
    } catch (err) {
      for (const w of writers) await w.abort().catch(() => undefined);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      const message = err instanceof Stopped ? INTERRUPTED : err instanceof Error ? err.message : String(err);
      await store.failRun(scope, run.runId, message, this.deps.now());
      if (run.trigger === "schedule") this.retryAt = this.deps.now() + (this.deps.options.retryMs ?? 60_000);
      if (err instanceof Stopped) throw err;
      this.deps.onError(err, `file export ${flow.flowId} run ${run.runId}`);
    }
  }

  private checkStopped(): void {
    if (this.stopped) throw new Stopped("stopped");
  }

  private pageSize(): number {
    return Math.max(1, this.deps.options.pageSize ?? 2000);
  }
}

/** A file name from an audience id (kept when already safe). */
function fileBase(audienceId: string): string {
  return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,100}$/.test(audienceId) && !audienceId.includes("..") ? audienceId : `audience-${Buffer.from(audienceId).toString("hex").slice(0, 64)}`;
}

/** One audience's files in a run: rows appended in order, a new part when the current one is full. */
class PartSeries {
  private cur: PartWriter | null = null;
  private part = 0;
  private rows = 0;
  private bytes = 0;
  private readonly files: ManifestFile[] = [];
  private readonly ext: string;
  private readonly header: string[] | null;
  private readonly namespaces: string[];
  private readonly attributes: string[];

  constructor(private readonly dir: string, private readonly audienceId: string, private readonly mode: "full" | "incremental", private readonly target: FileTarget,
    flow: Dataflow, private readonly options: FileExportOptions, private readonly writers: PartWriter[]) {
    this.ext = `${target.format}${target.gzip ? ".gz" : ""}`;
    this.attributes = flow.profileSelectors.attributes.map((p) => p.replace(/^xdm:/, ""));
    this.namespaces = [...flow.profileSelectors.identityNamespaces];
    this.header = target.format === "csv" ? csvHeader(this.attributes, this.namespaces, mode === "incremental") : null;
  }

  private line(p: ProfilePayload): string {
    const m = p.segmentMembership.ups[this.audienceId]!;
    if (this.target.format === "ndjson") {
      const row = this.mode === "full" ? { ...p, _segmentd: { profileId: p._segmentd.profileId } } : p;
      return `${JSON.stringify(row)}\n`;
    }
    const byNs = new Map(Object.entries(p.identityMap).map(([ns, ids]) => [ns.toLowerCase(), ids]));
    const identities = this.namespaces.length > 0
      ? this.namespaces.map((ns) => (byNs.get(ns.toLowerCase()) ?? []).map((i) => i.id).join("|"))
      : [Object.keys(p.identityMap).length === 0 ? "" : p.identityMap];
    return csvLine([p._segmentd.profileId, this.audienceId, m.status, m.lastQualificationTime, ...(this.mode === "incremental" ? [p._segmentd.seqs.join(" ")] : []),
      ...this.attributes.map((a) => valueAt(p, a)), ...identities]);
  }

  private async open(): Promise<void> {
    this.part += 1;
    const name = `${fileBase(this.audienceId)}-${this.mode}-${String(this.part).padStart(4, "0")}.${this.ext}`;
    this.cur = new PartWriter(this.dir, name, this.target.gzip);
    this.writers.push(this.cur);
    this.rows = 0;
    this.bytes = 0;
    if (this.header !== null) await this.cur.write(csvLine(this.header));
  }

  private async close(): Promise<void> {
    if (this.cur === null) return;
    const w = await this.cur.finish();
    this.files.push({ name: w.name, audienceId: this.audienceId, mode: this.mode, part: this.part, rows: this.rows, bytes: w.bytes, sha256: w.sha256 });
    this.writers.splice(this.writers.indexOf(this.cur), 1);
    this.cur = null;
  }

  async add(payloads: readonly ProfilePayload[]): Promise<void> {
    const maxRows = this.options.maxFileRows ?? 1_000_000;
    const maxBytes = this.options.maxFileBytes ?? 512 * 1024 * 1024;
    let buf: string[] = [];
    for (const p of payloads) {
      const l = this.line(p);
      const n = Buffer.byteLength(l);
      if (this.cur === null) await this.open();
      else if (this.rows > 0 && (this.rows >= maxRows || this.bytes + n > maxBytes)) {
        if (buf.length > 0) await this.cur.write(buf.join(""));
        buf = [];
        await this.close();
        await this.open();
      }
      buf.push(l);
      this.rows += 1;
      this.bytes += n;
    }
    if (buf.length > 0) await this.cur!.write(buf.join(""));
  }

  /** Closes the last part; an audience without rows still gets one (empty) file. */
  async finish(): Promise<ManifestFile[]> {
    if (this.cur === null && this.files.length === 0) await this.open();
    await this.close();
    return this.files;
  }
}
