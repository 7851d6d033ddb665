/**
 * Growable column builders and the finished, immutable columnar tables.
 *
 * A row (a merged profile entity or an event body) is flattened into one
 * column per dotted path: objects are descended into, anything else (scalar,
 * array, null) is a value. A column starts typed by its first value and
 * becomes "mixed" as soon as a value of another type (or a null, an array)
 * appears. Mixed columns are stored compactly as dictionary codes into
 * distinct JSON texts and materialised as JSON values only when asked for
 * (`column(path)`), once, so large structured values that no query reads
 * (events' identityMap, productListItems) cost 4 bytes a row plus their
 * distinct texts.
 *
 * Builders grow by doubling and finish as exact-length typed arrays.
 */
import type { Column, ColumnarTable } from "./layout.js";
import { PackedStrings, textAt, type Texts } from "./packed-strings.js";
import { growShared, isGrowable, sharedArray, sharedCopy, type TypedCtor } from "./shared-arrays.js";

const MIN_CAPACITY = 64;
/**
 * A string column with at least this many distinct values, more than one run of equal rows in
 * two, stops de-duplicating (events' `_id`, order ids): the dictionary's hash map would cost more
 * than the strings. Its codes then index a list with possible repeats; the proper dictionary
 * column is built on first use. A mixed (JSON) column does the same (events' identityMap, the
 * same on a profile's every event: a text per profile packed, no dictionary).
 */
const RAW_STRINGS_AFTER = 1 << 18;

type Kind = "null" | "number" | "string" | "boolean" | "json";

/**
 * A column whose values sit in fewer than one row in SPARSE_BELOW is kept as (row, value)
 * pairs and expanded to the layout's dense arrays on first use: most event fields exist on
 * one event type only (`commerce.purchases.value`, `directMarketing.campaign`), and a dense
 * Float64Array would cost 8 bytes on every event.
 */
const SPARSE_BELOW = 4;

/**
 * Builds one column from (row, value) pairs appended in increasing row order. Values are kept
 * sparse while building (rows + payload, grown by doubling); `finish` makes them dense or keeps
 * them sparse.
 */
class ColumnBuilder {
  kind: Kind;
  count = 0;
  cap = 0;
  /**
   * Row of each value; not kept while the values sit on rows 0, 1, 2, … (a field every row has:
   * events' type and timestamp), which saves 4 bytes a row of every such column while building.
   */
  rows: Uint32Array = new Uint32Array(0);
  implicitRows = true;
  num: Float64Array = new Float64Array(0);
  bool: Int8Array = new Int8Array(0);
  /** Codes of string and json values. */
  codes: Int32Array = new Int32Array(0);
  readonly dict = new Map<string, number>();
  readonly dictList: string[] = [];
  /** Rows holding null (no value in a typed column; kept to rebuild row objects exactly). */
  readonly nullRows: number[] = [];
  /** A string or JSON column that stopped de-duplicating (see RAW_STRINGS_AFTER): its values, codes index them. */
  raw = false;
  packed: PackedStrings | null = null;
  /** Values that differ from the previous row's (string and JSON columns). */
  private runs = 0;
  private lastText: string | null = null;
  private lastCode = -1;

  constructor(
    kind: Kind,
    private readonly rawAfter: number,
  ) {
    this.kind = kind;
  }

  private reserve(): void {
    if (this.count < this.cap) return;
    const cap = Math.max(MIN_CAPACITY, this.cap * 2);
    if (!this.implicitRows) this.rows = growShared(this.rows, cap);
    if (this.kind === "number") this.num = growShared(this.num, cap);
    else if (this.kind === "boolean") this.bool = growShared(this.bool, cap);
    else this.codes = growShared(this.codes, cap);
    this.cap = cap;
  }

  /** Records the row of the value at `count` (after reserve()). */
  private putRow(row: number): void {
    if (this.implicitRows) {
      if (row === this.count) return;
      this.materializeRows();
    }
    this.rows[this.count] = row;
  }

  private materializeRows(): void {
    if (!this.implicitRows) return;
    const rows = new Uint32Array(Math.max(this.cap, this.count));
    for (let k = 0; k < this.count; k++) rows[k] = k;
    this.rows = rows;
    this.implicitRows = false;
  }

  private code(text: string): number {
    let c = this.dict.get(text);
    if (c === undefined) {
      c = this.dictList.length;
      this.dict.set(text, c);
      this.dictList.push(text);
    }
    return c;
  }

  set(row: number, v: unknown): void {
    const t = typeof v;
    if (v === null) {
      this.nullRows.push(row);
      if (this.kind !== "json") return;
    }
    if (this.kind === "null") {
      this.kind = t === "number" ? "number" : t === "string" ? "string" : t === "boolean" ? "boolean" : "json";
      this.cap = 0;
      this.rows = new Uint32Array(0);
      this.implicitRows = true;
      if (this.kind === "json") for (const r of this.nullRows) this.push(r, this.code("null"));
    }
    if (this.kind === "number" && t === "number") {
      this.reserve();
      this.putRow(row);
      this.num[this.count++] = v as number;
    } else if (this.kind === "string" && t === "string") {
      this.push(row, this.textCode(v as string));
    } else if (this.kind === "boolean" && t === "boolean") {
      this.reserve();
      this.putRow(row);
      this.bool[this.count++] = v ? 1 : 0;
    } else {
      if (this.kind !== "json") this.toJson();
      this.push(row, this.textCode(JSON.stringify(v)));
    }
  }

  /**
   * The code of a string or JSON text: the previous row's when equal (a profile's events repeat
   * their identityMap), else the dictionary's, or a new entry of the packed list.
   */
  private textCode(text: string): number {
    if (text === this.lastText) return this.lastCode;
    this.runs++;
    let c: number;
    if (this.packed !== null) c = this.packed.push(text);
    else {
      c = this.code(text);
      this.packIfDistinct();
    }
    this.lastText = text;
    this.lastCode = c;
    return c;
  }

  /**
   * Mostly distinct values, once runs of equal rows count as one (see RAW_STRINGS_AFTER): the
   * dictionary's list becomes the packed list, in order (codes so far index it).
   */
  private packIfDistinct(): void {
    if (this.dictList.length < this.rawAfter || this.dictList.length * 2 <= this.runs) return;
    this.raw = true;
    this.dict.clear();
    this.packed = new PackedStrings();
    for (const t of this.dictList) this.packed.push(t);
    this.dictList.length = 0;
  }

  private push(row: number, code: number): void {
    this.reserve();
    this.putRow(row);
    this.codes[this.count++] = code;
  }

  /** Re-encodes every value so far as JSON text (the column became mixed); nulls become "null" entries. */
  private toJson(): void {
    const old = this.kind;
    const n = this.count;
    this.materializeRows();
    const oldRows = this.rows;
    const texts: string[] = [];
    if (old === "number") for (let k = 0; k < n; k++) texts.push(JSON.stringify(this.num[k]));
    else if (old === "boolean") for (let k = 0; k < n; k++) texts.push(this.bool[k] === 1 ? "true" : "false");
    else if (this.packed !== null) for (let k = 0; k < n; k++) texts.push(JSON.stringify(this.packed.at(this.codes[k]!)));
    else for (let k = 0; k < n; k++) texts.push(JSON.stringify(this.dictList[this.codes[k]!]));
    this.dict.clear();
    this.dictList.length = 0;
    this.kind = "json";
    this.raw = false;
    this.packed = null;
    this.num = new Float64Array(0);
    this.bool = new Int8Array(0);
    this.codes = new Int32Array(0);
    this.rows = new Uint32Array(0);
    this.implicitRows = true;
    this.count = 0;
    this.cap = 0;
    // Merge the values with the null rows, in row order.
    const nulls = this.nullRows;
    let j = 0;
    for (let k = 0; k < n; k++) {
      while (j < nulls.length && nulls[j]! < oldRows[k]!) this.push(nulls[j++]!, this.code("null"));
      this.push(oldRows[k]!, this.code(texts[k]!));
    }
    while (j < nulls.length) this.push(nulls[j++]!, this.code("null"));
    // Codes of the JSON texts now: nothing to repeat; every row counts as a run (an upper bound).
    this.lastText = null;
    this.lastCode = -1;
    this.runs = this.count;
  }

  finish(length: number): StoredColumn {
    if (this.kind === "null") {
      // Only nulls: a mixed column of nulls (as the language package's reference builder makes it).
      this.kind = "json";
      for (const r of this.nullRows) this.push(r, this.code("null"));
    }
    const n = this.count;
    // A column that stays sparse is trimmed to its length (a copy); one made dense is read from
    // the builder's arrays as they are (views), so a large column is not copied twice over.
    const dense = n * SPARSE_BELOW >= length;
    // A kept sparse column's arrays go to shared memory (the evaluation pool reads them in place).
    const cut = <T extends Uint32Array | Float64Array | Int8Array | Int32Array>(a: T): T => (dense ? a.subarray(0, n) : sharedCopy(a, n)) as T;
    if (!dense) this.materializeRows();
    const implicit = this.implicitRows;
    const rows = implicit ? sharedArray(Uint32Array, 0) : cut(this.rows);
    const texts: Texts = this.packed !== null ? this.packed.trim() : this.dictList;
    this.packed = null;
    const of: SparseColumn["of"] = this.kind === "string" ? (this.raw ? "strings" : "string") : this.kind === "json" ? "json" : this.kind;
    const sparse: SparseColumn =
      this.kind === "number" ? { kind: "sparse", of, rows, values: cut(this.num), texts }
      : this.kind === "boolean" ? { kind: "sparse", of, rows, values: cut(this.bool), texts }
      : { kind: "sparse", of, rows, values: cut(this.codes), texts };
    this.num = new Float64Array(0);
    this.bool = new Int8Array(0);
    this.codes = new Int32Array(0);
    this.rows = new Uint32Array(0);
    this.implicitRows = true;
    return dense ? densify(sparse, length, implicit ? n : -1) : sparse;
  }
}

/** (row, value) pairs of a column with few values; `values` holds numbers, booleans (0/1) or codes into `texts`. */
export interface SparseColumn {
  readonly kind: "sparse";
  readonly of: "number" | "string" | "strings" | "boolean" | "json";
  readonly rows: Uint32Array;
  readonly values: Float64Array | Int32Array | Int8Array;
  /** Plain for "string"; packed or plain for "strings" and "json". */
  readonly texts: Texts;
}

/**
 * The dense form of a sparse column (a layout column, or json/strings codes). `onFirstRows` ≥ 0:
 * the values sit on rows 0 … onFirstRows − 1 and `s.rows` is empty (copied in one call).
 */
function densify(s: SparseColumn, length: number, onFirstRows = -1): Exclude<StoredColumn, SparseColumn> {
  const place = <T extends Float64Array | Int8Array | Int32Array>(C: TypedCtor<T>, empty: number): T => {
    if (onFirstRows >= 0 && isGrowable(s.values)) {
      // The builder's own array, extended in place to every row (no copy of a large column).
      const a = growShared(s.values as T, length) as T;
      a.fill(empty, onFirstRows, length);
      return sharedCopy(a, length);
    }
    const out = sharedArray(C, length).fill(empty);
    if (onFirstRows >= 0) out.set(s.values.subarray(0, onFirstRows));
    else for (let k = 0; k < s.rows.length; k++) out[s.rows[k]!] = s.values[k]!;
    return out as T;
  };
  switch (s.of) {
    case "number":
      return { kind: "number", values: place(Float64Array, NaN) };
    case "boolean":
      return { kind: "boolean", values: place(Int8Array, -1) };
    default: {
      const codes = place(Int32Array, -1);
      if (s.of === "string") return { kind: "string", codes, dict: s.texts as readonly string[] };
      if (s.of === "json") return { kind: "json", codes, texts: s.texts };
      return { kind: "strings", codes, texts: s.texts };
    }
  }
}

/** Index of row r in a sparse column, or -1. */
function sparseIndex(rows: Uint32Array, r: number): number {
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = rows[mid]!;
    if (v === r) return mid;
    if (v < r) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/**
 * How a finished column is kept: a layout column, a mixed column as codes into distinct JSON
 * texts ("json"), a string column whose codes index a list with repeats ("strings"), or any of
 * these as (row, value) pairs ("sparse").
 */
export type StoredColumn =
  | Column
  | { readonly kind: "json"; readonly codes: Int32Array; readonly texts: Texts }
  | { readonly kind: "strings"; readonly codes: Int32Array; readonly texts: Texts }
  | SparseColumn;

function setPath(target: Record<string, unknown>, parts: readonly string[], value: unknown): void {
  let o = target;
  for (let k = 0; k < parts.length - 1; k++) {
    const key = parts[k]!;
    let next = o[key];
    if (next === null || typeof next !== "object" || Array.isArray(next)) {
      next = {};
      define(o, key, next);
    }
    o = next as Record<string, unknown>;
  }
  define(o, parts[parts.length - 1]!, value);
}

function define(o: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  else o[key] = value;
}

export interface TableBuilderOptions {
  /** Top-level keys not flattened (the profile's segmentMembership.ups is replaced per job). */
  skip?: (path: string) => boolean;
  /**
   * Optional per-row instant (events' eventTime): a `timestamp` string that is
   * exactly `new Date(time).toISOString()` is not stored but derived on demand.
   */
  derivedTimestamp?: () => Float64Array;
  /** Distinct values after which a mostly-distinct string column stops de-duplicating (tests lower it). */
  rawStringsAfter?: number;
}

/**
 * One path of the rows' tree, resolved once per builder: its dotted path, whether `skip` drops
 * it, and its column. Walking a row then costs one small Map lookup per field instead of a
 * string concatenation, a lookup by the whole path and a skip call (a tenth of a 1M-profile
 * snapshot build went to those).
 */
interface PathNode {
  readonly path: string;
  /** A key no column can name ("" or containing "."): kept aside for row objects only. */
  readonly odd: boolean;
  readonly skipped: boolean;
  readonly children: Map<string, PathNode>;
  column: ColumnBuilder | undefined;
  /** Recorded in `objects` (an object was seen here). */
  object: boolean;
}

/** Builds one table row by row. Rows must be added in order 0, 1, 2, … */
export class TableBuilder {
  private readonly columns = new Map<string, ColumnBuilder>();
  /** Paths holding an object in some row. */
  private readonly objects = new Set<string>();
  /** Rows holding an empty object at a path (the only objects leaves cannot rebuild). */
  private readonly empty = new Map<string, number[]>();
  /** Keys no column can hold ("" or containing "."), by row: [parent path, key, JSON text]. */
  private readonly odd = new Map<number, Array<[string, string, string]>>();
  private readonly root: PathNode = { path: "", odd: false, skipped: false, children: new Map(), column: undefined, object: false };
  /** "derived" while every timestamp so far was canonical; then an ordinary column. */
  private timestampDerived: boolean;
  private timestampSeen = false;
  length = 0;

  constructor(private readonly o: TableBuilderOptions = {}) {
    this.timestampDerived = o.derivedTimestamp !== undefined;
  }

  /** Appends one row. */
  add(obj: Record<string, unknown>): number {
    const row = this.length++;
    this.walk(row, obj, this.root);
    return row;
  }

  private child(parent: PathNode, k: string): PathNode {
    const odd = k === "" || k.includes(".");
    const path = parent.path === "" ? k : `${parent.path}.${k}`;
    const node: PathNode = { path, odd, skipped: !odd && (this.o.skip?.(path) ?? false), children: new Map(), column: undefined, object: false };
    parent.children.set(k, node);
    return node;
  }

  private walk(row: number, obj: Record<string, unknown>, node: PathNode): void {
    let any = false;
    for (const k in obj) {
      if (!Object.hasOwn(obj, k)) continue;
      any = true;
      const v = obj[k];
      if (v === undefined) continue;
      const c = node.children.get(k) ?? this.child(node, k);
      if (c.odd) {
        // No column can name such a key (a PQL path `a.b` is field b of field a): kept aside for row objects only.
        let list = this.odd.get(row);
        if (list === undefined) this.odd.set(row, (list = []));
        list.push([node.path, k, JSON.stringify(v)]);
        continue;
      }
      if (c.skipped) continue;
      if (v !== null && typeof v === "object" && !Array.isArray(v)) {
        if (!c.object) {
          c.object = true;
          this.objects.add(c.path);
        }
        this.walk(row, v as Record<string, unknown>, c);
        continue;
      }
      if (node === this.root && k === "timestamp" && this.timestampDerived) {
        const t = this.o.derivedTimestamp!()[row]!;
        if (typeof v === "string" && Number.isFinite(t) && new Date(t).toISOString() === v) {
          this.timestampSeen = true;
          continue;
        }
        this.materializeTimestamp(row);
      }
      (c.column ??= this.column(c.path, v)).set(row, v);
    }
    if (!any && node !== this.root) {
      let rows = this.empty.get(node.path);
      if (rows === undefined) this.empty.set(node.path, (rows = []));
      rows.push(row);
    }
  }

  private column(path: string, first: unknown): ColumnBuilder {
    let c = this.columns.get(path);
    if (c === undefined) {
      const t = typeof first;
      c = new ColumnBuilder(first === null ? "null" : t === "number" ? "number" : t === "string" ? "string" : t === "boolean" ? "boolean" : "json", this.o.rawStringsAfter ?? RAW_STRINGS_AFTER);
      this.columns.set(path, c);
    }
    return c;
  }

  /** The first non-canonical timestamp: earlier canonical rows become ordinary values. */
  private materializeTimestamp(upTo: number): void {
    this.timestampDerived = false;
    if (!this.timestampSeen) return;
    const time = this.o.derivedTimestamp!();
    const c = this.column("timestamp", "");
    for (let r = 0; r < upTo; r++) if (Number.isFinite(time[r]!)) c.set(r, new Date(time[r]!).toISOString());
  }

  finish(): StoredTable {
    const cols = new Map<string, StoredColumn>();
    const nulls = new Map<string, readonly number[]>();
    for (const [path, b] of this.columns) {
      const c = b.finish(this.length);
      cols.set(path, c);
      if (b.kind !== "json" && b.nullRows.length > 0) nulls.set(path, b.nullRows);
      b.dict.clear();
    }
    this.columns.clear();
    this.root.children.clear();
    return new StoredTable(this.length, cols, this.objects, { empty: this.empty, nulls, odd: this.odd }, this.timestampDerived && this.timestampSeen ? this.o.derivedTimestamp!() : null);
  }
}

/** Rows (ascending) per path: number[] when built, Uint32Array when read from a snapshot file. */
export type RowLists = ReadonlyMap<string, ArrayLike<number>>;

/** What rebuilding exact row objects needs besides the columns (sparse). */
export interface TableExtra {
  empty: RowLists;
  nulls: RowLists;
  odd: ReadonlyMap<number, ReadonlyArray<readonly [string, string, string]>>;
}

/** A finished table: columns by path, JSON columns materialised on first use. */
export class StoredTable implements ColumnarTable {
  private readonly materialized = new Map<string, Column>();
  private readonly prefixes = new Set<string>();
  private readonly parts = new Map<string, readonly string[]>();

  constructor(
    readonly length: number,
    private readonly cols: ReadonlyMap<string, StoredColumn>,
    private readonly objects: ReadonlySet<string>,
    private readonly extra: TableExtra,
    /** Instants of rows whose `timestamp` is derived (canonical ISO text of the instant). */
    private readonly derivedTime: Float64Array | null,
  ) {
    for (const p of objects) this.prefixes.add(p);
    for (const p of cols.keys()) this.parts.set(p, p.split("."));
    if (derivedTime !== null) this.parts.set("timestamp", ["timestamp"]);
  }

  /** Everything the table was built with (snapshot-file.ts writes it). */
  contents(): { cols: ReadonlyMap<string, StoredColumn>; objects: ReadonlySet<string>; extra: TableExtra; derivedTime: Float64Array | null } {
    return { cols: this.cols, objects: this.objects, extra: this.extra, derivedTime: this.derivedTime };
  }

  /** Paths with a column. */
  columnPaths(): string[] {
    return [...this.parts.keys()];
  }

  stored(path: string): StoredColumn | undefined {
    return this.cols.get(path);
  }

  column(path: string): Column | undefined {
    const m = this.materialized.get(path);
    if (m !== undefined) return m;
    if (path === "timestamp" && this.derivedTime !== null) {
      const dict: string[] = [];
      const index = new Map<number, number>();
      const codes = new Int32Array(this.length).fill(-1);
      for (let r = 0; r < this.length; r++) {
        const t = this.derivedTime[r]!;
        if (!Number.isFinite(t)) continue;
        let c = index.get(t);
        if (c === undefined) {
          c = dict.length;
          index.set(t, c);
          dict.push(new Date(t).toISOString());
        }
        codes[r] = c;
      }
      const col: Column = { kind: "string", codes, dict };
      this.materialized.set(path, col);
      return col;
    }
    const stored = this.cols.get(path);
    if (stored === undefined) return undefined;
    const s = stored.kind === "sparse" ? densify(stored, this.length) : stored;
    if (s.kind !== "json" && s.kind !== "strings" && stored.kind === "sparse") {
      this.materialized.set(path, s);
      return s;
    }
    if (s.kind === "strings") {
      const dict: string[] = [];
      const index = new Map<string, number>();
      const remap = new Int32Array(s.texts.length);
      for (let k = 0; k < s.texts.length; k++) {
        const t = textAt(s.texts, k);
        let c = index.get(t);
        if (c === undefined) {
          c = dict.length;
          index.set(t, c);
          dict.push(t);
        }
        remap[k] = c;
      }
      const codes = new Int32Array(this.length);
      for (let r = 0; r < this.length; r++) codes[r] = s.codes[r] === -1 ? -1 : remap[s.codes[r]!]!;
      const col: Column = { kind: "string", codes, dict };
      this.materialized.set(path, col);
      return col;
    }
    if (s.kind !== "json") return s;
    const parsed = new Array<unknown>(s.texts.length);
    for (let k = 0; k < parsed.length; k++) parsed[k] = JSON.parse(textAt(s.texts, k)) as unknown;
    const values = new Array<unknown>(this.length);
    for (let r = 0; r < this.length; r++) values[r] = s.codes[r] === -1 ? undefined : parsed[s.codes[r]!];
    const col: Column = { kind: "mixed", values };
    this.materialized.set(path, col);
    return col;
  }

  hasChildren(path: string): boolean {
    return this.prefixes.has(path);
  }

  /** Drops materialised JSON columns (memory between jobs). */
  release(): void {
    this.materialized.clear();
  }

  /** Row r as the plain object it was built from (a fresh object each call). */
  row(r: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [path, rows] of this.extra.empty) if (binaryHas(rows, r)) setPath(out, path.split("."), {});
    for (const [path, rows] of this.extra.nulls) if (binaryHas(rows, r)) setPath(out, this.parts.get(path)!, null);
    for (const [path, parts] of this.parts) {
      const v = this.valueAt(path, r);
      if (v !== undefined) setPath(out, parts, v);
    }
    for (const [parent, key, json] of this.extra.odd.get(r) ?? []) {
      if (parent === "") define(out, key, JSON.parse(json));
      else setPath(out, [...parent.split("."), key], JSON.parse(json));
    }
    return out;
  }

  private valueAt(path: string, r: number): unknown {
    if (path === "timestamp" && this.derivedTime !== null && !this.cols.has(path)) {
      const t = this.derivedTime[r]!;
      return Number.isFinite(t) ? new Date(t).toISOString() : undefined;
    }
    const c = this.cols.get(path)!;
    if (c.kind === "sparse") {
      const k = sparseIndex(c.rows, r);
      if (k < 0) return undefined;
      switch (c.of) {
        case "number":
          return c.values[k];
        case "boolean":
          return c.values[k] === 1;
        case "json":
          return JSON.parse(textAt(c.texts, c.values[k]!)) as unknown;
        default:
          return textAt(c.texts, c.values[k]!);
      }
    }
    switch (c.kind) {
      case "number":
        return Number.isNaN(c.values[r]!) ? undefined : c.values[r];
      case "boolean":
        return c.values[r] === -1 ? undefined : c.values[r] === 1;
      case "string":
        return c.codes[r] === -1 ? undefined : c.dict[c.codes[r]!];
      case "strings":
        return c.codes[r] === -1 ? undefined : textAt(c.texts, c.codes[r]!);
      case "json":
        return c.codes[r] === -1 ? undefined : (JSON.parse(textAt(c.texts, c.codes[r]!)) as unknown);
      default:
        return c.values[r];
    }
  }
}

function binaryHas(sorted: ArrayLike<number>, x: number): boolean {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = sorted[mid]!;
    if (v === x) return true;
    if (v < x) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}
