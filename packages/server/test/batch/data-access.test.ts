/**
 * AEP's Data Access API over the batches export jobs write (#39, item 2), over real HTTP: run an
 * export job, list its batch's files, download them (whole, by byte range, HEAD) and compare the
 * records with the audience's members; the Catalog batch names its files; another organization
 * gets 404 and none of the data.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DEFS, ORG_A, ORG_B, PROFILE_CLASS, TOKEN_B, arr, client, definitionBody, obj, profileDataset, runSegmentJob, startHarness, type Client, type Harness } from "../helpers/server-harness.js";

const EXPORT = "/data/foundation/export";
const N = 1200;
/** Profile i is gold unless i is a multiple of 10: 1,080 members, more than one file's 1,000 records. */
const isGold = (i: number) => i % 10 !== 0;

describe("Data Access API for export batches", () => {
  let h: Harness;
  let a: Client;
  let b: Client;
  let batchId = "";
  let segmentId = "";
  let files: Array<{ dataSetFileId: string; _links: { self: { href: string } } }> = [];
  const local = (href: string) => new URL(href).pathname + new URL(href).search;

  before(async () => {
    h = await startHarness("data-access");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    const crm = await profileDataset(a, "crm", PROFILE_CLASS);
    const batch = await a.post("/data/foundation/import/batches", { datasetId: crm, inputFormat: { format: "json" } });
    assert.equal(batch.status, 201, batch.text);
    const importId = obj(batch.json).id as string;
    const records = Array.from({ length: N }, (_, i) => ({
      identityMap: { Email: [{ id: `p${i}@example.com`, primary: true }] },
      person: { name: { firstName: `F${i}` }, age: 20 + (i % 50) },
      loyalty: { tier: isGold(i) ? "gold" : "silver" },
    }));
    assert.equal((await a.put(`/data/foundation/import/batches/${importId}/datasets/${crm}/files/crm.json`, records)).status, 200);
    assert.equal((await a.post(`/data/foundation/import/batches/${importId}?action=COMPLETE`)).status, 200);
    const def = await a.post(DEFS, definitionBody("gold", 'loyalty.tier = "gold"'));
    assert.equal(def.status, 200, def.text);
    segmentId = obj(def.json).id as string;
    await runSegmentJob(a);
    const out = await a.post("/data/foundation/catalog/dataSets", { name: "gold export", schemaRef: { id: PROFILE_CLASS, contentType: "application/vnd.adobe.xed+json;version=1" } });
    assert.equal(out.status, 201, out.text);
    const outId = String(arr(out.json)[0]).split("/").pop()!;
    const job = await a.post("/data/core/ups/export/jobs", { fields: "person.name,loyalty.tier", filter: { segments: [{ segmentId }] }, destination: { datasetId: outId }, schema: { name: "_xdm.context.profile" } });
    assert.equal(job.status, 200, job.text);
    for (let i = 0; ; i++) {
      const j = obj((await a.get(`/data/core/ups/export/jobs/${obj(job.json).id as number}`)).json);
      if (j.status === "SUCCEEDED") {
        batchId = obj(j.destination).batchId as string;
        assert.equal(obj(j.metrics).totalExportedProfileCounter, 1080);
        break;
      }
      assert.ok(i < 600 && j.status !== "FAILED", JSON.stringify(j));
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(async () => h.close());

  it("the Catalog batch names its files; the Data Access API lists them with their links", async () => {
    assert.deepEqual(obj(obj((await a.get(`/data/foundation/catalog/batches/${batchId}`)).json)[batchId]).files, ["part-00000.ndjson", "part-00001.ndjson"]);
    const r = await a.get(`${EXPORT}/batches/${batchId}/files`);
    assert.equal(r.status, 200, r.text);
    const body = obj(r.json);
    files = body.data as typeof files;
    assert.deepEqual(files.map((f) => f.dataSetFileId), [`${batchId}-0`, `${batchId}-1`]);
    assert.deepEqual(body._page, { limit: 2, count: 2 });
    const f = obj(files[0]);
    assert.deepEqual(Object.keys(f).sort(), ["_links", "created", "dataSetFileId", "dataSetViewId", "isValid", "updated", "version"]);
    assert.equal(f.isValid, true);
    assert.equal(local(files[0]!._links.self.href), `${EXPORT}/files/${batchId}-0`);
  });

  it("downloads every file; together they hold exactly the audience's members with the projected fields", async () => {
    const emails: string[] = [];
    for (const f of files) {
      const entries = obj((await a.get(local(f._links.self.href))).json);
      const [entry] = entries.data as Array<{ name: string; length: string; _links: { self: { href: string } } }>;
      const file = await a.get(local(entry!._links.self.href));
      assert.equal(file.status, 200);
      assert.equal(file.headers.get("content-type"), "application/x-ndjson; charset=utf-8");
      assert.equal(file.headers.get("content-disposition"), `attachment; filename="${entry!.name}"`);
      assert.equal(Buffer.byteLength(file.text), Number(entry!.length));
      const lines = file.text.split("\n");
      assert.equal(lines.pop(), "", "each record ends with a newline");
      for (const line of lines) {
        const rec = JSON.parse(line) as Record<string, unknown>;
        assert.deepEqual(Object.keys(rec).sort(), ["identityMap", "loyalty", "person", "segmentMembership"]);
        assert.deepEqual(rec.loyalty, { tier: "gold" });
        assert.equal(obj(obj(obj(rec.segmentMembership).ups)[segmentId]).status, "realized");
        emails.push(((rec.identityMap as Record<string, Array<{ id: string }>>).Email ?? (rec.identityMap as Record<string, Array<{ id: string }>>).email)![0]!.id);
      }
      assert.equal(lines.length, f === files[0] ? 1000 : 80);
    }
    const expected = Array.from({ length: N }, (_, i) => i).filter(isGold).map((i) => `p${i}@example.com`);
    assert.deepEqual(emails.sort(), expected.sort());
  });

  it("serves byte ranges (206, 416) and HEAD", async () => {
    const path = `${EXPORT}/files/${batchId}-1?path=part-00001.ndjson`;
    const whole = Buffer.from((await a.get(path)).text);
    const first = await a.get(path, { range: "bytes=0-99" });
    assert.equal(first.status, 206);
    assert.equal(first.headers.get("content-range"), `bytes 0-99/${whole.length}`);
    assert.equal(first.text, whole.subarray(0, 100).toString());
    const tail = await a.get(path, { range: "bytes=-10" });
    assert.equal(tail.status, 206);
    assert.equal(tail.text, whole.subarray(whole.length - 10).toString());
    const open = await a.get(path, { range: `bytes=${whole.length - 5}-` });
    assert.equal(open.headers.get("content-range"), `bytes ${whole.length - 5}-${whole.length - 1}/${whole.length}`);
    const past = await a.get(path, { range: `bytes=${whole.length}-` });
    assert.equal(past.status, 416);
    assert.equal(past.headers.get("content-range"), `bytes */${whole.length}`);
    const head = await a.call("HEAD", path);
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(whole.length));
    assert.equal(head.text, "");
  });

  it("unknown batches, files and paths are 404; another organization gets 404 and none of the data", async () => {
    const notFound = async (c: Client, path: string, message: string) => {
      const r = await c.get(path);
      assert.equal(r.status, 404, path);
      assert.equal(obj(r.json).title, message, path);
      assert.ok(!r.text.includes("@example.com"), path);
    };
    await notFound(a, `${EXPORT}/batches/nope/files`, "Batch with id 'nope' was not found");
    await notFound(a, `${EXPORT}/files/${batchId}-7`, `File with id '${batchId}-7' was not found`);
    await notFound(a, `${EXPORT}/files/nope`, "File with id 'nope' was not found");
    await notFound(a, `${EXPORT}/files/${batchId}-0?path=other.ndjson`, `File with id '${batchId}-0?path=other.ndjson' was not found`);
    await notFound(b, `${EXPORT}/batches/${batchId}/files`, `Batch with id '${batchId}' was not found`);
    await notFound(b, `${EXPORT}/files/${batchId}-0`, `File with id '${batchId}-0' was not found`);
    await notFound(b, `${EXPORT}/files/${batchId}-0?path=part-00000.ndjson`, `File with id '${batchId}-0' was not found`);
    // Org A's other sandbox does not see it either.
    await notFound(client(h.url, { org: ORG_A, sandbox: "dev" }), `${EXPORT}/batches/${batchId}/files`, `Batch with id '${batchId}' was not found`);
  });
});
