/**
 * `inSegment("id")` over columns. The builtin (runtime/builtins.ts) asks the
 * `ups` namespace of segmentMembership first: when `ups` holds the id as an
 * object, its `status` decides (realized or existing, any case); otherwise the
 * first other namespace (in the profile's key order) holding the id decides.
 *
 * A row with a value in the column `segmentMembership.ups.<id>.status` is
 * therefore decided by that value alone. Any other row is false unless some
 * other namespace holds the id somewhere in the data — known from the table's
 * optional `columnPaths()`; without it, or when one does, those rows run the
 * builtin itself on the row object.
 */
import { inSegment } from "../runtime/builtins.js";
import { columnValue } from "./access.js";
import type { ColumnarTable } from "./layout.js";
import type { KernelBuilder } from "./kernel.js";
import type { ProfileNode, RunContext } from "./nodes.js";

const PREFIX = "segmentMembership.";

/** Could a namespace other than ups hold `id` in some row? */
function otherNamespaces(table: ColumnarTable, id: string): boolean {
  const paths = table.columnPaths?.();
  if (paths === undefined) return true;
  for (const p of paths) {
    if (!p.startsWith(PREFIX)) continue;
    const parts = p.slice(PREFIX.length).split(".");
    if (parts[0] !== "ups" && parts[1] === id) return true;
  }
  return false;
}

function isMember(status: unknown): boolean {
  if (typeof status !== "string") return false;
  const s = status.toLowerCase();
  return s === "realized" || s === "existing";
}

export class SegmentNode implements ProfileNode {
  readonly columnar = true;
  constructor(private readonly id: string) {}

  /** The common case as a table lookup: a string status column and no other namespace holding the id. */
  kernel(run: RunContext, k: KernelBuilder): string | null {
    const table = run.data.profiles;
    if (this.id.includes(".") || otherNamespaces(table, this.id)) return null;
    const col = table.column(`${PREFIX}ups.${this.id}.status`);
    if (col === undefined) return "0";
    if (col.kind !== "string") return null;
    const hits = new Uint8Array(col.dict.length + 1);
    col.dict.forEach((s, c) => (hits[c + 1] = isMember(s) ? 1 : 0));
    return `${k.ext(hits)}[${k.ext(col.codes)}[r] + 1]`;
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const table = run.data.profiles;
    const n = run.size;
    // An id with a "." cannot be named by a column path: every row asks the builtin.
    const dotted = this.id.includes(".");
    const col = dotted ? undefined : table.column(`${PREFIX}ups.${this.id}.status`);
    const others = dotted || otherNamespaces(table, this.id);
    // Status strings decide per dictionary entry once.
    const dictHits = col?.kind === "string" ? Uint8Array.from(col.dict, (s) => (isMember(s) ? 1 : 0)) : null;
    for (let i = 0; i < n; i++) {
      if (cand !== null && cand[i] === 0) {
        out[i] = 0;
        continue;
      }
      let decided = -1;
      if (col !== undefined) {
        if (dictHits !== null && col.kind === "string") {
          const c = col.codes[i]!;
          if (c >= 0) decided = dictHits[c]!;
        } else {
          const v = columnValue(col, i);
          // In a mixed column an explicit null status is present (and not a member).
          if (v !== null || (col.kind === "mixed" && col.values[i] === null)) decided = isMember(v) ? 1 : 0;
        }
      }
      if (decided < 0) decided = others ? (inSegment(run.data.profile(i), this.id) ? 1 : 0) : 0;
      out[i] = decided;
    }
  }
}
