/**
 * The partitions' wire (partition-wire.ts): a backfill's `v` and `b` messages (issue #40) decode as
 * published, and a malformed one is skipped (null), never fatal to the worker reading it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodePartitionMessage, encodePartitionMessage, type PartitionMessage } from "../../src/cluster/partition-wire.js";

const base = { o: "ORG@AdobeOrg", n: "prod", at: 1_700_000_000_000, w: 42 };

test("a backfill's v and b messages round-trip", () => {
  const v: PartitionMessage = { k: "v", ...base, def: "d1", v: 1_700_000_000_001 };
  const b: PartitionMessage = { k: "b", ...base, run: "r1", def: "d1", v: 1_700_000_000_001, f: 99, i: 0, ch: [["17", 1], ["18", 0]], last: true };
  assert.deepEqual(decodePartitionMessage(encodePartitionMessage(v)), v);
  assert.deepEqual(decodePartitionMessage(encodePartitionMessage(b)), b);
});

test("a malformed backfill message is skipped", () => {
  const enc = (x: unknown) => Buffer.from(JSON.stringify(x), "utf8");
  assert.equal(decodePartitionMessage(enc({ k: "v", ...base, v: 1 })), null, "v without def");
  assert.equal(decodePartitionMessage(enc({ k: "v", ...base, def: "d1", v: "1" })), null, "v with a string version");
  const b = { k: "b", ...base, run: "r1", def: "d1", v: 1, f: 99, i: 0, ch: [], last: false };
  for (const field of ["run", "def", "v", "f", "i", "ch", "last"]) {
    const x: Record<string, unknown> = { ...b };
    delete x[field];
    assert.equal(decodePartitionMessage(enc(x)), null, `b without ${field}`);
  }
  assert.equal(decodePartitionMessage(enc({ ...b, ch: "17" })), null, "b whose chunk is not a list");
  assert.equal(decodePartitionMessage(enc({ ...b, w: undefined })), null, "b without the mark of the events stored");
});
