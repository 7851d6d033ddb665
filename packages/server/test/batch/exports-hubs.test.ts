/**
 * Export jobs with several hubs (issue #43): two ExportServices over one batch repository and one
 * profile store, as hubs A and B run them (each with its runner id and the set of live hubs). A
 * hub's recovery leaves the exports of a live hub alone and fails those of a dead one (batches
 * aborted, nothing visible); a DELETE through B of an export A runs stores CANCELLING and A's
 * runner ends it CANCELLED; the API never shows the runner; two hubs numbering exports at once
 * give each its own id.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "../../src/index.js";
import { ExportService, CANCEL_MESSAGE, type ExportJob } from "../../src/batch/exports/export-service.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { TenantScope } from "../../src/profiles/types.js";
import type { BatchRepository } from "../../src/batch/store/types.js";
import type { SegmentJob } from "../../src/batch/jobs/segment-job.js";
import { ORG_A, call, openRepo, startBatchHarness, type BatchHarness } from "./batch-harness.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const SCOPE: TenantScope = { orgId: ORG_A, sandboxName: "prod" };

/** Holds getProfile calls once armed, until released (every one held so far). */
class Gate {
  private open: Promise<void> = Promise.resolve();
  private readonly releases: Array<() => void> = [];
  private hit: () => void = () => {};
  reached: Promise<void> = Promise.resolve();
  arm(): void {
    this.open = new Promise((r) => this.releases.push(r));
    this.reached = new Promise((r) => (this.hit = r));
  }
  async pass(): Promise<void> {
    this.hit();
    await this.open;
  }
  release(): void {
    for (const r of this.releases.splice(0)) r();
    this.open = Promise.resolve();
  }
}

/** Once armed, the next `n` lists of export jobs return together: the hubs read the same highest id. */
class Rendezvous {
  private waiting: Array<() => void> = [];
  private n = 0;
  arm(n: number): void {
    this.n = n;
  }
  async meet(): Promise<void> {
    if (this.n === 0) return;
    await new Promise<void>((r) => {
      this.waiting.push(r);
      if (this.waiting.length === this.n) {
        this.n = 0;
        for (const w of this.waiting.splice(0)) w();
      }
    });
  }
}

describe("export jobs over two hubs", () => {
  let h: BatchHarness & { store: TestStoreHandle };
  const clock = new ManualClock(NOW);
  const gate = new Gate();
  const together = new Rendezvous();
  let live = new Set(["hub-a", "hub-b"]);
  const repos: BatchRepository[] = [];
  let a: ExportService;
  let b: ExportService;
  let out: string;
  let gold: string;

  const held = (p: ProfileStore): ProfileStore =>
    new Proxy(p, {
      get(target, prop, receiver) {
        if (prop === "getProfile") {
          return async (...args: Parameters<ProfileStore["getProfile"]>) => {
            await gate.pass();
            return target.getProfile(...args);
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
  const ctx = () => h.tenant(ORG_A, "prod");
  const body = () => ({ filter: { segments: [{ segmentId: gold }] }, destination: { datasetId: out }, schema: { name: "_xdm.context.profile" } });
  const stored = async (id: number) => (await repos[0]!.get<Record<string, unknown>>("export-job", SCOPE, String(id)))!;
  const visible = async () => (await h.profiles.listLakeRecords(SCOPE, out, { afterSeq: 0, limit: 1000 })).length;

  before(async () => {
    h = await startBatchHarness("export-hubs", { clock });
    const crm = (await h.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    out = (await h.profiles.createDataset(SCOPE, { name: "hub exports", schemaClass: "profile", profileEnabled: false }, NOW)).id;
    const profile = (i: number) => ({ identityMap: { CRMID: [{ id: `p${i}`, primary: true }] }, loyalty: { tier: "gold" } });
    await ingestRecords(h.profiles, SCOPE, crm, Array.from({ length: 5 }, (_, i) => ({ index: i, value: profile(i) })), { now: NOW });
    const d = await call(h, "POST", "/data/core/ups/segment/definitions", { name: "gold", expression: { type: "PQL", format: "pql/text", value: 'loyalty.tier = "gold"' }, schema: { name: "_xdm.context.profile" } });
    gold = (d.body as { id: string }).id;
    const j = await call(h, "POST", "/data/core/ups/segment/jobs", [{ segmentId: gold }]);
    await h.runner.idle();
    assert.equal(((await call(h, "GET", `/data/core/ups/segment/jobs/${(j.body as SegmentJob).id}`)).body as SegmentJob).status, "SUCCEEDED");
    const hub = (runnerId: string) => {
      const opened = openRepo(h.batchLocation);
      repos.push(opened);
      const repo = new Proxy(opened, {
        get(target, prop, receiver) {
          if (prop === "list") {
            return async (...args: Parameters<BatchRepository["list"]>) => {
              const r = await target.list(...args);
              if (args[0] === "export-job") await together.meet();
              return r;
            };
          }
          return Reflect.get(target, prop, receiver) as unknown;
        },
      });
      return new ExportService(h.metadata, held(h.profiles), repo, clock, undefined, undefined, { runnerId, liveRunners: () => live });
    };
    a = hub("hub-a");
    b = hub("hub-b");
  });
  after(async () => {
    gate.release();
    await a?.close();
    await b?.close();
    for (const r of repos) await r.close();
    await h.close();
  });

  it("B's recovery leaves A's running export alone; a DELETE through B cancels it on A; the runner is never shown", async () => {
    gate.arm();
    const job = await a.create(ctx(), body(), "req-1");
    await gate.reached;
    assert.equal((await stored(job.id)).status, "PROCESSING");
    assert.equal(((await stored(job.id)).doc as { runBy?: string }).runBy, "hub-a");
    clock.advance(60_000);
    await b.recover(live);
    assert.equal((await b.get(ctx(), String(job.id))).status, "PROCESSING", "a live hub's export is not failed by another hub's recovery");
    assert.equal("runBy" in (await b.get(ctx(), String(job.id))), false);
    assert.ok((await b.list(ctx(), { limit: 10 })).items.every((x) => !("runBy" in x)));

    assert.deepEqual(await b.cancel(ctx(), String(job.id)), { status: true, message: CANCEL_MESSAGE });
    assert.equal((await stored(job.id)).status, "CANCELLING");
    gate.release();
    await a.idle();
    const done = await b.get(ctx(), String(job.id));
    assert.equal(done.status, "CANCELLED", JSON.stringify(done));
    assert.equal((await h.profiles.getBatch(SCOPE, done.destination.batchId!))?.status, "aborted");
    assert.equal(await visible(), 0);
  });

  it("a dead hub's export is FAILED by the next recovery (batch aborted); its runner cannot overwrite that", async () => {
    gate.arm();
    const job = await a.create(ctx(), body(), "req-2");
    await gate.reached;
    clock.advance(60_000);
    live = new Set(["hub-b"]);
    await b.recover(live);
    const failed = await b.get(ctx(), String(job.id));
    assert.equal(failed.status, "FAILED");
    assert.deepEqual(failed.errors, [{ code: "SEGMENTD-EXPORT-INTERRUPTED", msg: "The service stopped while the export job was active; its unfinished batches were aborted" }]);
    assert.equal((await h.profiles.getBatch(SCOPE, failed.destination.batchId!))?.status, "aborted");
    // The "dead" hub was only slow: its runner finds the job no longer its own and stops.
    gate.release();
    await a.idle();
    assert.equal((await b.get(ctx(), String(job.id))).status, "FAILED");
    assert.equal(await visible(), 0);
    live = new Set(["hub-a", "hub-b"]);
  });

  it("an export just created on another hub is left alone even when that hub is not (yet) among the live ones", async () => {
    gate.arm();
    const job = await a.create(ctx(), body(), "req-3");
    await gate.reached;
    await b.recover(new Set(["hub-b"]));
    assert.equal((await b.get(ctx(), String(job.id))).status, "PROCESSING");
    gate.release();
    await a.idle();
    const done = await b.get(ctx(), String(job.id));
    assert.equal(done.status, "SUCCEEDED", JSON.stringify(done.errors));
    assert.equal(done.metrics.totalExportedProfileCounter, 5);
    assert.equal(await visible(), 5);
  });

  it("two hubs numbering exports at once give each its own id", async () => {
    // Each hub's first numbering reads the same highest id: one insert finds it taken and numbers again.
    together.arm(2);
    const made: ExportJob[] = await Promise.all([a.create(ctx(), body(), "req-4"), b.create(ctx(), body(), "req-5")]);
    await Promise.all([a.idle(), b.idle()]);
    const ids = made.map((j) => j.id);
    assert.equal(new Set(ids).size, 2, `ids ${ids.join(", ")}`);
    for (const j of made) assert.equal((await b.get(ctx(), String(j.id))).requestId, j.requestId);
  });
});
