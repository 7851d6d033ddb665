/**
 * The columnar table builder keeps a column's rows implicit while its values sit on rows 0, 1, 2, …
 * (#26: 4 bytes a row less while building the batch snapshot). Every shape of column — on every
 * row, on a prefix, sparse, with a gap, turning mixed, starting with nulls — must read back as the
 * rows that were added.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { TableBuilder } from "../../src/batch/columnar/table.js";

function rowsOf(n: number): Array<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  for (let r = 0; r < n; r++) {
    const o: Record<string, unknown> = { every: `t${r % 7}`, num: r * 1.5 };
    if (r < n / 2) o.prefix = r % 3 === 0;
    if (r < 3) o.rare = { deep: r };
    if (r !== 10) o.gap = r;
    o.mixed = r < 6 ? r : `s${r}`;
    o.nullFirst = r === 0 ? null : r;
    if (r < 4) o.shortPrefix = `p${r}`;
    rows.push(o);
  }
  return rows;
}

test("every column shape reads back as the rows added", () => {
  for (const n of [1, 5, 40, 1000]) {
    const rows = rowsOf(n);
    const b = new TableBuilder();
    for (const r of rows) b.add(r);
    const table = b.finish();
    for (let r = 0; r < n; r++) assert.deepEqual(table.row(r), rows[r], `n=${n} row ${r}`);
  }
});

test("a column on every row is dense with its values in row order", () => {
  const b = new TableBuilder();
  for (let r = 0; r < 100; r++) b.add({ x: r * 2, s: r % 2 === 0 ? "even" : "odd" });
  const table = b.finish();
  const x = table.column("x");
  assert.ok(x !== undefined && x.kind === "number");
  assert.deepEqual(Array.from(x.values), Array.from({ length: 100 }, (_, r) => r * 2));
  const s = table.column("s");
  assert.ok(s !== undefined && s.kind === "string");
  assert.deepEqual(Array.from(s.codes).map((c) => s.dict[c]), Array.from({ length: 100 }, (_, r) => (r % 2 === 0 ? "even" : "odd")));
});
