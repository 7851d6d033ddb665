/**
 * Segment jobs over real HTTP on demo data (issue #7 acceptance 1–3):
 * definitions of every query type, a job, each member set checked against
 * `evaluate` profile by profile; a second job after data changes; cancel;
 * recovery after a crash; list / get / bulk-get / validation errors.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parse } from "@segmentd/pql";
import { ManualClock } from "../../src/index.js";
import { DEMO_DATASETS, demoEvents, demoProfile, demoProfiles } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore, ScanOptions, ScannedProfile } from "../../src/profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import type { SegmentJob, StoredJob } from "../../src/batch/jobs/segment-job.js";
import { ORG_A, call, openRepo, startBatchHarness, type BatchHarness } from "./batch-harness.js";
import { referenceMembers } from "./fixtures.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const PROFILES = 300;
const EVENTS = 4000;
const SCOPE: TenantScope = { orgId: ORG_A, sandboxName: "prod" };

const QUERIES: Record<string, string> = {
  profileOnly: 'homeAddress.countryCode = "US" and loyalty.tier in ["gold", "platinum"]',
  singleEvent: 'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.productViews") WHEN(< 23 hours before now)])',
  singleEventWithProfile: 'loyalty.points > 1000 and chain(xEvent, timestamp, [A: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 23 hours before now)])',
  multipleEvents: 'chain(xEvent, timestamp, [A: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 23 hours before now), B: WHAT(eventType = "commerce.productViews") WHEN(< 23 hours before now)])',
  purchasers30d: 'xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() >= 1',
  neverOpened: 'not (exists X from xEvent : X.eventType = "directMarketing.emailOpened")',
  birthdayMonth: "person.birthDate.getMonth() = currentMonth()",
  bigSpenders: "(sum X.commerce.order.priceTotal over X from xEvent where X.eventType = \"commerce.purchases\") > 500",
};

function jobOf(body: unknown): SegmentJob {
  return body as SegmentJob;
}

async function createDefinition(h: BatchHarness, name: string, value: string): Promise<string> {
  const r = await call(h, "POST", "/data/core/ups/segment/definitions", {
    name,
    expression: { type: "PQL", format: "pql/text", value },
    schema: { name: "_xdm.context.profile" },
    evaluationInfo: { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } },
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body as { id: string }).id;
}

async function runJob(h: BatchHarness, ids: string[]): Promise<SegmentJob> {
  const r = await call(h, "POST", "/data/core/ups/segment/jobs", ids.map((segmentId) => ({ segmentId })));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(jobOf(r.body).status, "NEW");
  await h.runner.idle();
  const g = await call(h, "GET", `/data/core/ups/segment/jobs/${jobOf(r.body).id}`);
  assert.equal(g.status, 200);
  return jobOf(g.body);
}

async function members(store: ProfileStore, id: string, status: "realized" | "exited" = "realized"): Promise<Set<string>> {
  return new Set((await store.listMembers(SCOPE, id, { status, limit: 100_000 })).map((m) => m.profileId));
}

/** Pauses every scan before its second chunk until `release()` (to catch a job while PROCESSING). */
function gate(): { wrap: (p: ProfileStore) => ProfileStore; release: () => void; reached: Promise<void> } {
  let release!: () => void;
  let reached!: () => void;
  const opened = new Promise<void>((r) => (release = r));
  const hit = new Promise<void>((r) => (reached = r));
  return {
    release,
    reached: hit,
    wrap: (p) =>
      new Proxy(p, {
        get(target, prop, receiver) {
          if (prop !== "scanProfiles") return Reflect.get(target, prop, receiver) as unknown;
          return async function* (scope: TenantScope, policy: MergePolicySpec, o?: ScanOptions): AsyncIterable<ScannedProfile[]> {
            let n = 0;
            for await (const chunk of target.scanProfiles(scope, policy, o)) {
              if (n++ === 1) {
                reached();
                await opened;
              }
              yield chunk;
            }
          };
        },
      }),
  };
}

describe("segment jobs API", () => {
  let h: BatchHarness & { store: TestStoreHandle };
  const ids: Record<string, string> = {};
  let ofSegments: string;
  const clock = new ManualClock(NOW);

  before(async () => {
    h = await startBatchHarness("jobs", { clock, chunkSize: 64 });
    const profilesDs = (await h.profiles.createDataset(SCOPE, DEMO_DATASETS.profiles, NOW)).id;
    const eventsDs = (await h.profiles.createDataset(SCOPE, DEMO_DATASETS.events, NOW)).id;
    const demo = { profiles: PROFILES, events: EVENTS, now: NOW, seed: 3 };
    const rec = (xs: Iterable<unknown>) => [...xs].map((value, index) => ({ index, value }));
    await ingestRecords(h.profiles, SCOPE, profilesDs, rec(demoProfiles(demo)), { now: NOW - 10_000 });
    await ingestRecords(h.profiles, SCOPE, eventsDs, rec(demoEvents(demo)), { now: NOW - 10_000 });
    for (const [name, q] of Object.entries(QUERIES)) ids[name] = await createDefinition(h, name, q);
    ofSegments = await createDefinition(h, "segmentOfSegments", `inSegment("${ids["profileOnly"]}") and loyalty.points > 2000`);
  });
  after(async () => {
    await h.close();
  });

  it("runs a job over every query type; each member set equals evaluate run profile by profile", async () => {
    const all = [ofSegments, ...Object.values(ids)];
    const job = await runJob(h, all);
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    // Anonymous demo visitors are profiles of their own: every stored profile is scanned.
    assert.equal(job.metrics.totalProfiles, await h.profiles.countProfiles(SCOPE));
    assert.ok(job.metrics.totalProfiles! > PROFILES);
    assert.ok(job.metrics.totalTime.totalTimeInMs !== undefined && job.metrics.profileSegmentationTime.totalTimeInMs !== undefined);
    let nonEmpty = 0;
    const expected = new Map<string, Set<string>>();
    for (const [name, id] of Object.entries(ids)) {
      const want = await referenceMembers(h.profiles, parse(QUERIES[name]!), { excludeOptOut: true, scope: SCOPE, now: NOW });
      expected.set(id, want);
      assert.deepEqual(await members(h.profiles, id), want, name);
      assert.equal(job.metrics.segmentedProfileCounter?.[id], want.size, name);
      assert.deepEqual(job.metrics.segmentedProfileByStatusCounter?.[id], { realized: want.size, existing: 0, exited: 0 });
      if (want.size > 0) nonEmpty++;
    }
    const sos = await referenceMembers(h.profiles, parse(`inSegment("${ids["profileOnly"]}") and loyalty.points > 2000`), {
      excludeOptOut: true, scope: SCOPE, now: NOW, members: new Map([[ids["profileOnly"]!, expected.get(ids["profileOnly"]!)!]]),
    });
    assert.ok(sos.size > 0);
    assert.deepEqual(await members(h.profiles, ofSegments), sos);
    assert.ok(nonEmpty >= 6, `most demo audiences are non-empty (${nonEmpty})`);
    // The default back end is columnar; a definition partly evaluated on row objects says why.
    assert.equal(job.metrics.evaluation?.[ids["profileOnly"]!], "columnar");
    for (const id of all) assert.match(job.metrics.evaluation?.[id] ?? "", /^(columnar|in-memory: .+)$/, id);
    const byNs = job.metrics.segmentedProfileByNamespaceCounter?.[ids["profileOnly"]!];
    assert.equal(byNs?.["crmid"], expected.get(ids["profileOnly"]!)!.size);
  });

  it("a second job after data changes records exited and keeps the others existing", async () => {
    const id = ids["profileOnly"]!;
    const before = await members(h.profiles, id);
    const leavers = [...before].slice(0, 3);
    clock.set(NOW + 60_000);
    // Downgrade three members to bronze: they leave the gold/platinum audience.
    const ds = (await h.profiles.listDatasets(SCOPE)).find((d) => d.schemaClass === "profile")!.id;
    const updates = [];
    for (const pid of leavers) {
      const crm = (await h.profiles.graphIdentities(SCOPE, pid)).find((i) => i.namespace === "crmid")!;
      updates.push({ identityMap: { CRMID: [{ id: crm.id, primary: true }] }, loyalty: { tier: "bronze" }, _repo: { modifyDate: new Date(NOW + 30_000).toISOString() } });
    }
    await ingestRecords(h.profiles, SCOPE, ds, updates.map((value, index) => ({ index, value })), { now: NOW + 30_000 });
    const job = await runJob(h, [id]);
    assert.equal(job.status, "SUCCEEDED");
    assert.deepEqual(job.metrics.segmentedProfileByStatusCounter?.[id], { realized: 0, existing: before.size - 3, exited: 3 });
    assert.equal(job.metrics.segmentedProfileCounter?.[id], before.size - 3);
    assert.deepEqual(await members(h.profiles, id, "exited"), new Set(leavers));
    const transitions = await h.profiles.listTransitions(SCOPE, { definitionId: id, since: NOW + 60_000 });
    assert.deepEqual(new Set(transitions.map((t) => `${t.profileId}:${t.from}->${t.to}:${t.source}`)), new Set(leavers.map((p) => `${p}:realized->exited:batch`)));
    const m = (await h.profiles.getMemberships(SCOPE, leavers[0]!)).find((x) => x.definitionId === id);
    assert.equal(m?.status, "exited");
  });

  it("lists, filters by status and property, pages, gets and bulk-gets jobs", async () => {
    const list = await call(h, "GET", "/data/core/ups/segment/jobs?limit=1");
    assert.equal(list.status, 200);
    const body = list.body as { _page: { totalCount: number; pageSize: number }; children: SegmentJob[]; _links: { next: { href?: string } } };
    assert.equal(body._page.totalCount, 2);
    assert.equal(body._page.pageSize, 1);
    assert.equal(body._links.next.href, "/data/core/ups/segment/jobs?start=1&limit=1");
    const newest = body.children[0]!;
    const asc = (await call(h, "GET", "/data/core/ups/segment/jobs?sort=creationTime:asc")).body as { children: SegmentJob[] };
    assert.equal(asc.children[1]!.id, newest.id);
    const byProp = (await call(h, "GET", `/data/core/ups/segment/jobs?property=segments~segmentId==${ofSegments}`)).body as { children: SegmentJob[] };
    assert.deepEqual(byProp.children.map((j) => j.id), [asc.children[0]!.id]);
    const byStatus = (await call(h, "GET", "/data/core/ups/segment/jobs?status=FAILED")).body as { _page: { totalCount: number } };
    assert.equal(byStatus._page.totalCount, 0);
    const bad = await call(h, "GET", "/data/core/ups/segment/jobs?status=DONE");
    assert.equal(bad.status, 400);
    assert.equal((bad.body as { errors: Record<string, Array<{ code: string; message: string }>> }).errors["400"]![0]!.message, "Invalid status \"DONE\": use one of NEW, QUEUED, PROCESSING, CANCELLING, CANCELLED, FAILED, SUCCEEDED");
    const bulk = await call(h, "POST", "/data/core/ups/segment/jobs/bulk-get", { ids: [{ id: newest.id }, { id: "nope" }] });
    assert.equal(bulk.status, 207);
    const results = (bulk.body as { results: Record<string, { id?: string; errors?: unknown }> }).results;
    assert.equal(results[newest.id]!.id, newest.id);
    assert.deepEqual(results["nope"]!.errors, { "404": [{ code: 404, message: "Not found." }] });
    const missing = await call(h, "GET", "/data/core/ups/segment/jobs/nope");
    assert.equal(missing.status, 404);
    const other = await call(h, "GET", `/data/core/ups/segment/jobs/${newest.id}`, undefined, "dev");
    assert.equal(other.status, 404, "another sandbox never sees the job");
  });

  it("refuses unknown definitions and empty jobs, storing nothing", async () => {
    const before = ((await call(h, "GET", "/data/core/ups/segment/jobs")).body as { _page: { totalCount: number } })._page.totalCount;
    const r = await call(h, "POST", "/data/core/ups/segment/jobs", [{ segmentId: ids["profileOnly"] }, { segmentId: "no-such-def" }]);
    assert.equal(r.status, 400);
    assert.deepEqual((r.body as { errors: unknown }).errors, { "400": [{ code: "SEGMENTD-BATCH-UNKNOWN-DEFINITION-400", message: "Segment definitions not found: no-such-def" }] });
    const e = await call(h, "POST", "/data/core/ups/segment/jobs", []);
    assert.equal(e.status, 400);
    assert.deepEqual((e.body as { errors: unknown }).errors, { "400": [{ code: "SEGMENTD-BATCH-JOB-400", message: "A segment job needs at least one segmentId" }] });
    const after = ((await call(h, "GET", "/data/core/ups/segment/jobs")).body as { _page: { totalCount: number } })._page.totalCount;
    assert.equal(after, before);
  });

  it("DELETE of a finished job deletes it (Adobe's \"cancel or delete\"): 204, then 404; other jobs and the memberships stay", async () => {
    const before = (await call(h, "GET", "/data/core/ups/segment/jobs?limit=100")).body as { children: SegmentJob[]; _page: { totalCount: number } };
    const job = before.children.find((j) => j.status === "SUCCEEDED")!;
    const members = await h.profiles.countMembers(SCOPE, job.segments[0]!.segmentId);
    const r = await call(h, "DELETE", `/data/core/ups/segment/jobs/${job.id}`);
    assert.equal(r.status, 204);
    assert.equal(r.body, null);
    const gone = await call(h, "GET", `/data/core/ups/segment/jobs/${job.id}`);
    assert.equal(gone.status, 404);
    assert.deepEqual((gone.body as { errors: unknown }).errors, { "404": [{ code: "SEGMENTD-NOT-FOUND-404", message: `Segment job with id '${job.id}' was not found` }] });
    const after = (await call(h, "GET", "/data/core/ups/segment/jobs?limit=100")).body as { children: SegmentJob[]; _page: { totalCount: number } };
    assert.equal(after._page.totalCount, before._page.totalCount - 1);
    assert.deepEqual(after.children.map((j) => j.id), before.children.filter((j) => j.id !== job.id).map((j) => j.id));
    assert.deepEqual(await h.profiles.countMembers(SCOPE, job.segments[0]!.segmentId), members);
    const again = await call(h, "DELETE", `/data/core/ups/segment/jobs/${job.id}`);
    assert.equal(again.status, 404);
  });
});

describe("segment job cancellation and crash recovery", () => {
  it("cancelling a processing job ends CANCELLED with no partial memberships", async () => {
    const g = gate();
    const h = await startBatchHarness("cancel", { clock: new ManualClock(NOW), chunkSize: 10, wrapProfiles: g.wrap });
    try {
      const ds = (await h.profiles.createDataset(SCOPE, DEMO_DATASETS.profiles, NOW)).id;
      await ingestRecords(h.profiles, SCOPE, ds, Array.from({ length: 50 }, (_, i) => ({ index: i, value: demoProfile(i, { now: NOW, seed: 5 }) })), { now: NOW });
      const id = await createDefinition(h, "everyone", "true");
      const created = await call(h, "POST", "/data/core/ups/segment/jobs", [{ segmentId: id }]);
      const jobId = jobOf(created.body).id;
      await g.reached;
      assert.equal(jobOf((await call(h, "GET", `/data/core/ups/segment/jobs/${jobId}`)).body).status, "PROCESSING");
      const del = await call(h, "DELETE", `/data/core/ups/segment/jobs/${jobId}`);
      assert.equal(del.status, 204);
      assert.equal(jobOf((await call(h, "GET", `/data/core/ups/segment/jobs/${jobId}`)).body).status, "CANCELLING");
      g.release();
      await h.runner.idle();
      const job = jobOf((await call(h, "GET", `/data/core/ups/segment/jobs/${jobId}`)).body);
      assert.equal(job.status, "CANCELLED");
      assert.deepEqual(await h.profiles.listMembers(SCOPE, id), []);
      assert.deepEqual(await h.profiles.listTransitions(SCOPE), []);
    } finally {
      g.release();
      await h.close();
    }
  });

  it("after a crash, a job left PROCESSING is FAILED and memberships are the last complete job's", async () => {
    const h1 = await startBatchHarness("crash", { clock: new ManualClock(NOW) });
    const ds = (await h1.profiles.createDataset(SCOPE, DEMO_DATASETS.profiles, NOW)).id;
    await ingestRecords(h1.profiles, SCOPE, ds, Array.from({ length: 30 }, (_, i) => ({ index: i, value: demoProfile(i, { now: NOW, seed: 6 }) })), { now: NOW });
    const id = await createDefinition(h1, "gold", 'loyalty.tier = "gold"');
    const done = await runJob(h1, [id]);
    assert.equal(done.status, "SUCCEEDED");
    const snapshot = await members(h1.profiles, id);
    // What kill -9 during a job leaves behind: a job record saying PROCESSING, no membership written.
    const crashed: StoredJob = { job: { ...done, id: "crashed-job", status: "PROCESSING", metrics: { totalTime: { startTimeInMs: NOW }, profileSegmentationTime: {} } }, definitionIds: [id] };
    await h1.close({ keepData: true });
    const repo = openRepo(h1.batchLocation);
    await repo.insert("segment-job", { scope: SCOPE, id: "crashed-job", status: "PROCESSING", creationTime: NOW + 1, doc: crashed });
    await repo.close();
    const h2 = await startBatchHarness("crash2", { clock: new ManualClock(NOW + 5000), reuse: { store: h1.store, profileLocation: h1.profileLocation, batchLocation: h1.batchLocation } });
    try {
      const job = jobOf((await call(h2, "GET", "/data/core/ups/segment/jobs/crashed-job")).body);
      assert.equal(job.status, "FAILED");
      assert.deepEqual(job.errors, [{ code: "SEGMENTD-JOB-INTERRUPTED", msg: "The service stopped while the job was processing; no membership of this job was written" }]);
      assert.deepEqual(await members(h2.profiles, id), snapshot);
    } finally {
      await h2.close();
    }
  });
});
