/**
 * Large builder arrays grow in place on a growable SharedArrayBuffer (#42: the snapshot build's
 * peak memory): contents survive every growth, finishing is a view (no copy), and a table built
 * from columns past the threshold reads back as the rows that were added.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { growShared, isGrowable, sharedCopy } from "../../src/batch/columnar/shared-arrays.js";
import { PackedStrings } from "../../src/batch/columnar/packed-strings.js";
import { TableBuilder } from "../../src/batch/columnar/table.js";
import type { Column } from "../../src/batch/columnar/layout.js";

test("a small array doubles as a plain array; a large one grows in place, its contents kept", () => {
  let a = new Float64Array(64);
  for (let k = 0; k < 64; k++) a[k] = k;
  a = growShared(a, 100);
  assert.equal(a.length, 128);
  assert.equal(isGrowable(a), false, "below 1 MB: a plain array");
  let n = 64;
  let buffer: ArrayBufferLike | null = null;
  let growths = 0;
  while (n < 2_000_000) {
    a = growShared(a, n + 1);
    for (; n < a.length; n++) a[n] = n;
    if (isGrowable(a)) {
      if (buffer !== null) assert.equal(a.buffer, buffer, "the same buffer after each growth");
      buffer = a.buffer;
      growths++;
    }
  }
  assert.ok(growths >= 3, `grew in place ${growths} times`);
  for (let k = 0; k < n; k += 4093) assert.equal(a[k], k);
  assert.equal(a[n - 1], n - 1);
  const done = sharedCopy(a, 1_500_000);
  assert.equal(done.buffer, a.buffer, "finishing a grown array is a view, not a copy");
  assert.equal(done.length, 1_500_000);
  assert.ok(done.buffer instanceof SharedArrayBuffer);
  assert.equal(done[1_499_999], 1_499_999);
  assert.equal(growShared(new Uint8Array(0), 0).length, 0, "no growth asked, none made");
});

test("packed strings past the threshold keep every string across in-place growth and trim", () => {
  const p = new PackedStrings();
  const want: string[] = [];
  for (let k = 0; k < 150_000; k++) {
    const s = k % 1000 === 7 ? `wide ✓ ${k}` : `id-${k.toString(36)}-${"x".repeat(k % 13)}`;
    want.push(s);
    assert.equal(p.push(s), k);
  }
  p.trim();
  const c = p.contents();
  assert.ok(isGrowable(c.bytes) && isGrowable(c.ends), "bytes and ends grew in place");
  for (let k = 0; k < want.length; k += 7) assert.equal(p.at(k), want[k]);
  assert.equal(p.at(want.length - 1), want[want.length - 1]);
  p.push("after trim");
  assert.equal(p.at(want.length), "after trim");
  assert.equal(p.at(0), want[0]);
});

test("a table whose columns grew in place reads back as its rows (every row, a prefix, sparse, raw strings)", () => {
  const n = 300_000;
  const rowOf = (r: number): Record<string, unknown> => {
    const o: Record<string, unknown> = { num: r * 0.5, kind: `k${r % 5}`, id: `event-${r}` };
    if (r < n * 0.6) o.prefix = r + 1;
    if (r % 3 === 0) o.third = r % 2 === 0;
    if (r % 50 === 1) o.rare = `r${r}`;
    return o;
  };
  const b = new TableBuilder();
  for (let r = 0; r < n; r++) b.add(rowOf(r));
  const t = b.finish();
  for (const r of [0, 1, 2, 3, 179_999, 180_000, 180_001, n - 1]) assert.deepEqual(t.row(r), rowOf(r), `row ${r}`);
  for (let r = 0; r < n; r += 1009) assert.deepEqual(t.row(r), rowOf(r), `row ${r}`);
  const num = t.column("num") as Extract<Column, { kind: "number" }>;
  assert.equal(num.kind, "number");
  assert.ok(isGrowable(num.values), "a column on every row is the builder's own array");
  assert.equal(num.values.length, n);
  const prefix = t.column("prefix") as Extract<Column, { kind: "number" }>;
  assert.equal(prefix.values.length, n);
  assert.ok(Number.isNaN(prefix.values[n - 1]!) && prefix.values[179_999] === 180_000, "a prefix column is extended to every row with no value after its last");
});
