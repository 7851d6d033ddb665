// File destinations (issue #38, acceptance 4) on the store under test: flows created through the
// Flow Service API export full or incremental member files (NDJSON, CSV, gzip) with a manifest;
// the files read back through the API equal listMembers (or the transitions since the last run);
// the schedule runs at its instants under an injected clock; a run killed with -9 is never listed
// with files; tenancy, path traversal and other bad input get their exact answers.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import fp from "fastify-plugin";
import { activationPlugin } from "../../src/activation/http/plugin.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import { startDeliverer, type Deliverer } from "../../src/activation/delivery/deliverer.js";
import { INTERRUPTED, type FileExportReports } from "../../src/activation/delivery/file-export.js";
import { dueAfter, firstDue, FREQUENCY_MS, nextAfterRun } from "../../src/activation/delivery/file-schedule.js";
import { parseCsv, runExportDir } from "../../src/activation/delivery/file-writer.js";
import type { Dataflow } from "../../src/activation/types.js";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { SystemClock } from "../../src/platform/clock.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { openProfileStore } from "../../src/profiles/open.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { API_KEY, arr, client, obj, ORG_A, ORG_B, startHarness, TOKEN_A, TOKEN_B, testConfig, type Res } from "../helpers/server-harness.js";
import { killAll, spawnTs, waitFor } from "../helpers/spawn.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { STORE_KIND } from "../profiles/test-store.js";
import { dropDeliverySchema, until } from "./delivery-harness.js";

const F = "/data/foundation/flowservice";
const FILE = { id: CONNECTION_SPEC_IDS.file, version: "1.0" };
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };
const scope = { orgId: ORG_A, sandboxName: "prod" };
const HOUR = 3_600_000;
/** A start far ahead: no scheduled run interferes with "export now". */
const LATER = { startDate: "2099-01-01", startTime: "00:00" };

type Obj = Record<string, unknown>;
interface Row { profileId: string; status: string; seqs: number[]; lqt: string; firstName?: string; email?: string; identityMap?: unknown }

describe("file destination", { timeout: 240_000 }, () => {
  let handle: TestStoreHandle;
  let profiles: ProfileStore;
  let app: FastifyInstance;
  let url = "";
  let tmp: string;
  /** The exporter's clock: real time moved by the schedule test. */
  let offset = 0;
  const now = () => Date.now() + offset;
  const errors: string[] = [];
  const pids: string[] = [];
  let a: ReturnType<typeof client>;

  before(async () => {
    handle = await createTestStore("act-files");
    tmp = mkdtempSync(path.join(os.tmpdir(), "segmentd-files-"));
    profiles = openProfileStore({ dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }) });
    const config = testConfig(handle);
    const clock = new SystemClock();
    app = Fastify({ logger: false });
    installErrorHandling(app);
    installBodyParsing(app);
    await app.register(fp(async () => {}, { name: "segmentd-profiles" }));
    await app.register(activationPlugin, {
      authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config),
      dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }),
      activation: { allowPrivateNetworks: true }, clock, profiles,
      audiences: async (_t, ids) => new Map(ids.filter((id) => id.startsWith("aud-")).map((id) => [id, `Audience ${id}`])),
      // The deliverer as the server starts it, with the test's clock, pages of 7 and files of at most 10 rows.
      startDeliverer: (deps) => startDeliverer({
        directory: deps.directory, profiles, allowPrivateNetworks: true, now,
        storage: { dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }) },
        fileExports: { pageSize: 7, maxFileRows: 10, tickMs: 50, keepRuns: 3 },
        onError: (err, what) => errors.push(`${what}: ${(err as Error).message}`),
      }),
    });
    url = await app.listen({ port: 0, host: "127.0.0.1" });
    a = client(url);

    // 25 profiles with identities and attributes (a name with a comma and quotes, for CSV).
    const ds = (await profiles.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, Date.now())).id;
    const records = Array.from({ length: 25 }, (_, i) => ({ index: i, value: {
      identityMap: { Email: [{ id: `p${i}@example.com`, primary: true }], ECID: [{ id: `E-${i}` }] },
      person: { name: { firstName: `Ann, "${i}"`, lastName: "L" } }, loyalty: { tier: i % 2 === 0 ? "gold" : "silver" },
    } }));
    const r = await ingestRecords(profiles, scope, ds, records, { now: Date.now() });
    assert.deepEqual(r.failed, []);
    for (let i = 0; i < 25; i++) pids.push((await profiles.findProfileId(scope, { namespace: "email", id: `p${i}@example.com` }))!);
    const t0 = Date.now() - 60_000;
    // aud-1: profiles 0–22, then 3 leaves (22 members: three files of at most 10 rows); aud-2: 20–24.
    await profiles.applyMembershipChanges(scope, [
      ...pids.slice(0, 23).map((p) => ({ profileId: p, definitionId: "aud-1", status: "realized" as const, source: "batch" as const, at: t0 })),
      ...pids.slice(20).map((p) => ({ profileId: p, definitionId: "aud-2", status: "realized" as const, source: "streaming" as const, at: t0 })),
    ]);
    await profiles.applyMembershipChanges(scope, [{ profileId: pids[3]!, definitionId: "aud-1", status: "exited", source: "batch", at: t0 + 1 }]);
  });

  after(async () => {
    await app.close();
    await profiles.close();
    killAll();
    await dropDeliverySchemaOf(handle);
    await handle.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });

  async function fileFlow(params: Obj, audiences: string[], opts: { schedule?: Obj; attributes?: string[] } = {}): Promise<string> {
    const conn = await a.post(`${F}/connections`, { name: "files", connectionSpec: FILE });
    assert.equal(conn.status, 201, conn.text);
    const tgt = await a.post(`${F}/targetConnections`, { name: "dir", baseConnectionId: obj(conn.json).id, connectionSpec: FILE, params });
    assert.equal(tgt.status, 201, tgt.text);
    const f = await a.post(`${F}/flows`, {
      name: "export", targetConnectionIds: [obj(tgt.json).id],
      transformations: [{ name: "GeneralTransform", params: {
        segmentSelectors: { selectors: audiences.map((id) => ({ type: "PLATFORM_SEGMENT", value: { id, ...(opts.schedule === undefined ? {} : { schedule: opts.schedule }) } })) },
        profileSelectors: { selectors: (opts.attributes ?? ["person.name.firstName", "identityMap.Email"]).map((p) => ({ type: "JSON_PATH", value: { path: p, operator: "EXISTS" } })) },
      } }],
    });
    assert.equal(f.status, 201, f.text);
    return String(obj(f.json).id);
  }

  async function runOf(flowId: string, runId: string): Promise<Obj> {
    const r = await a.get(`${F}/flows/${flowId}/exports/${runId}`);
    assert.equal(r.status, 200, r.text);
    return obj(arr(obj(r.json).items)[0]);
  }

  async function finished(flowId: string, runId: string): Promise<Obj> {
    let run: Obj = {};
    await until(async () => ["success", "failed"].includes(String((run = await runOf(flowId, runId)).status)), `export run ${runId}`, 60_000);
    return run;
  }

  async function exportNow(flowId: string): Promise<Obj> {
    const r = await a.post(`${F}/flows/${flowId}/exports`);
    assert.equal(r.status, 202, r.text);
    const run = await finished(flowId, String(obj(r.json).runId));
    assert.equal(run.status, "success", JSON.stringify(run));
    return run;
  }

  function filesOf(run: Obj): Array<{ name: string; audienceId: string; mode: string; rows: number; bytes: number; sha256: string }> {
    return arr(obj(run.manifest).files) as Array<{ name: string; audienceId: string; mode: string; rows: number; bytes: number; sha256: string }>;
  }

  /** A file as stored (Accept-Encoding: gzip, no decoding) or as a client without gzip gets it. */
  function download(flowId: string, runId: string, name: string, acceptGzip: boolean, who: { token: string; org: string } = { token: TOKEN_A, org: ORG_A }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      // The path as given (a URL would normalize `..` away before it is sent).
      const u = new URL(url);
      const req = http.get({ hostname: u.hostname, port: u.port, path: `${F}/flows/${flowId}/exports/${runId}/files/${name}`,
        headers: { authorization: `Bearer ${who.token}`, "x-api-key": API_KEY, "x-gw-ims-org-id": who.org, "x-sandbox-name": "prod", ...(acceptGzip ? { "accept-encoding": "gzip" } : {}) },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", reject);
    });
  }

  /** Every row of a run's files of one audience, read back through the API (checksums checked on the stored bytes). */
  async function rowsOf(flowId: string, run: Obj, audienceId: string, format: "ndjson" | "csv"): Promise<Row[]> {
    const out: Row[] = [];
    for (const f of filesOf(run).filter((x) => x.audienceId === audienceId)) {
      const stored = await download(flowId, String(run.runId), f.name, true);
      assert.equal(stored.status, 200, stored.body.toString());
      assert.equal(stored.body.length, f.bytes, `${f.name} bytes`);
      assert.equal(createHash("sha256").update(stored.body).digest("hex"), f.sha256, `${f.name} sha256`);
      const gz = f.name.endsWith(".gz");
      assert.equal(stored.headers["content-encoding"], gz ? "gzip" : undefined);
      assert.match(String(stored.headers["content-type"]), format === "csv" ? /^text\/csv/ : /^application\/x-ndjson/);
      const text = (gz ? gunzipSync(stored.body) : stored.body).toString("utf8");
      if (gz) assert.equal((await download(flowId, String(run.runId), f.name, false)).body.toString("utf8"), text, "decompressed for a client without gzip");
      const rows = format === "ndjson" ? ndjsonRows(text, audienceId) : csvRows(text);
      assert.equal(rows.length, f.rows, `${f.name} rows`);
      out.push(...rows);
    }
    return out;
  }

  function ndjsonRows(text: string, audienceId: string): Row[] {
    return text.split("\n").filter((l) => l !== "").map((l) => {
      const p = JSON.parse(l) as { _segmentd: { profileId: string; seqs?: number[] }; segmentMembership: { ups: Record<string, { status: string; lastQualificationTime: string }> };
        person?: { name?: { firstName?: string } }; identityMap: Record<string, Array<{ id: string }>> };
      const m = p.segmentMembership.ups[audienceId]!;
      return { profileId: p._segmentd.profileId, status: m.status, lqt: m.lastQualificationTime, seqs: p._segmentd.seqs ?? [], firstName: p.person?.name?.firstName,
        email: p.identityMap["email"]?.[0]?.id, identityMap: p.identityMap };
    });
  }

  function csvRows(text: string): Row[] {
    const [header, ...rows] = parseCsv(text);
    const col = (r: string[], name: string) => r[header!.indexOf(name)];
    return rows.map((r) => ({ profileId: col(r, "profileId")!, status: col(r, "status")!, lqt: col(r, "lastQualificationTime")!,
      seqs: (col(r, "seqs") ?? "").split(" ").filter((s) => s !== "").map(Number), firstName: col(r, "person.name.firstName"), email: col(r, "identityMap.email") }));
  }

  async function members(audienceId: string): Promise<string[]> {
    return (await profiles.listMembers(scope, audienceId, { limit: 10_000 })).map((m) => m.profileId);
  }

  test("schedule arithmetic: daily at the start time, every 3/6/8/12 h from it, missed instants once", () => {
    const anchor = Date.UTC(2026, 10, 29, 8, 30);
    assert.equal(firstDue(anchor, FREQUENCY_MS.DAILY, anchor - 1000), anchor);
    assert.equal(firstDue(anchor, FREQUENCY_MS.DAILY, anchor + 5 * HOUR), anchor, "the current slot is due at once");
    assert.equal(firstDue(anchor, FREQUENCY_MS.EVERY_8_HOURS, anchor + 17 * HOUR), anchor + 16 * HOUR);
    assert.equal(dueAfter(anchor, FREQUENCY_MS.EVERY_3_HOURS, anchor), anchor + 3 * HOUR);
    assert.equal(dueAfter(anchor, FREQUENCY_MS.EVERY_6_HOURS, anchor - 1), anchor);
    assert.equal(nextAfterRun(anchor, FREQUENCY_MS.EVERY_12_HOURS, anchor, anchor + 60_000), anchor + 12 * HOUR);
    assert.equal(nextAfterRun(anchor, FREQUENCY_MS.DAILY, anchor, anchor + 50 * HOUR), anchor + 72 * HOUR, "a run that ended two days late skips to the next instant");
  });

  test("full NDJSON: every member of each audience, split at the row limit, equal to listMembers, checksums matching; flow runs count them", async () => {
    const flowId = await fileFlow({ format: "ndjson" }, ["aud-1", "aud-2"], { schedule: LATER });
    const run = await exportNow(flowId);
    const manifest = obj(run.manifest);
    assert.equal(manifest.mode, "full");
    assert.equal(manifest.format, "ndjson");
    assert.equal(manifest.compression, "NONE");
    assert.deepEqual(manifest.audiences, ["aud-1", "aud-2"]);
    assert.deepEqual(filesOf(run).map((f) => [f.name, f.rows]), [["aud-1-full-0001.ndjson", 10], ["aud-1-full-0002.ndjson", 10], ["aud-1-full-0003.ndjson", 2], ["aud-2-full-0001.ndjson", 5]]);
    const rows1 = await rowsOf(flowId, run, "aud-1", "ndjson");
    assert.deepEqual(rows1.map((r) => r.profileId), await members("aud-1"));
    assert.ok(!rows1.some((r) => r.profileId === pids[3]), "the profile that left is not in a full file");
    assert.ok(rows1.every((r) => r.status === "realized"));
    const i0 = pids.indexOf(rows1[0]!.profileId);
    assert.equal(rows1[0]!.firstName, `Ann, "${i0}"`);
    assert.deepEqual(rows1[0]!.identityMap, { email: [{ id: `p${i0}@example.com` }] }, "only the selected namespace");
    assert.deepEqual((await rowsOf(flowId, run, "aud-2", "ndjson")).map((r) => r.profileId), await members("aud-2"));
    assert.equal(run.rows, 27);
    // The manifest is on disk too, and downloadable.
    const m = await download(flowId, String(run.runId), "manifest.json", false);
    assert.equal(m.status, 200);
    assert.deepEqual(JSON.parse(m.body.toString()), manifest);
    // Flow runs (AEP's GET /runs) list the export run with its counts.
    const runs = await a.get(`${F}/runs?property=flowId==${flowId}`);
    assert.equal(runs.status, 200, runs.text);
    const fr = obj(arr(obj(runs.json).items).find((x) => obj(x).id === run.runId));
    assert.deepEqual(obj(obj(fr.metrics).recordSummary), { inputRecordCount: 27, outputRecordCount: 27, failedRecordCount: 0 });
    assert.deepEqual(obj(obj(fr.metrics).fileSummary), { outputFileCount: 4 });
    assert.deepEqual(obj(fr.statusSummary), { status: "success" });
    const one = await a.get(`${F}/runs/${String(run.runId)}`);
    assert.equal(one.status, 200, one.text);
    assert.equal(obj(arr(obj(one.json).items)[0]).id, run.runId);
    const stats = obj(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).deliveryStats);
    assert.equal(stats.sent, 27);
  });

  test("CSV with gzip: stored bytes match the manifest, decompressed for clients without gzip; rows equal the members, quoting kept", async () => {
    const flowId = await fileFlow({ format: "csv", compression: "GZIP" }, ["aud-1"], { schedule: LATER });
    const run = await exportNow(flowId);
    assert.equal(obj(run.manifest).compression, "GZIP");
    assert.deepEqual(filesOf(run).map((f) => f.name), ["aud-1-full-0001.csv.gz", "aud-1-full-0002.csv.gz", "aud-1-full-0003.csv.gz"]);
    const rows = await rowsOf(flowId, run, "aud-1", "csv");
    assert.deepEqual(rows.map((r) => r.profileId), await members("aud-1"));
    for (const r of rows) {
      const i = pids.indexOf(r.profileId);
      assert.equal(r.firstName, `Ann, "${i}"`);
      assert.equal(r.email, `p${i}@example.com`);
      assert.equal(r.status, "realized");
    }
  });

  test("incremental: the first run is full, the next ones only the transitions since (realized and exited, with log positions); an added audience starts full", async () => {
    // Starting now: the schedule's first run (full) happens at once.
    const flowId = await fileFlow({ format: "ndjson", exportMode: "FIRST_FULL_THEN_INCREMENTAL", frequency: "EVERY_3_HOURS" }, ["aud-1"]);
    let first: Obj = {};
    await until(async () => {
      const list = arr(obj((await a.get(`${F}/flows/${flowId}/exports`)).json).items);
      first = obj(list[0] ?? {});
      return first.status === "success";
    }, "the first scheduled run", 30_000);
    assert.equal(first.trigger, "schedule");
    assert.deepEqual(filesOf(first).map((f) => f.mode), ["full", "full", "full"]);
    assert.deepEqual((await rowsOf(flowId, first, "aud-1", "ndjson")).map((r) => r.profileId), await members("aud-1"));
    const through = Number(obj(obj(first.manifest).logPositions).through);

    const t = Date.now();
    await profiles.applyMembershipChanges(scope, [
      { profileId: pids[24]!, definitionId: "aud-1", status: "realized", source: "streaming", at: t },
      { profileId: pids[5]!, definitionId: "aud-1", status: "exited", source: "batch", at: t },
      { profileId: pids[6]!, definitionId: "aud-2", status: "realized", source: "edge", at: t },
    ]);
    const second = await exportNow(flowId);
    assert.deepEqual(obj(obj(second.manifest).logPositions).from, through);
    assert.deepEqual(filesOf(second).map((f) => [f.name, f.mode, f.rows]), [["aud-1-incremental-0001.ndjson", "incremental", 2]]);
    const rows = await rowsOf(flowId, second, "aud-1", "ndjson");
    assert.deepEqual(rows.map((r) => [r.profileId, r.status, r.lqt]).sort(), [[pids[24]!, "realized", new Date(t).toISOString()], [pids[5]!, "exited", new Date(t).toISOString()]].sort());
    assert.ok(rows.every((r) => r.seqs.length === 1 && r.seqs[0]! > through));

    // Nothing changed: an empty incremental file. Then aud-2 is added: its first file is full.
    const third = await exportNow(flowId);
    assert.deepEqual(filesOf(third).map((f) => [f.mode, f.rows]), [["incremental", 0]]);
    const flow = await a.get(`${F}/flows/${flowId}`);
    const patch = await a.patch(`${F}/flows/${flowId}`, [{ op: "add", path: "/transformations/0/params/segmentSelectors/selectors/-", value: { type: "PLATFORM_SEGMENT", value: { id: "aud-2" } } }],
      { "if-match": String(obj(arr(obj(flow.json).items)[0]).etag) });
    assert.equal(patch.status, 200, patch.text);
    const fourth = await exportNow(flowId);
    assert.deepEqual(filesOf(fourth).map((f) => [f.audienceId, f.mode]), [["aud-1", "incremental"], ["aud-2", "full"]]);
    assert.deepEqual((await rowsOf(flowId, fourth, "aud-2", "ndjson")).map((r) => r.profileId), await members("aud-2"));

    // The flow keeps its newest 3 runs' files (keepRuns): the first run is expired, its files removed and no longer served.
    const expired = await runOf(flowId, String(first.runId));
    assert.equal(expired.status, "expired");
    assert.equal(expired.error, `files removed: the flow keeps the files of its newest 3 runs (expired ${new Date(Number(fourth.finishedAt)).toISOString()})`);
    assert.ok(!existsSync(runExportDir(handle.dataDir, scope, flowId, String(first.runId))));
    assert.deepEqual(errorOf(resOf(await download(flowId, String(first.runId), filesOf(first)[0]!.name, false))),
      { status: 404, code: "SEGMENTD-DESTINATION-404", message: `File '${filesOf(first)[0]!.name}' is not a file of export run '${String(first.runId)}'` });
    assert.equal((await runOf(flowId, String(second.runId))).status, "success");
  });

  test("bad input: another organization gets 404 and reads nothing; traversal 400; unknown run and unlisted file 404; a webhook flow 400; disabled 409", async () => {
    const flowId = await fileFlow({ format: "ndjson" }, ["aud-2"], { schedule: LATER });
    const run = await exportNow(flowId);
    const runId = String(run.runId);
    const name = filesOf(run)[0]!.name;
    const b = client(url, { token: TOKEN_B, org: ORG_B });
    const nf = { status: 404, code: "SEGMENTD-DESTINATION-404", message: `Flow with id '${flowId}' was not found` };
    assert.deepEqual(errorOf(await b.get(`${F}/flows/${flowId}/exports`)), nf);
    assert.deepEqual(errorOf(await b.get(`${F}/flows/${flowId}/exports/${runId}`)), nf);
    assert.deepEqual(errorOf(await b.post(`${F}/flows/${flowId}/exports`)), nf);
    const stolen = await download(flowId, runId, name, false, { token: TOKEN_B, org: ORG_B });
    assert.deepEqual(errorOf(resOf(stolen)), nf, "nothing of the file");
    // Another sandbox of the same organization: 404 too.
    assert.deepEqual(errorOf(await client(url, { sandbox: "dev" }).get(`${F}/flows/${flowId}/exports`)), nf);

    for (const bad of ["..%2F..%2F..%2Fetc%2Fpasswd", "..", ".manifest.json.partial", "a%2Fb", "%2E%2E", "x%5Cy"]) {
      const r = errorOf(resOf(await download(flowId, runId, bad, false)));
      const decoded = decodeURIComponent(bad);
      assert.deepEqual(r, { status: 400, code: "SEGMENTD-DESTINATION-400",
        message: `File name '${decoded}' is not a file name: letters, digits, '.', '_' and '-' only, not starting with '.' and without '..'` }, bad);
    }
    assert.deepEqual(errorOf(resOf(await download(flowId, runId, "other.ndjson", false))),
      { status: 404, code: "SEGMENTD-DESTINATION-404", message: `File 'other.ndjson' is not a file of export run '${runId}'` });
    const zero = "00000000-0000-0000-0000-000000000000";
    assert.deepEqual(errorOf(await a.get(`${F}/flows/${flowId}/exports/${zero}`)),
      { status: 404, code: "SEGMENTD-DESTINATION-404", message: `Export run with id '${zero}' was not found for flow '${flowId}'` });
    // Another file flow's run id through this flow: 404.
    const other = await fileFlow({ format: "ndjson" }, ["aud-2"], { schedule: LATER });
    assert.equal((await a.get(`${F}/flows/${other}/exports/${runId}`)).status, 404);

    // A webhook flow has no exports.
    const conn = await a.post(`${F}/connections`, { name: "w", connectionSpec: WEBHOOK });
    const tgt = await a.post(`${F}/targetConnections`, { name: "w", baseConnectionId: obj(conn.json).id, connectionSpec: WEBHOOK, params: { httpEndpoint: "http://127.0.0.1:9/hook" } });
    const wf = await a.post(`${F}/flows`, { name: "w", targetConnectionIds: [obj(tgt.json).id],
      transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: "aud-2" } }] } } }] });
    assert.equal(wf.status, 201, wf.text);
    const wfId = String(obj(wf.json).id);
    assert.deepEqual(errorOf(await a.post(`${F}/flows/${wfId}/exports`)), { status: 400, code: "SEGMENTD-DESTINATION-400", message: `Flow '${wfId}' is not a file export flow` });
    assert.deepEqual(errorOf(await a.get(`${F}/flows/${wfId}/exports`)), { status: 400, code: "SEGMENTD-DESTINATION-400", message: `Flow '${wfId}' is not a file export flow` });

    const off = await a.post(`${F}/flows/${flowId}/action?op=disable`);
    assert.equal(off.status, 200, off.text);
    assert.deepEqual(errorOf(await a.post(`${F}/flows/${flowId}/exports`)), { status: 409, code: "SEGMENTD-DESTINATION-STATE-409", message: `Flow '${flowId}' is disabled; enable it before exporting` });
    // The disabled flow's past runs stay readable.
    assert.equal((await download(flowId, runId, name, false)).status, 200);

    // Deleting the flow removes its files.
    const dir = runExportDir(handle.dataDir, scope, flowId, runId);
    assert.ok(existsSync(dir));
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
    await until(() => !existsSync(dir), "the deleted flow's files removed", 10_000);
  });

  test("schedule under an injected clock: a run at each instant from the start time, none before it, missed instants once", async () => {
    const start = new Date(Date.now() + 2 * 24 * HOUR);
    const anchor = Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate(), 6, 0);
    const schedule = { startDate: new Date(anchor).toISOString().slice(0, 10), startTime: "06:00" };
    const flowId = await fileFlow({ format: "ndjson", frequency: "EVERY_3_HOURS" }, ["aud-2"], { schedule });
    const scheduled = async () => (arr(obj((await a.get(`${F}/flows/${flowId}/exports`)).json).items) as Obj[]).filter((r) => r.trigger === "schedule");
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await scheduled(), [], "nothing before the start time");
    const at = async (t: number, n: number) => {
      offset = t - Date.now();
      await until(async () => (await scheduled()).filter((r) => r.status === "success").length === n, `${n} scheduled runs`, 30_000);
    };
    await at(anchor + 1000, 1);
    await at(anchor + 3 * HOUR + 1000, 2);
    // Down from 3 h to 12 h 30: one run, for the latest instant (12 h), then the next at 15 h.
    await at(anchor + 12.5 * HOUR, 3);
    await new Promise((r) => setTimeout(r, 500));
    const runs = await scheduled();
    assert.deepEqual(runs.map((r) => r.scheduledFor).reverse(), [anchor, anchor + 3 * HOUR, anchor + 12 * HOUR].map((t) => new Date(t).toISOString()));
    for (const r of runs) assert.deepEqual((await rowsOf(flowId, r, "aud-2", "ndjson")).map((x) => x.profileId).sort(), (await members("aud-2")).sort());
    offset = 0;
  });

  test("kill -9 during a run: after the restart the run is failed and its files gone, none listed; the next run succeeds", async () => {
    // 400 members read one per page: long enough to be killed in the middle.
    const big = Array.from({ length: 400 }, (_, i) => String(100_000 + i));
    await profiles.applyMembershipChanges(scope, big.map((p) => ({ profileId: p, definitionId: "aud-big", status: "realized" as const, source: "batch" as const, at: Date.now() })));
    const flow: Dataflow = {
      scope, flowId: "crash-flow", name: "crash", state: "enabled",
      target: { kind: "file", format: "csv", gzip: true, mode: "full", frequency: "DAILY" },
      delivery: { maxBatchSize: 100, maxWaitMs: 100, concurrency: 1, ratePerSecond: 0, retryPeriodMs: 60_000, timeoutMs: 1000 },
      segmentSelectors: [{ audienceId: "aud-big", startTime: Date.UTC(2099, 0, 1), addedAt: 0 }],
      profileSelectors: { attributes: [], identityNamespaces: [] }, createdAt: 0, updatedAt: 0, version: 1,
    };
    const storage = { dataDir: path.join(tmp, "crash"), ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }) };
    const location = STORE_KIND === "postgres" ? /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(handle.databaseUrl!))![1]! : path.join(handle.dataDir, "profiles.db");
    const child = spawnTs("packages/server/test/activation/file-export-child.ts", [JSON.stringify({ kind: STORE_KIND, location, storage, flow })]);
    const runId = (await waitFor(child, /RUN (\S+)/))[1]!;
    const dir = runExportDir(storage.dataDir, scope, flow.flowId, runId);
    await until(() => existsSync(dir) && readdirSync(dir).some((n) => n.endsWith(".partial")), "a partial file", 30_000);
    child.child.kill("SIGKILL");
    await new Promise((r) => child.child.once("exit", r));
    assert.ok(readdirSync(dir).some((n) => n.endsWith(".partial")), "killed mid-file");

    const d: Deliverer = startDeliverer({ directory: { listEnabled: async () => [flow], get: async () => flow, onChange: () => () => {} }, profiles, storage, allowPrivateNetworks: true, fileExports: { tickMs: 50 } });
    try {
      await d.ready;
      const files = (d.reports as unknown as { files: FileExportReports }).files;
      let killed = await files.exportRun(scope, flow.flowId, runId);
      await until(async () => (killed = await files.exportRun(scope, flow.flowId, runId))?.status === "failed", "the killed run marked failed", 10_000);
      assert.equal(killed!.error, INTERRUPTED);
      assert.equal(killed!.manifest, null, "no files listed");
      assert.ok(!existsSync(dir), "its directory removed");
      const again = await files.exportNow(scope, flow.flowId);
      let ok = await files.exportRun(scope, flow.flowId, again.runId);
      await until(async () => (ok = await files.exportRun(scope, flow.flowId, again.runId))?.status === "success", "the next run", 60_000);
      const text = gunzipSync(await import("node:fs/promises").then((fs) => fs.readFile(path.join(runExportDir(storage.dataDir, scope, flow.flowId, again.runId), ok!.manifest!.files[0]!.name)))).toString();
      assert.deepEqual(parseCsv(text).slice(1).map((r) => r[0]), big);
      assert.deepEqual(readdirSync(runExportDir(storage.dataDir, scope, flow.flowId, again.runId)).filter((n) => n.endsWith(".partial")), []);
    } finally {
      await d.stop();
    }
  });

  test("the four export routes are in /openapi.json, with the tenant's security", async () => {
    const h = await startHarness("act-files-openapi");
    try {
      const spec = obj(await (await fetch(`${h.url}/openapi.json`)).json());
      const paths = obj(spec.paths);
      const ops = [["get", "/flows/{id}/exports"], ["post", "/flows/{id}/exports"], ["get", "/flows/{id}/exports/{runId}"], ["get", "/flows/{id}/exports/{runId}/files/{name}"]];
      for (const [method, p] of ops) {
        const op = obj(obj(paths[`${F}${p!}`])[method!]);
        assert.match(String(op.summary), /segmentd extension/, `${method} ${p}`);
        assert.deepEqual(op.security, [{ bearerAuth: [], apiKey: [], imsOrg: [], sandbox: [] }], `${method} ${p}`);
        assert.ok(obj(op.responses)["404"] !== undefined, `${method} ${p} documents its 404`);
      }
      assert.deepEqual(Object.keys(obj(obj(obj(obj(obj(paths[`${F}/flows/{id}/exports/{runId}/files/{name}`]).get).responses)["200"]).content)), ["application/x-ndjson", "text/csv", "application/json"]);
    } finally {
      await h.close();
    }
  });

  test("no export error was reported", () => {
    assert.deepEqual(errors.filter((e) => !e.includes("dataflow")), []);
  });
});

function errorOf(r: Res): { status: number; code: unknown; message: unknown } {
  const items = arr(obj(obj(r.json).errors)[String(r.status)]);
  return { status: r.status, code: obj(items[0]).code, message: obj(items[0]).message };
}

function resOf(d: { status: number; body: Buffer }): Res {
  const text = d.body.toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: d.status, headers: new Headers(), text, json };
}

/** The delivery schema (delivery and file export state) and the profile store's schema, beside the test schema. */
async function dropDeliverySchemaOf(handle: TestStoreHandle): Promise<void> {
  if (handle.databaseUrl === undefined) return;
  const schema = /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(handle.databaseUrl))![1]!;
  await dropDeliverySchema({ location: schema } as Parameters<typeof dropDeliverySchema>[0]);
  const u = new URL(handle.databaseUrl);
  u.search = "";
  if (u.username === "") u.username = process.env["PGUSER"] || process.env["USER"] || os.userInfo().username;
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}_profiles" CASCADE`);
  await c.end();
}
