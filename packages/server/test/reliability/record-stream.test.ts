// The pieces under streamed batch uploads (issue #22, item 7): the NDJSON and
// JSON-array splitters hold one record at a time and refuse an over-long record
// without reading it; the chunked stager accounts every record exactly once
// across its staging transactions; applyIsolated costs a refused record only
// that record; spool directories never outlive their upload. Pure, apart from
// stageRecordStream on the store under test and the spool directories.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { applyIsolated, applyIsolatedSync, isRecordDataError, NOT_APPLIED } from "../../src/profiles/batch-staging.js";
import { stageRecordStream } from "../../src/profiles/ingest.js";
import { jsonArrayRecords, MalformedFileError, ndjsonRecords, type StreamItem } from "../../src/profiles/record-stream.js";
import type { ProfileStore, StageOptions } from "../../src/profiles/store.js";
import type { TenantScope, ValidRecord } from "../../src/profiles/types.js";
import { removeStaleSpools, withSpoolDir } from "../../src/profiles/upload-spool.js";
import { openTestStore, STORE_KIND, type TestStore } from "../profiles/test-store.js";

async function* pieces(...parts: string[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield Buffer.from(p);
}

async function collect(g: AsyncIterable<StreamItem>): Promise<StreamItem[]> {
  const out: StreamItem[] = [];
  for await (const x of g) out.push(x);
  return out;
}

const opts = { maxRecordChars: 40 };

describe("record stream splitters", () => {
  it("splits NDJSON across chunk boundaries, skipping blank lines, reporting malformed and over-long lines by line", async () => {
    // A multi-byte character split between two chunks must survive.
    const euro = Buffer.from('{"p":"€"}\n');
    async function* src(): AsyncGenerator<Buffer> {
      yield* pieces('{"a":1}\n\n{oo', 'ps\n{"a":', "3}\r\n", "x".repeat(50), "\n");
      yield euro.subarray(0, 7);
      yield euro.subarray(7);
      yield Buffer.from("[".repeat(70) + "]".repeat(70));
    }
    const items = await collect(ndjsonRecords(src(), opts));
    assert.deepEqual(items.map((x) => ("error" in x ? [x.index, x.error.code, x.error.message.replace(/: .*/, "")] : [x.index, x.value])), [
      [0, { a: 1 }],
      [1, "MALFORMED_JSON", "line 3 is not valid JSON"],
      [2, { a: 3 }],
      [3, "RECORD_TOO_LARGE", "record 3 (line 5) is longer than 40 characters, over the size limit of a record"],
      [4, { p: "€" }],
      [5, "RECORD_TOO_LARGE", "record 5 (line 7) is longer than 40 characters, over the size limit of a record"],
    ]);
    const deep = await collect(ndjsonRecords(pieces("[".repeat(70) + "]".repeat(70)), { maxRecordChars: 1000 }));
    assert.deepEqual(deep.map((x) => ("error" in x ? [x.error.code, x.error.message] : x)), [["RECORD_TOO_DEEP", "record 0 (line 1) nests deeper than the limit of 64 levels"]]);
  });

  it("splits a JSON array into elements, strings and nesting respected, over any chunking", async () => {
    const text = ' [ {"a":"],\\"x{"} , 2, "s,]" ,[1,[2]],null ] \n';
    const want = [{ a: '],"x{' }, 2, "s,]", [1, [2]], null];
    for (let cut = 1; cut < text.length; cut++) {
      const items = await collect(jsonArrayRecords(pieces(text.slice(0, cut), text.slice(cut)), opts));
      assert.deepEqual(items.map((x) => ("value" in x ? x.value : x)), want, `cut at ${cut}`);
      assert.deepEqual(items.map((x) => x.index), [0, 1, 2, 3, 4]);
    }
    assert.deepEqual(await collect(jsonArrayRecords(pieces("[]"), opts)), []);
  });

  it("refuses a broken JSON array as a file, and an over-long element as a record", async () => {
    const broken = async (text: string) => {
      try {
        const items = await collect(jsonArrayRecords(pieces(text), opts));
        return items.map((x) => ("error" in x ? `${x.error.code} ${x.error.index}` : "ok"));
      } catch (e) {
        assert.ok(e instanceof MalformedFileError);
        return e.message;
      }
    };
    assert.equal(await broken('[{"identityMap": '), "Unexpected end of JSON input");
    assert.equal(await broken("[1 2]"), 'unexpected "2" at position 3');
    assert.equal(await broken("[1,]"), 'unexpected "]" at position 3');
    assert.equal(await broken("[1] x"), 'unexpected "x" at position 4');
    assert.equal(await broken('{"a":1}'), 'unexpected "{" at position 0');
    assert.deepEqual(await broken('[{"a":tru}]'), ["MALFORMED_FILE -1"]);
    assert.deepEqual(await broken(`[{"b":"${"y".repeat(60)}"}, 3]`), ["RECORD_TOO_LARGE 0", "ok"]);
  });
});

describe("applyIsolated", () => {
  const rows = [0, 1, 2, 3].map((i) => ({ meta: JSON.stringify({ i }) }));
  const pgError = (message: string, code: string) => Object.assign(new Error(message), { code });

  it("applies a chunk whole when it can, else record by record, reporting each refused record", async () => {
    const log: string[] = [];
    const sp = { begin: async () => log.push("begin"), release: async () => log.push("release"), rollback: async () => log.push("rollback") };
    const apply = async (part: readonly { meta: string }[]) => {
      if (part.some((r) => r.meta.includes('"i":2'))) throw pgError("unsupported Unicode escape sequence", "22P05");
      return part.length;
    };
    const r = await applyIsolated(rows, sp, apply);
    assert.deepEqual(r.results, [1, 1, 1]);
    assert.deepEqual(r.refused, [{ index: 2, code: NOT_APPLIED, message: "record 2 could not be stored and was not applied: unsupported Unicode escape sequence" }]);
    assert.deepEqual(log, ["begin", "rollback", ...["release", "release", "rollback", "release"].flatMap((x) => ["begin", x])]);
    const whole = await applyIsolated(rows, sp, async (part) => part.length);
    assert.deepEqual(whole, { results: [4], refused: [] });
  });

  it("lets an error that is not the data's through: the batch stays loading, COMPLETE can be retried", async () => {
    const sp = { begin: async () => undefined, release: async () => undefined, rollback: async () => undefined };
    await assert.rejects(applyIsolated(rows, sp, async () => { throw pgError("terminating connection", "57P01"); }), /terminating connection/);
    assert.throws(() => applyIsolatedSync(rows, { begin: () => 0, release: () => 0, rollback: () => 0 }, () => { throw new Error("disk I/O error"); }), /disk I\/O error/);
    const sync = applyIsolatedSync(rows, { begin: () => 0, release: () => 0, rollback: () => 0 }, (part) => {
      if (part.length > 1) throw new RangeError("Maximum call stack size exceeded");
      if (part[0]!.meta.includes('"i":0')) throw new SyntaxError("Unexpected end of JSON input");
      return 1;
    });
    assert.deepEqual(sync.refused.map((e) => e.index), [0]);
    assert.equal(sync.results.length, 3);
    assert.deepEqual([isRecordDataError(pgError("x", "22021")), isRecordDataError(pgError("x", "54001")), isRecordDataError(pgError("x", "40001")), isRecordDataError("x")], [true, true, false, false]);
  });
});

describe(`stageRecordStream (${STORE_KIND})`, () => {
  const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
  let ts: TestStore;
  let ds: string;
  before(async () => {
    ts = openTestStore();
    ds = (await ts.store.createDataset(A, { name: "crm", schemaClass: "profile", profileEnabled: true }, 1)).id;
  });
  after(async () => { await ts.cleanup(); });

  it("stages chunk by chunk, accounting every record once, and keeps the first errors", async () => {
    const b = await ts.store.createBatch(A, ds, 1);
    const calls: Array<{ staged: number; read: number; failed: number[] }> = [];
    // The store, counting its staging transactions.
    const store = new Proxy(ts.store, {
      get(target, key) {
        if (key === "stageBatchRecords") {
          return (scope: TenantScope, id: string, records: readonly ValidRecord[], o: StageOptions) => {
            calls.push({ staged: records.length, read: o.read, failed: o.failed.map((e) => e.index) });
            return target.stageBatchRecords(scope, id, records, o);
          };
        }
        const v = Reflect.get(target, key) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as ProfileStore;
    const items: StreamItem[] = Array.from({ length: 10 }, (_, i) => i === 4
      ? { index: i, error: { index: i, code: "MALFORMED_JSON", message: "line 5 is not valid JSON" } }
      : { index: i, value: i === 7 ? { nope: true } : { identityMap: { ECID: [{ id: `c-${i}` }] } } });
    const r = await stageRecordStream(store, A, ds, { id: b.id, file: "f" }, items, { now: 2, chunkRecords: 3, keepErrors: 1 });
    assert.deepEqual(calls, [
      { staged: 3, read: 3, failed: [] },
      { staged: 2, read: 3, failed: [4] },
      { staged: 2, read: 3, failed: [7] },
      { staged: 1, read: 1, failed: [] },
    ]);
    assert.deepEqual([r.received, r.staged, r.failedRecords, r.failed.map((e) => e.index)], [10, 8, 2, [4]]);
    const batch = await ts.store.getBatch(A, b.id);
    assert.deepEqual([batch?.recordsRead, batch?.recordsFailed, batch?.errors.map((e) => e.index), batch?.files], [10, 2, [4, 7], ["f"]]);
    const done = await ts.store.completeBatch(A, b.id, { ingestedAt: 3, maxIdentitiesPerGraph: 50 });
    assert.deepEqual([done.batch.status, done.batch.recordsWritten], ["success", 8]);
  });
});

describe("upload spool directories", () => {
  it("are removed after use whatever happens, and left-overs of a killed process at start-up", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), "segmentd-spool-test-"));
    try {
      const dir = path.join(root, "uploads");
      let seen = "";
      await assert.rejects(withSpoolDir(dir, async (d) => {
        seen = d;
        await writeFile(path.join(d, "body"), "x");
        throw new Error("staging failed");
      }), /staging failed/);
      assert.ok(seen.startsWith(path.join(dir, "segmentd-upload-")));
      assert.deepEqual(await readdir(dir), []);
      await mkdir(path.join(dir, "segmentd-upload-dead1"));
      await writeFile(path.join(dir, "segmentd-upload-dead1", "body"), "x");
      await writeFile(path.join(dir, "keep.txt"), "x");
      assert.equal(await removeStaleSpools(dir), 1);
      assert.deepEqual(await readdir(dir), ["keep.txt"]);
      assert.equal(await removeStaleSpools(path.join(root, "missing")), 0);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
