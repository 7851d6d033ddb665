/**
 * Work done once with three hubs (issue #43), as real processes: nats-server and three
 * `segmentd serve --nats --database-url` on one PostgreSQL database (scheduler pass every 500 ms,
 * lifecycle poll every 500 ms). Each once-only role (schedules, lifecycle, partition tick) is held
 * by exactly one hub (`segmentd_hub_lease_held` on /metrics); a schedule firing every 15 s makes
 * one segment job per due time; the schedules holder killed (-9) 1.5 s before a due time: another
 * hub holds the lease within 10 s and the due time is fired once (the jobs in the database are
 * exactly the due times', by their derived ids); a due dataset expiration runs once; recovery
 * fails a dead hub's processing job and leaves a live hub's alone, also when the killed
 * hub starts again (and takes its share of the roles); 200 work orders sent to the three hubs at
 * once for a quota's last 50 units consume exactly the allowance. The takeover time and the late
 * firing's delay are measured and printed.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { HUB_LEASE_BUCKET, HUB_ROLES, type HubRole } from "../../src/cluster/hub-leases.js";
import { firingJobId } from "../../src/batch/schedules/schedule-service.js";
import { REPO_ROOT, killAll, spawnTs, waitFor, type Spawned } from "../helpers/spawn.js";
import { freshSchema, withUser } from "../helpers/test-store.js";

const CLI = path.join(REPO_ROOT, "packages/server/src/cli/main.ts");
const ORG = "LEASE0000000000000000000000@AdobeOrg";
const TOKEN = "leases-token";
const KEY = "leases-key";
const EVERY_MS = 15_000;
const CRON = "0/15 * * * * ?";
const TAKEOVER_LIMIT_MS = 10_000;
const NAMES = ["A", "B", "C"] as const;
type Name = (typeof NAMES)[number];


const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

describe("three hubs: once-per-deployment work under leases", { timeout: 300_000 }, () => {
  let dir: string;
  let schema: string;
  let fresh: Awaited<ReturnType<typeof freshSchema>> | undefined;
  let databaseUrl: string;
  let nats: RunningNatsServer;
  let db: pg.Client;
  const procs = new Map<Name, Spawned>();
  const urls = new Map<Name, string>();
  const dead = new Set<Name>();
  const figures: string[] = [];
  let scheduleId = "";
  let createdAt = 0;
  let start: (n: Name) => Promise<void> = async () => {};

  const live = () => NAMES.filter((n) => !dead.has(n));
  const call = async (hub: Name, method: string, url: string, body?: unknown) => {
    const headers = { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };
    const r = await fetch(urls.get(hub)! + url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>) };
  };
  /** The roles each live hub says it holds. */
  const held = async (): Promise<Map<Name, Set<HubRole>>> => {
    const out = new Map<Name, Set<HubRole>>();
    await Promise.all(live().map(async (n) => {
      const text = await (await fetch(`${urls.get(n)!}/metrics`)).text();
      const roles = new Set<HubRole>();
      for (const r of HUB_ROLES) if (new RegExp(`^segmentd_hub_lease_held\\{role="${r}"\\} 1$`, "m").test(text)) roles.add(r);
      out.set(n, roles);
    }));
    return out;
  };
  const holdersOf = (h: Map<Name, Set<HubRole>>, role: HubRole) => [...h].filter(([, roles]) => roles.has(role)).map(([n]) => n);
  /** The segment jobs of the schedule in the database: id → creation (epoch ms). */
  const jobs = async (): Promise<Map<string, number>> => {
    const r = await db.query<{ id: string; created: string }>(
      `SELECT id, created FROM ${schema}_batch.batch_resources WHERE kind = 'segment-job' AND doc->'job'->'properties'->>'scheduleId' = $1`,
      [scheduleId],
    );
    return new Map(r.rows.map((x) => [x.id, Number(x.created)]));
  };
  /** The due times of the schedule from its creation to `until`. */
  const dues = (until: number) => {
    const out: number[] = [];
    for (let d = Math.floor(createdAt / EVERY_MS) * EVERY_MS + EVERY_MS; d <= until; d += EVERY_MS) out.push(d);
    return out;
  };
  /** Waits until `ms` past a due time (away from the boundary), then checks: one job per due time, none else. */
  const assertOncePerDue = async (label: string) => {
    const into = Date.now() % EVERY_MS;
    if (into < 3_000) await sleep(3_000 - into);
    const expected = dues(Date.now()).map((d) => firingJobId(scheduleId, d)).sort();
    const actual = [...(await jobs()).keys()].sort();
    assert.ok(expected.length > 0, `${label}: a due time has passed`);
    assert.deepEqual(actual, expected, `${label}: one job per due time`);
    figures.push(`${label}: ${actual.length} jobs for ${expected.length} due times`);
  };

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-leases-"));
    fresh = await freshSchema("t_leases");
    ({ schema, databaseUrl } = fresh);
    const config = path.join(dir, "segmentd.config.json");
    writeFileSync(config, JSON.stringify({
      host: "127.0.0.1",
      port: 0,
      logLevel: "warn",
      auth: { staticTokens: [{ token: TOKEN, orgs: [ORG] }], apiKeys: [KEY] },
      organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }],
      batch: { defaultSchedule: false, scheduleTickMs: 500 },
      hygiene: {
        pollIntervalMs: 500,
        defaults: { datasetExpirationQuota: 5, dailyConsumerDeleteIdentitiesQuota: 1000, monthlyConsumerDeleteIdentitiesQuota: 1_000_000, monthlyUpdatedFieldIdentitiesQuota: 0 },
      },
    }));
    nats = await startNatsServer({ dir: path.join(dir, "nats"), domain: "hub" });
    start = async (n: Name) => {
      mkdirSync(path.join(dir, `hub-${n}`), { recursive: true });
      const p = spawnTs(CLI, ["serve", "-c", config, "-d", path.join(dir, `hub-${n}`), "--nats", nats.url, "--database-url", databaseUrl, "--no-demo"]);
      procs.set(n, p);
      urls.set(n, (await waitFor(p, /listening on (http:\/\/\S+)/, 120_000))[1]!);
    };
    // The first creates the schemas and the default merge policy; the others then start together.
    await start("A");
    await Promise.all([start("B"), start("C")]);
    db = new pg.Client({ connectionString: withUser(databaseUrl) });
    await db.connect();
  });

  after(async () => {
    console.log(figures.join("\n"));
    // The hubs' errors, if any (logLevel warn): what a failed assertion above may need.
    for (const [n, p] of procs) {
      const errors = (p.stdout() + p.stderr()).split("\n").filter((l) => /"level":(50|60)|Error/.test(l));
      if (errors.length > 0) console.log(`hub ${n}:\n${errors.slice(-10).join("\n")}`);
    }
    await db?.end().catch(() => {});
    killAll();
    await nats?.kill().catch(() => {});
    await fresh?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("each role is held by exactly one hub, spread over the three", async () => {
    const t0 = Date.now();
    let h = await held();
    // A holds every role alone first; B and C take their share at their next rounds.
    while (!HUB_ROLES.every((r) => holdersOf(h, r).length === 1) || [...h.values()].some((roles) => roles.size !== 1)) {
      assert.ok(Date.now() - t0 < 20_000, `roles not spread one per hub: ${JSON.stringify([...h].map(([n, r]) => [n, [...r]]))}`);
      await sleep(200);
      h = await held();
    }
    figures.push(`roles spread one per hub ${Date.now() - t0} ms after the third hub was ready`);
  });

  it("a schedule due every 15 s makes one job per due time with three hubs", async () => {
    // Away from a due time, so that which due times follow the creation is certain.
    const into = Date.now() % EVERY_MS;
    if (into > EVERY_MS - 2_000) await sleep(EVERY_MS - into + 500);
    createdAt = Date.now();
    const r = await call("A", "POST", "/data/core/ups/config/schedules", { name: "every 15 s", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: CRON, state: "active" });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    scheduleId = r.json!.id as string;
    // Two due times.
    const second = dues(createdAt + 2 * EVERY_MS)[1]!;
    await sleep(second - Date.now() + 1_000);
    await assertOncePerDue("three hubs");
  });

  it("the schedules holder killed 1.5 s before a due time: another hub takes the lease within 10 s and fires it once", async () => {
    const holder = holdersOf(await held(), "schedules");
    assert.equal(holder.length, 1, `one holder of schedules: ${holder.join(",")}`);
    const victim = holder[0]!;
    const due = (Math.floor(Date.now() / EVERY_MS) + 1) * EVERY_MS + (Date.now() % EVERY_MS > EVERY_MS - 3_000 ? EVERY_MS : 0);
    await sleep(due - 1_500 - Date.now());
    const killedAt = Date.now();
    procs.get(victim)!.child.kill("SIGKILL");
    await procs.get(victim)!.exited;
    dead.add(victim);
    let takeover: number | null = null;
    let taker: Name | undefined;
    while (Date.now() - killedAt < 15_000) {
      const now = holdersOf(await held(), "schedules");
      if (now.length === 1) {
        takeover = Date.now() - killedAt;
        taker = now[0];
        break;
      }
      await sleep(100);
    }
    assert.ok(takeover !== null && takeover <= TAKEOVER_LIMIT_MS, `schedules lease taken over after ${takeover} ms (limit ${TAKEOVER_LIMIT_MS})`);
    figures.push(`kill -9 of hub ${victim} (schedules holder) 1.5 s before a due time: hub ${taker} held the lease after ${takeover} ms`);
    const id = firingJobId(scheduleId, due);
    let fired: number | undefined;
    while (fired === undefined && Date.now() - killedAt < 20_000) {
      fired = (await jobs()).get(id);
      if (fired === undefined) await sleep(100);
    }
    assert.ok(fired !== undefined, "the due time the dead holder missed was fired");
    figures.push(`the missed due time fired ${fired - due} ms after it was due (${fired - killedAt} ms after the kill)`);
    await assertOncePerDue("after the takeover");
    // And the next due time, by the new holder as usual.
    const next = dues(Date.now() + EVERY_MS).at(-1)!;
    await sleep(next - Date.now() + 1_000);
    await assertOncePerDue("one due time later");
    // Every role is held again, by the two hubs left.
    const h = await held();
    for (const r of HUB_ROLES) assert.equal(holdersOf(h, r).length, 1, `${r} held by one hub`);
  });

  it("a due dataset expiration runs once with the hubs left", async () => {
    const hub = live()[0]!;
    const ds = await call(hub, "POST", "/data/foundation/catalog/dataSets", {
      name: "Expiring",
      schemaRef: { id: "https://ns.adobe.com/xdm/context/profile", contentType: "application/vnd.adobe.xed+json;version=1" },
      tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
    });
    assert.equal(ds.status, 201, JSON.stringify(ds.json));
    const datasetId = (ds.json as unknown as string[])[0]!.replace("@/dataSets/", "");
    const ttl = await call(hub, "POST", "/data/core/hygiene/ttl", { datasetId, displayName: "soon", expiry: new Date(Date.now() + 25 * 3_600_000).toISOString() });
    assert.equal(ttl.status, 201, JSON.stringify(ttl.json));
    // The API allows no expiry sooner than 24 h: made due in the database.
    const moved = await db.query(`UPDATE hygiene_expirations SET expiry = $1 WHERE dataset_id = $2`, [Date.now() + 1_000, datasetId]);
    assert.equal(moved.rowCount, 1);
    const t0 = Date.now();
    let statuses: string[] = [];
    while (Date.now() - t0 < 15_000) {
      const r = await call(hub, "GET", `/data/core/hygiene/ttl/${datasetId}?include=history`);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      statuses = (r.json!.history as Array<{ status: string }>).map((x) => x.status);
      if (r.json!.status === "completed") break;
      await sleep(200);
    }
    assert.deepEqual(statuses, ["created", "executing", "completed"]);
    figures.push(`dataset expiration completed once ${Date.now() - t0} ms after it was made due`);
  });

  it("recovery fails the processing jobs of a dead hub, not those of a live one", async () => {
    // Two jobs PROCESSING as far as the database says: one by a live hub (its heartbeat in the lease bucket), one by a hub gone.
    const nc = await connect({ servers: nats.url });
    let liveHub = "";
    try {
      const kv = await new Kvm(jetstream(nc)).open(HUB_LEASE_BUCKET);
      for await (const k of await kv.keys("w.*")) liveHub ||= k.slice(2);
    } finally {
      await nc.close();
    }
    assert.match(liveHub, /^hub-\d+-[0-9a-f]{8}$/);
    const table = `${schema}_batch.batch_resources`;
    const [model] = (await db.query<{ org: string; sandbox: string; doc: { job: Record<string, unknown> } }>(`SELECT org, sandbox, doc FROM ${table} WHERE kind = 'segment-job' LIMIT 1`)).rows;
    assert.ok(model !== undefined);
    const ids = { live: "00000000-0000-5000-8000-00000000000a", dead: "00000000-0000-5000-8000-00000000000b" } as const;
    for (const [which, id] of Object.entries(ids)) {
      const doc = { ...model.doc, job: { ...model.doc.job, id, status: "PROCESSING", properties: {}, updateTime: Date.now() - 60_000 }, runBy: which === "live" ? liveHub : "hub-1-deadbeef" };
      await db.query(`INSERT INTO ${table} (kind, org, sandbox, id, status, created, doc) VALUES ('segment-job', $1, $2, $3, 'PROCESSING', $4, $5)`, [model.org, model.sandbox, id, Date.now(), JSON.stringify(doc)]);
    }
    const status = async (id: string) => (await db.query<{ status: string; doc: { job: { errors?: Array<{ code: string }> } } }>(`SELECT status, doc FROM ${table} WHERE kind = 'segment-job' AND id = $1`, [id])).rows[0]!;
    const t0 = Date.now();
    while ((await status(ids.dead)).status === "PROCESSING" && Date.now() - t0 < 10_000) await sleep(100);
    const failed = await status(ids.dead);
    assert.equal(failed.status, "FAILED");
    assert.deepEqual(failed.doc.job.errors?.map((e) => e.code), ["SEGMENTD-JOB-INTERRUPTED"]);
    figures.push(`a dead hub's processing job failed by the schedules holder's recovery after ${Date.now() - t0} ms`);
    // Several more passes, and a hub starting again (its start-up recovery): the live hub's job is still its own.
    await sleep(2_000);
    assert.equal((await status(ids.live)).status, "PROCESSING");
    const victim = NAMES.find((n) => dead.has(n))!;
    const t1 = Date.now();
    await start(victim);
    dead.delete(victim);
    figures.push(`hub ${victim} restarted in ${Date.now() - t1} ms`);
    assert.equal((await status(ids.live)).status, "PROCESSING");
    await db.query(`DELETE FROM ${table} WHERE kind = 'segment-job' AND id = $1`, [ids.live]);
    // The restarted hub takes its share: one role per hub again, and still one job per due time.
    let h = await held();
    while ([...h.values()].some((roles) => roles.size !== 1) || h.size !== 3) {
      assert.ok(Date.now() - t1 < 60_000, `roles not spread again: ${JSON.stringify([...h].map(([n, r]) => [n, [...r]]))}`);
      await sleep(200);
      h = await held();
    }
    const next = dues(Date.now() + EVERY_MS).at(-1)!;
    await sleep(next - Date.now() + 1_000);
    await assertOncePerDue("after the restart");
  });

  it("200 work orders over the three hubs at once for a quota's last 50 units: exactly 50 accepted, consumption at the allowance", async () => {
    const WO = "/data/core/hygiene/workorder";
    const order = (prefix: string, k: number) => ({ action: "delete_identity", datasetId: "ALL", displayName: prefix, identities: Array.from({ length: k }, (_, i) => ({ namespace: { code: "email" }, id: `${prefix}-${i}@x.com` })) });
    const quota = async (hub: Name) => {
      const r = await call(hub, "GET", "/data/core/hygiene/quota");
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const q = (r.json!.quotas as Array<{ name: string; consumed: number }>).find((x) => x.name === "dailyConsumerDeleteIdentitiesQuota")!;
      return q.consumed;
    };
    assert.equal(live().length, 3);
    const warm = await call("A", "POST", WO, order("warmup", 950));
    assert.equal(warm.status, 200, JSON.stringify(warm.json));
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => call(NAMES[i % 3]!, "POST", WO, order(`race-${i}`, 1))));
    const statuses = results.map((r) => r.status);
    assert.equal(statuses.filter((x) => x === 200).length, 50, JSON.stringify(statuses));
    assert.equal(statuses.filter((x) => x === 400).length, 150);
    for (const r of results) if (r.status === 400) assert.equal(r.json!.type, "http://ns.adobe.com/aep/errors/HYGN-3201-400");
    const acceptedBy = NAMES.map((n, k) => results.filter((r, i) => i % 3 === k && r.status === 200).length);
    figures.push(`quota race over three hubs: ${acceptedBy.join(" + ")} accepted by A, B, C`);
    assert.ok(acceptedBy.filter((n) => n > 0).length >= 2, `accepted by more than one hub: ${acceptedBy.join(",")}`);
    // Every hub reads the same consumption: the allowance, exactly.
    for (const n of NAMES) assert.equal(await quota(n), 1000, `hub ${n}'s quota`);
    // The accepted orders are the ones stored, once each.
    const stored = await db.query<{ n: string }>(`SELECT count(*) AS n FROM hygiene_work_orders WHERE display_name LIKE 'race-%'`);
    assert.equal(Number(stored.rows[0]!.n), 50);
  });
});
