// Batch file uploads (issue #22, items 3 and 7): a file is streamed, never held
// in memory whole; records no store can keep are refused per record at upload
// (the batch's good records still apply on COMPLETE); a record the store refuses
// while applying never leaves the batch stuck loading; an upload cut short
// stages nothing; a body over the file limit is a 413. Over real HTTP, on the
// store SEGMENTD_TEST_STORE picks, another organization working alongside.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { MAX_FILE_BYTES } from "../../src/profiles/http/batch-routes.js";
import type { TenantScope, ValidRecord } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { arr, client, obj, ORG_A, ORG_B, startHarness, testConfig, TOKEN_B, type Client, type Harness } from "../helpers/server-harness.js";
import { killAll, spawnTs, waitFor, type Spawned } from "../helpers/spawn.js";
import { createTestStore, testStoreKind, type TestStoreHandle } from "../helpers/test-store.js";

const KIND = testStoreKind();
const IMPORT = "/data/foundation/import/batches";
const A: TenantScope = { orgId: ORG_A, sandboxName: "prod" };

type Obj = Record<string, unknown>;

function profile(id: string, firstName: string): Obj {
  return { identityMap: { ECID: [{ id, primary: true }] }, person: { name: { firstName } } };
}

async function createDataset(c: Client, name: string): Promise<string> {
  const r = await c.post("/data/foundation/catalog/dataSets", { name, schemaClass: "profile", tags: { unifiedProfile: ["enabled:true"] } });
  assert.equal(r.status, 201, r.text);
  return String(arr(r.json)[0]).replace("@/dataSets/", "");
}

async function createBatch(c: Client, datasetId: string): Promise<string> {
  const r = await c.post(IMPORT, { datasetId, inputFormat: { format: "json" } });
  assert.equal(r.status, 201, r.text);
  return obj(r.json).id as string;
}

const upload = (c: Client, batchId: string, datasetId: string, text: string, name = "part-0.ndjson") =>
  c.put(`${IMPORT}/${batchId}/datasets/${datasetId}/files/${name}`, text, { "content-type": "application/octet-stream" });

/** The ECIDs (of `ids`) that have a profile, read through the profile access API. */
async function readable(c: Client, ids: string[]): Promise<string[]> {
  const r = await c.post("/data/core/ups/access/entities", { schema: { name: "_xdm.context.profile" }, identities: ids.map((id) => ({ entityId: id, entityIdNS: { code: "ECID" } })) });
  assert.equal(r.status, 200, r.text);
  return Object.values(obj(r.json)).map((e) => (obj(obj(e).requestedIdentity).entityId as string)).sort();
}

interface RawUpload {
  status: number | null;
  body: string;
  error: string | null;
}

/**
 * PUT of a body produced piece by piece (never one string): `headers` may declare a
 * Content-Length; `abortAfter` destroys the request once that many bytes were sent.
 */
function rawPut(url: string, path: string, body: AsyncIterable<Buffer>, opts: { headers?: Record<string, string>; abortAfter?: number } = {}): Promise<RawUpload> {
  return new Promise((resolve) => {
    const u = new URL(url + path);
    const req = http.request({ method: "PUT", hostname: u.hostname, port: u.port, path: u.pathname + u.search, headers: {
      authorization: "Bearer token-org-a", "x-api-key": "test-api-key", "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod",
      "content-type": "application/x-ndjson", ...opts.headers,
    } });
    let settled = false;
    let cut = false;
    const done = (r: RawUpload) => { if (!settled && !cut) { settled = true; resolve(r); } };
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => done({ status: res.statusCode ?? null, body: text, error: null }));
      res.on("error", (e) => done({ status: res.statusCode ?? null, body: text, error: e.message }));
    });
    req.on("error", (e) => done({ status: null, body: "", error: e.message }));
    void (async () => {
      let sent = 0;
      for await (const piece of body) {
        if (settled || req.destroyed) return;
        if (opts.abortAfter !== undefined && sent + piece.length > opts.abortAfter) {
          cut = true;
          req.destroy();
          // Let the server see the reset before the caller looks at the batch.
          setTimeout(() => { settled = true; resolve({ status: null, body: "", error: "aborted by the test" }); }, 300);
          return;
        }
        sent += piece.length;
        if (!req.write(piece)) await new Promise<void>((r) => req.once("drain", () => r()));
      }
      req.end();
    })();
  });
}

/** `count` NDJSON profile lines of ~`size` bytes each, yielded ~1 MB at a time. */
async function* ndjson(prefix: string, count: number, size = 1000): AsyncGenerator<Buffer> {
  const pad = "x".repeat(Math.max(0, size - 80));
  let buf: string[] = [];
  let held = 0;
  for (let i = 0; i < count; i++) {
    const line = JSON.stringify({ identityMap: { ECID: [{ id: `${prefix}-${i}`, primary: true }] }, note: pad }) + "\n";
    buf.push(line);
    held += line.length;
    if (held >= 1 << 20) {
      yield Buffer.from(buf.join(""));
      buf = [];
      held = 0;
    }
  }
  if (buf.length > 0) yield Buffer.from(buf.join(""));
}

describe(`batch file uploads (${KIND})`, () => {
  let h: Harness;
  let a: Client, b: Client;
  let dsA: string, dsB: string;
  before(async () => {
    h = await startHarness("uploads");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    dsA = await createDataset(a, "crm-a");
    dsB = await createDataset(b, "crm-b");
  });
  after(async () => { await h.close(); });

  it("refuses NUL and lone-surrogate records per record; COMPLETE applies the ten good ones; another org's batch is unaffected", async () => {
    const batchA = await createBatch(a, dsA);
    const batchB = await createBatch(b, dsB);
    const good = Array.from({ length: 10 }, (_, i) => JSON.stringify(profile(`U-${i}`, `Good ${i}`)));
    const lines = [...good];
    // Escaped in the JSON text, as a client would send them.
    lines.splice(3, 0, '{"identityMap":{"ECID":[{"id":"U-nul","primary":true}]},"person":{"name":{"firstName":"a\\u0000b"}}}');
    lines.splice(7, 0, '{"identityMap":{"ECID":[{"id":"U-sur","primary":true}]},"person":{"name":{"firstName":"a\\ud800b"}}}');
    const [upA, upB] = await Promise.all([
      upload(a, batchA, dsA, lines.join("\n") + "\n"),
      upload(b, batchB, dsB, [profile("B-1", "Bea"), profile("B-2", "Bob")].map((x) => JSON.stringify(x)).join("\n")),
    ]);
    assert.equal(upA.status, 200, upA.text);
    assert.deepEqual(upA.json, {
      file: "part-0.ndjson", recordsRead: 12, recordsStaged: 10, failedRecordCount: 2,
      errors: [
        { code: "UNSTORABLE_STRING", description: "record 3: The string at person.name.firstName contains NUL (\\u0000) and cannot be stored", recordIndex: 3, path: "person.name.firstName" },
        { code: "UNSTORABLE_STRING", description: "record 7: The string at person.name.firstName contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored", recordIndex: 7, path: "person.name.firstName" },
      ],
    });
    assert.equal(upB.status, 200, upB.text);
    assert.deepEqual(obj(upB.json).recordsStaged, 2);

    const done = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.equal(done.status, 200, done.text);
    assert.equal(obj(done.json).status, "success");
    assert.deepEqual(obj(done.json).metrics, { recordsRead: 12, recordsWritten: 10, failedRecordCount: 2 });
    assert.deepEqual(arr(obj(done.json).errors).map((e) => [obj(e).recordIndex, obj(e).code, obj(e).file]), [[3, "UNSTORABLE_STRING", "part-0.ndjson"], [7, "UNSTORABLE_STRING", "part-0.ndjson"]]);
    const ids = [...Array.from({ length: 10 }, (_, i) => `U-${i}`), "U-nul", "U-sur"];
    assert.deepEqual(await readable(a, ids), Array.from({ length: 10 }, (_, i) => `U-${i}`).sort());
    // A retry is refused with a 4xx, not a 500: the batch is closed.
    const again = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.equal(again.status, 400);
    assert.equal(obj(again.json).title, `Batch ${batchA} is already success`);

    const doneB = await b.post(`${IMPORT}/${batchB}?action=COMPLETE`);
    assert.equal(doneB.status, 200, doneB.text);
    assert.deepEqual([obj(doneB.json).status, obj(doneB.json).metrics], ["success", { recordsRead: 2, recordsWritten: 2, failedRecordCount: 0 }]);
    assert.deepEqual(await readable(b, ["B-1", "B-2"]), ["B-1", "B-2"]);
    assert.deepEqual(await readable(a, ["B-1", "B-2"]), [], "org B's profiles are not org A's");
  });

  it("a record the store refuses while applying costs that record (PostgreSQL) or fails the batch with the reason, never stuck loading", async () => {
    const batchA = await createBatch(a, dsA);
    const batchB = await createBatch(b, dsB);
    const up = await upload(a, batchA, dsA, ["S-1", "S-2", "S-3"].map((id) => JSON.stringify(profile(id, id))).join("\n"));
    assert.equal(up.status, 200, up.text);
    // Below the HTTP boundary (its validation would refuse it): a staged record whose text
    // no store can apply, as a store file written by an older version could hold.
    const v = validateRecord(profile("S-bad", "x"), 3, { id: dsA, schemaClass: "profile", identityFields: [] });
    if (!v.ok) throw new Error(JSON.stringify(v.errors));
    const bad: ValidRecord = { ...v.record, json: KIND === "postgres" ? v.record.json.replace('"x"', '"a\\u0000b"') : v.record.json.slice(0, -2) };
    await h.server.profiles.stageBatchRecords(A, batchA, [bad], { read: 1, failed: [], now: Date.now(), file: "direct" });
    assert.equal((await upload(b, batchB, dsB, JSON.stringify(profile("B-3", "Bo")))).status, 200);

    const done = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.equal(done.status, 200, done.text);
    const body = obj(done.json);
    if (KIND === "postgres") {
      // The store isolates the record it refuses (applyIsolated): the others are applied.
      assert.equal(body.status, "success");
      assert.deepEqual(body.metrics, { recordsRead: 4, recordsWritten: 3, failedRecordCount: 1 });
      assert.deepEqual(body.errors, [{ code: "RECORD_NOT_APPLIED", description: "record 3 could not be stored and was not applied: unsupported Unicode escape sequence", recordIndex: 3 }]);
      assert.deepEqual(await readable(a, ["S-1", "S-2", "S-3", "S-bad"]), ["S-1", "S-2", "S-3"]);
    } else {
      // The route's safety net: the batch is closed failed, with the reason.
      assert.equal(body.status, "failed");
      assert.deepEqual(body.metrics, { recordsRead: 4, recordsWritten: 0, failedRecordCount: 1 });
      assert.deepEqual(body.errors, [{ code: "BATCH_APPLY_FAILED", recordIndex: -1,
        description: `the batch's staged records could not be applied (Expected ',' or '}' after property value in JSON at position ${bad.json.length}); none of them was written` }]);
      assert.deepEqual(await readable(a, ["S-1", "S-2", "S-3", "S-bad"]), [], "nothing of the failed batch reached profiles");
    }
    const retry = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.equal(retry.status, 400);
    assert.equal(obj(retry.json).title, `Batch ${batchA} is already ${String(body.status)}`);

    const doneB = await b.post(`${IMPORT}/${batchB}?action=COMPLETE`);
    assert.equal(obj(doneB.json).status, "success");
    assert.deepEqual(await readable(b, ["B-3"]), ["B-3"]);
  });

  it("streams a JSON-array file element by element, refusing bad elements per record and a broken file whole", async () => {
    const batchA = await createBatch(a, dsA);
    const text = `[\n ${JSON.stringify(profile("J-1", "J1"))},\n {"person":{}},\n "text",\n ${JSON.stringify(profile("J-2", "J2"))}\n]\n`;
    const up = await upload(a, batchA, dsA, text, "part.json");
    assert.equal(up.status, 200, up.text);
    assert.deepEqual(up.json, { file: "part.json", recordsRead: 4, recordsStaged: 2, failedRecordCount: 2, errors: [
      { code: "IDENTITY_MISSING", description: "record has no identity: send an identityMap with at least one id", recordIndex: 1 },
      { code: "RECORD_NOT_OBJECT", description: "record 2 must be a JSON object, got string", recordIndex: 2 },
    ] });
    const brokenText = `[${JSON.stringify(profile("J-3", "J3"))}, {"a":1} {"b":2}]`;
    const broken = await upload(a, batchA, dsA, brokenText, "broken.json");
    assert.equal(broken.status, 200, broken.text);
    assert.deepEqual(broken.json, { file: "broken.json", recordsRead: 0, recordsStaged: 0, failedRecordCount: 1, errors: [
      { code: "MALFORMED_FILE", description: `file is not valid JSON: unexpected "{" at position ${brokenText.indexOf('{"b"')}`, recordIndex: -1 },
    ] });
    const done = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.deepEqual([obj(done.json).status, obj(done.json).metrics], ["success", { recordsRead: 4, recordsWritten: 2, failedRecordCount: 3 }]);
    assert.deepEqual(await readable(a, ["J-1", "J-2", "J-3"]), ["J-1", "J-2"]);
    const other = await upload(b, await createBatch(b, dsB), dsB, `[${JSON.stringify(profile("B-J", "B"))}]`, "b.json");
    assert.deepEqual([other.status, obj(other.json).recordsStaged], [200, 1]);
  });

  it("an upload cut short stages nothing; the batch stays usable", async () => {
    const batchA = await createBatch(a, dsA);
    const batchB = await createBatch(b, dsB);
    const [cut, whileCut] = await Promise.all([
      rawPut(h.url, `${IMPORT}/${batchA}/datasets/${dsA}/files/cut.ndjson`, ndjson("CUT", 20_000), { abortAfter: 4 * 1024 * 1024 }),
      upload(b, batchB, dsB, JSON.stringify(profile("B-cut", "B"))),
    ]);
    assert.equal(cut.status, null, "the client went away before any answer");
    assert.deepEqual([whileCut.status, obj(whileCut.json).recordsStaged], [200, 1]);
    const mid = await a.get(`/data/foundation/catalog/batches/${batchA}`);
    const s = obj(obj(mid.json)[batchA]);
    assert.deepEqual([s.status, s.metrics, s.files], ["loading", { recordsRead: 0, recordsWritten: 0, failedRecordCount: 0 }, []]);
    const whole = await upload(a, batchA, dsA, JSON.stringify(profile("CUT-ok", "ok")), "whole.ndjson");
    assert.equal(whole.status, 200, whole.text);
    const done = await a.post(`${IMPORT}/${batchA}?action=COMPLETE`);
    assert.deepEqual([obj(done.json).status, obj(done.json).metrics, obj(done.json).files], ["success", { recordsRead: 1, recordsWritten: 1, failedRecordCount: 0 }, ["whole.ndjson"]]);
    assert.deepEqual(await readable(a, ["CUT-0", "CUT-1", "CUT-ok"]), ["CUT-ok"]);
  });

  it("a body declared larger than the file limit is a 413 before any of it is read", async () => {
    const batchA = await createBatch(a, dsA);
    async function* some(): AsyncGenerator<Buffer> { yield Buffer.from(JSON.stringify(profile("BIG-0", "x")) + "\n"); }
    const r = await rawPut(h.url, `${IMPORT}/${batchA}/datasets/${dsA}/files/big.ndjson`, some(), { headers: { "content-length": String(MAX_FILE_BYTES + 1) } });
    assert.equal(r.status, 413, r.error ?? r.body);
    const body = JSON.parse(r.body) as Obj;
    assert.equal(body.status, 413);
    assert.equal(body.title, `Request body is larger than the limit of ${MAX_FILE_BYTES} bytes`);
    assert.deepEqual(body.errors, { 413: [{ code: "SEGMENTD-BODY-TOO-LARGE-413", message: `Request body is larger than the limit of ${MAX_FILE_BYTES} bytes` }] });
    const s = obj(obj((await a.get(`/data/foundation/catalog/batches/${batchA}`)).json)[batchA]);
    assert.deepEqual([s.status, s.metrics, s.files], ["loading", { recordsRead: 0, recordsWritten: 0, failedRecordCount: 0 }, []]);
    const other = await upload(b, await createBatch(b, dsB), dsB, JSON.stringify(profile("B-9", "B")));
    assert.equal(other.status, 200, other.text);
  });
});

/** VmRSS and VmHWM (peak) of a process, MB (Linux /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

describe(`a 100 MB upload holds bounded memory (${KIND}, server in its own process)`, () => {
  let store: TestStoreHandle;
  let child: Spawned;
  let url: string;
  before(async () => {
    store = await createTestStore("upload-rss");
    const c = testConfig(store);
    c.logLevel = "warn";
    const configFile = path.join(store.dataDir, "segmentd.config.json");
    writeFileSync(configFile, JSON.stringify({
      host: c.host, port: 0, dataDir: c.dataDir, ...(c.databaseUrl ? { databaseUrl: c.databaseUrl } : {}), logLevel: c.logLevel,
      auth: c.auth, organizations: c.organizations,
    }));
    child = spawnTs("packages/server/test/helpers/child-server.ts", [configFile]);
    url = (await waitFor(child, /READY (\S+)/))[1]!;
  });
  after(async () => {
    killAll();
    await store.dispose();
  });

  it("stages 100,000 records (100 MB of NDJSON sent as a stream) with the server's peak RSS under 150 MB above its start", async (t) => {
    const a = client(url);
    const ds = await createDataset(a, "big");
    // Warm-up (10 MB): the upload path's code is loaded and the heap grown to its working size
    // before measuring. Measured: the peak then stays the same for 25, 50, 100 and 200 MB files.
    const warm = await createBatch(a, ds);
    assert.equal((await rawPut(url, `${IMPORT}/${warm}/datasets/${ds}/files/warm.ndjson`, ndjson("W", 10_000, 1000))).status, 200);
    assert.equal((await a.post(`${IMPORT}/${warm}?action=ABORT`)).status, 200);
    const pid = child.child.pid!;
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, "5"); // resets VmHWM to the current RSS
    } catch {
      // Without it VmHWM is the peak since start, which only makes the bound harder to meet.
    }
    const start = memoryOf(pid);
    const batchId = await createBatch(a, ds);
    const t0 = Date.now();
    const r = await rawPut(url, `${IMPORT}/${batchId}/datasets/${ds}/files/big.ndjson`, ndjson("BIG", 100_000, 1000));
    const seconds = (Date.now() - t0) / 1000;
    assert.equal(r.status, 200, r.error ?? r.body);
    assert.deepEqual(JSON.parse(r.body), { file: "big.ndjson", recordsRead: 100_000, recordsStaged: 100_000, failedRecordCount: 0, errors: [] });
    const end = memoryOf(pid);
    const growth = end.peak - start.rss;
    t.diagnostic(`RSS before ${start.rss.toFixed(0)} MB, peak during the upload ${end.peak.toFixed(0)} MB (+${growth.toFixed(0)} MB), after ${end.rss.toFixed(0)} MB; ${seconds.toFixed(1)} s`);
    assert.ok(growth < 150, `peak RSS grew by ${growth.toFixed(0)} MB during a 100 MB upload`);
    const aborted = await a.post(`${IMPORT}/${batchId}?action=ABORT`);
    assert.deepEqual([aborted.status, obj(aborted.json).status, obj(aborted.json).metrics], [200, "aborted", { recordsRead: 100_000, recordsWritten: 0, failedRecordCount: 0 }]);
  });
});
