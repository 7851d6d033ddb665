/**
 * partitionFunction (a sandbox's many profiles at once, batch shards) gives every id the partition
 * partitionOf gives it — the one nats-server's subject mapping agrees with
 * (partitions.cluster.test.ts) — for the stores' numeric ids and for ids a token escapes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { partitionFunction, partitionOf } from "../../src/cluster/partitions.js";

test("partitionFunction agrees with partitionOf for numeric ids, escaped characters, empty ids and odd sandbox ids", () => {
  const ids = [...Array.from({ length: 3000 }, (_, i) => String(i)), "9007199254740991", "abc", "A-b_c", "a/b", "a.b", "x y", "é", "日本", "~", "", "-", "_"];
  for (const sandboxId of ["3f0e9a52-8f6c-4c51-b1d4-0a1c2f5d9e77", "prod", "sb/with space", "é"]) {
    for (const n of [1, 7, 64]) {
      const f = partitionFunction(sandboxId, n);
      for (const id of ids) assert.equal(f(id), partitionOf(sandboxId, id, n), `${sandboxId} ${id} of ${n}`);
    }
  }
  const spread = new Set(Array.from({ length: 1000 }, (_, i) => partitionFunction("prod", 64)(String(i))));
  assert.ok(spread.size > 48, `1,000 ids reach most of 64 partitions (${spread.size})`);
  assert.throws(() => partitionFunction("prod", 0), /partitions must be a positive integer, got 0/);
});
