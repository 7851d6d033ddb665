/**
 * A snapshot's base part kept on disk (issue #26): the first job after a restart loads it and
 * refreshes it through the change feed instead of scanning every profile again.
 *
 * Layout (little-endian):
 *
 *   "SEGSNAP\n"                                  8 bytes
 *   typed blocks                                 every typed array, 8-aligned, in blocks of ≤ 1 GiB
 *   string region                                every string list: Latin-1 bytes, Uint32 ends, wide strings as JSON
 *   header                                       JSON (UTF-8): format, key, store, change-feed version, where every array is
 *   trailer                                      u32 header bytes, u32 CRC-32 of the header, "SNAPEND\n"
 *
 * The header sits at the end so the body streams out in one pass; it carries the CRC-32 and
 * length of the body. A block is read whole and its arrays are views on it (no copy); string
 * lists are read one by one, decoded, and their bytes dropped. The header is checked (format first,
 * then its CRC and the lengths; the cache then checks key, store and change-feed version) before
 * the body is read, so a file of no use costs one small read.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { crc32 } from "node:zlib";
import type { MergePolicySpec } from "../../profiles/types.js";
import { SnapshotPart } from "./snapshot.js";
import { PackedStrings, WIDE, type Texts } from "./packed-strings.js";
import { sharedCopy } from "./shared-arrays.js";
import { StoredTable, type SparseColumn, type StoredColumn } from "./table.js";

export const SNAPSHOT_FORMAT = 1;
const MAGIC = Buffer.from("SEGSNAP\n", "latin1");
const END = Buffer.from("SNAPEND\n", "latin1");
const TRAILER = 16;
const BLOCK_MAX = 1 << 30;
/** File I/O in pieces of this size (one fs call moves at most 2 GiB). */
const IO_CHUNK = 64 << 20;
/** A string list is joined and encoded this many characters (or strings) at a time (V8's string length limit). */
const JOIN_CHARS = 16 << 20;
const JOIN_STRINGS = 1 << 16;

type TypedKind = "u8" | "i8" | "u16" | "u32" | "i32" | "f64";
type AnyTyped = Uint8Array | Int8Array | Uint16Array | Uint32Array | Int32Array | Float64Array;
const TYPED = {
  u8: Uint8Array,
  i8: Int8Array,
  u16: Uint16Array,
  u32: Uint32Array,
  i32: Int32Array,
  f64: Float64Array,
} as const;

/** A typed array: `n` elements at byte `o` of block `b`. */
interface TypedRef { t: TypedKind; b: number; o: number; n: number }
/** String list number `i` (file order): `n` strings, `s` bytes at `o` in the string region (`b` Latin-1 bytes, ends, `w` bytes of wide JSON). */
interface ListRef { i: number; n: number; o: number; s: number; b: number; w: number }
interface PackedRef { bytes: TypedRef; ends: TypedRef; length: number; wide: ListRef; wideAt: TypedRef }
type TextsRef = { list: ListRef } | { packed: PackedRef };
type ColumnRef =
  | { k: "number" | "boolean"; v: TypedRef }
  | { k: "string"; c: TypedRef; d: ListRef }
  /** `t` a plain list in files written before JSON texts could be packed. */
  | { k: "json"; c: TypedRef; t: ListRef | TextsRef }
  | { k: "strings"; c: TypedRef; t: TextsRef }
  | { k: "sparse"; of: SparseColumn["of"]; r: TypedRef; v: TypedRef; t: TextsRef };
interface TableRef {
  length: number;
  cols: Array<[string, ColumnRef]>;
  objects: string[];
  empty: Array<[string, TypedRef]>;
  nulls: Array<[string, TypedRef]>;
  /** Keys no column can hold: one row per triple, the triples' texts flattened. */
  oddRows: TypedRef;
  odd: ListRef;
  derivedTime: TypedRef | null;
}
interface PartRef {
  profiles: TableRef;
  events: TableRef;
  eventStart: TypedRef;
  eventTime: TypedRef;
  rowOrdinal: TypedRef;
  ordinalStart: TypedRef;
  profileIds: ListRef;
  optedOut: TypedRef;
  nsStart: TypedRef;
  nsCodes: TypedRef;
  namespaces: ListRef;
  /** A list in files written before identity texts were packed. */
  identityText: ListRef | TextsRef;
}

/** What a file says about itself besides the arrays. */
export interface SnapshotFileMeta {
  /** The cache key: tenant org, sandbox, merge policy semantics. */
  key: string;
  /** Hash of the profile store's identity, when the cache was given one. */
  store: string | null;
  /** The change feed's version the base is current to. */
  version: number;
  withEvents: boolean;
  policy: MergePolicySpec;
}

export interface SnapshotFileHeader extends SnapshotFileMeta {
  format: number;
  writtenAt: string;
  blocks: number[];
  strings: number;
  crc: number;
  part: PartRef;
}

/** Why a file cannot be used (the message names the reason). */
export class SnapshotFileError extends Error {}

const align = (n: number, a: number) => Math.ceil(n / a) * a;

function kindOf(a: AnyTyped): TypedKind {
  if (a instanceof Float64Array) return "f64";
  if (a instanceof Int32Array) return "i32";
  if (a instanceof Uint32Array) return "u32";
  if (a instanceof Uint16Array) return "u16";
  if (a instanceof Int8Array) return "i8";
  return "u8";
}

function bytesOf(a: AnyTyped): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** CRC-32 of bytes continued from `crc`, in pieces. */
function crcOf(bytes: Uint8Array, crc: number): number {
  for (let k = 0; k < bytes.length; k += IO_CHUNK) crc = crc32(bytes.subarray(k, k + IO_CHUNK), crc);
  return crc;
}

/**
 * Where every array of a part goes; arrays and lists shared by identity are listed once (events'
 * derived times are eventTime). The file's plan places arrays in blocks to write; the shared plan
 * (`describeSharedPart`) names the shared buffers they already live on.
 */
class Plan {
  readonly blocks: number[] = [0];
  readonly typed: Array<{ a: AnyTyped; ref: TypedRef }> = [];
  readonly lists: Array<{ texts: readonly string[]; ref: ListRef }> = [];
  private readonly seenTyped = new Map<AnyTyped, TypedRef>();
  private readonly seenLists = new Map<readonly string[], ListRef>();

  constructor(
    private readonly place: ((a: AnyTyped) => TypedRef) | null = null,
    /** Lists a reader does not need (left empty). */
    private readonly omit: ReadonlySet<readonly string[]> = new Set(),
  ) {}

  array(a: AnyTyped): TypedRef {
    const seen = this.seenTyped.get(a);
    if (seen !== undefined) return seen;
    let ref: TypedRef;
    if (this.place !== null) ref = this.place(a);
    else {
      if (this.blocks.at(-1)! > 0 && this.blocks.at(-1)! + a.byteLength > BLOCK_MAX) this.blocks.push(0);
      const b = this.blocks.length - 1;
      const o = this.blocks[b]!;
      this.blocks[b] = align(o + a.byteLength, 8);
      ref = { t: kindOf(a), b, o, n: a.length };
    }
    this.typed.push({ a, ref });
    this.seenTyped.set(a, ref);
    return ref;
  }

  rows(list: ArrayLike<number>): TypedRef {
    return this.array(list instanceof Uint32Array ? list : Uint32Array.from(list));
  }

  list(given: readonly string[]): ListRef {
    const seen = this.seenLists.get(given);
    if (seen !== undefined) return seen;
    const texts = this.omit.has(given) ? [] : given;
    const ref: ListRef = { i: this.lists.length, n: texts.length, o: 0, s: 0, b: 0, w: 0 };
    this.seenLists.set(given, ref);
    this.lists.push({ texts, ref });
    return ref;
  }

  texts(t: Texts): TextsRef {
    if (!(t instanceof PackedStrings)) return { list: this.list(t) };
    const c = t.contents();
    const wide = [...c.wide].sort((x, y) => x[0] - y[0]);
    return { packed: { bytes: this.array(c.bytes), ends: this.array(c.ends), length: c.length, wideAt: this.array(Uint32Array.from(wide, (w) => w[0])), wide: this.list(wide.map((w) => w[1])) } };
  }

  column(c: StoredColumn): ColumnRef {
    switch (c.kind) {
      case "number":
      case "boolean":
        return { k: c.kind, v: this.array(c.values) };
      case "string":
        return { k: "string", c: this.array(c.codes), d: this.list(c.dict) };
      case "json":
        return { k: "json", c: this.array(c.codes), t: this.texts(c.texts) };
      case "strings":
        return { k: "strings", c: this.array(c.codes), t: this.texts(c.texts) };
      case "sparse":
        return { k: "sparse", of: c.of, r: this.array(c.rows), v: this.array(c.values), t: this.texts(c.texts) };
      default:
        throw new Error(`a stored column of kind ${c.kind} cannot be written`);
    }
  }

  table(t: StoredTable): TableRef {
    const c = t.contents();
    const oddRows: number[] = [];
    const odd: string[] = [];
    for (const [row, triples] of c.extra.odd) {
      for (const tr of triples) {
        oddRows.push(row);
        odd.push(...tr);
      }
    }
    return {
      length: t.length,
      cols: [...c.cols].map(([p, col]) => [p, this.column(col)]),
      objects: [...c.objects],
      empty: [...c.extra.empty].map(([p, rows]) => [p, this.rows(rows)]),
      nulls: [...c.extra.nulls].map(([p, rows]) => [p, this.rows(rows)]),
      oddRows: this.rows(oddRows),
      odd: this.list(odd),
      derivedTime: c.derivedTime === null ? null : this.array(c.derivedTime),
    };
  }

  part(p: SnapshotPart): PartRef {
    const a = p.arrays();
    return {
      profiles: this.table(a.profiles),
      events: this.table(a.events),
      eventStart: this.array(a.eventStart),
      eventTime: this.array(a.eventTime),
      rowOrdinal: this.array(a.rowOrdinal),
      ordinalStart: this.array(a.ordinalStart),
      profileIds: this.list(a.profileIds),
      optedOut: this.array(a.optedOut),
      nsStart: this.array(a.nsStart),
      nsCodes: this.array(a.nsCodes),
      namespaces: this.list(a.namespaces),
      identityText: this.texts(a.identityText),
    };
  }
}

/** Sequential writes (the body) with a running CRC-32; small pieces are gathered into one write. */
class Out {
  position = 0;
  crc = 0;
  private readonly stage = Buffer.alloc(1 << 20);
  private staged = 0;

  /** `fileAt`: where the body starts in the file (writes name their position). */
  constructor(
    private readonly fh: FileHandle,
    private fileAt: number,
  ) {}

  async put(bytes: Uint8Array, checked = true): Promise<void> {
    if (checked) this.crc = crcOf(bytes, this.crc);
    this.position += bytes.length;
    if (this.staged + bytes.length <= this.stage.length) {
      this.stage.set(bytes, this.staged);
      this.staged += bytes.length;
      return;
    }
    await this.flush();
    await this.writeAll(bytes);
  }

  /** Sequential writes of every byte (a write may take fewer than asked). */
  private async writeAll(bytes: Uint8Array): Promise<void> {
    for (let k = 0; k < bytes.length; ) {
      const { bytesWritten } = await this.fh.write(bytes, k, Math.min(IO_CHUNK, bytes.length - k), this.fileAt);
      k += bytesWritten;
      this.fileAt += bytesWritten;
    }
  }

  async pad(to: number): Promise<void> {
    const n = align(this.position, to) - this.position;
    if (n > 0) await this.put(new Uint8Array(n));
  }

  async flush(): Promise<void> {
    if (this.staged === 0) return;
    await this.writeAll(this.stage.subarray(0, this.staged));
    this.staged = 0;
  }
}

/** Writes one string list: Latin-1 bytes, ends (4-aligned), wide strings as JSON; fills its ref. */
async function putList(out: Out, texts: readonly string[], ref: ListRef): Promise<void> {
  const start = out.position;
  const n = texts.length;
  const ends = new Uint32Array(n);
  const wide: Array<[number, string]> = [];
  let bytes = 0;
  for (let k = 0; k < n; ) {
    let end = k;
    for (let chars = 0; end < n && end - k < JOIN_STRINGS && chars < JOIN_CHARS; end++) chars += texts[end]!.length;
    let chunk = texts.slice(k, end);
    let joined = chunk.join("");
    if (WIDE.test(joined)) {
      // Rare: only the strings with a character above U+00FF go aside.
      chunk = chunk.map((t, j) => {
        if (!WIDE.test(t)) return t;
        wide.push([k + j, t]);
        return "";
      });
      joined = chunk.join("");
    }
    for (let j = 0; j < chunk.length; j++) ends[k + j] = bytes += chunk[j]!.length;
    if (bytes > 0xffff_ffff) throw new Error("a string list of more than 4 GiB cannot be written");
    await out.put(Buffer.from(joined, "latin1"));
    k = end;
  }
  ref.b = bytes;
  await out.pad(4);
  await out.put(bytesOf(ends));
  if (wide.length > 0) {
    const json = Buffer.from(JSON.stringify(wide), "utf8");
    ref.w = json.length;
    await out.put(json);
  }
  await out.pad(8);
  ref.o = start;
  ref.s = out.position - start;
}

/**
 * Writes a part to `file` atomically: a temporary file in the same directory, fsync, rename,
 * fsync of the directory. Returns the file's size.
 */
export async function writeSnapshotFile(file: string, meta: SnapshotFileMeta, part: SnapshotPart): Promise<number> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const fh = await open(tmp, "w");
  try {
    const plan = new Plan();
    const partRef = plan.part(part);
    await fh.write(MAGIC, 0, MAGIC.length, 0);
    // Body positions count from after the magic.
    const out = new Out(fh, MAGIC.length);
    const blockStart = [0];
    for (const size of plan.blocks) blockStart.push(blockStart.at(-1)! + size);
    for (const { a, ref } of plan.typed) {
      const at = blockStart[ref.b]! + ref.o;
      if (out.position < at) await out.put(new Uint8Array(at - out.position));
      await out.put(bytesOf(a));
    }
    const typedBytes = blockStart.at(-1)!;
    if (out.position < typedBytes) await out.put(new Uint8Array(typedBytes - out.position));
    const stringsStart = out.position;
    for (const { texts, ref } of plan.lists) {
      await putList(out, texts, ref);
      ref.o -= stringsStart;
    }
    const header: SnapshotFileHeader = {
      format: SNAPSHOT_FORMAT,
      ...meta,
      writtenAt: new Date().toISOString(),
      blocks: plan.blocks,
      strings: out.position - stringsStart,
      crc: out.crc,
      part: partRef,
    };
    const json = Buffer.from(JSON.stringify(header), "utf8");
    const trailer = Buffer.alloc(TRAILER);
    trailer.writeUInt32LE(json.length, 0);
    trailer.writeUInt32LE(crc32(json), 4);
    END.copy(trailer, 8);
    await out.put(json, false);
    await out.put(trailer, false);
    await out.flush();
    await fh.sync();
    await fh.close();
    await rename(tmp, file);
    await syncDir(path.dirname(file));
    return MAGIC.length + out.position;
  } catch (e) {
    await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw e;
  }
}

async function syncDir(dir: string): Promise<void> {
  // Makes the rename durable; not every platform can fsync a directory.
  const d = await open(dir, "r").catch(() => null);
  if (d === null) return;
  await d.sync().catch(() => undefined);
  await d.close();
}

/** Removes temporary files of writes that never finished (a crash), older than `ageMs`. */
export async function removeStaleTemps(dir: string, ageMs: number): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.endsWith(".tmp")) continue;
    const full = path.join(dir, name);
    const st = await stat(full).catch(() => null);
    if (st !== null && Date.now() - st.mtimeMs > ageMs) await rm(full, { force: true });
  }
}

async function readAt(fh: FileHandle, into: Uint8Array, position: number): Promise<void> {
  for (let k = 0; k < into.length; ) {
    const { bytesRead } = await fh.read(into, k, Math.min(IO_CHUNK, into.length - k), position + k);
    if (bytesRead === 0) throw new SnapshotFileError(`truncated: ended at byte ${position + k}`);
    k += bytesRead;
  }
}

/** An open file whose header was read and checked (format, CRC, lengths); the body is not read yet. */
export interface OpenSnapshotFile {
  header: SnapshotFileHeader;
  size: number;
  fh: FileHandle;
}

/** Opens a file and reads its header. ENOENT passes through; any other problem is a SnapshotFileError naming it. */
export async function openSnapshotFile(file: string): Promise<OpenSnapshotFile> {
  const fh = await open(file, "r");
  try {
    const size = (await fh.stat()).size;
    if (size < MAGIC.length + TRAILER) throw new SnapshotFileError(`truncated: ${size} bytes`);
    const head = Buffer.alloc(MAGIC.length);
    const trailer = Buffer.alloc(TRAILER);
    await readAt(fh, head, 0);
    await readAt(fh, trailer, size - TRAILER);
    if (!head.equals(MAGIC)) throw new SnapshotFileError("not a snapshot file");
    if (!trailer.subarray(8).equals(END)) throw new SnapshotFileError(`truncated or unfinished: no end marker (${size} bytes)`);
    const jsonBytes = trailer.readUInt32LE(0);
    if (jsonBytes > size - MAGIC.length - TRAILER) throw new SnapshotFileError(`truncated: a header of ${jsonBytes} bytes in ${size}`);
    const json = Buffer.alloc(jsonBytes);
    await readAt(fh, json, size - TRAILER - jsonBytes);
    let header: SnapshotFileHeader;
    try {
      header = JSON.parse(json.toString("utf8")) as SnapshotFileHeader;
    } catch {
      throw new SnapshotFileError("unreadable header");
    }
    // The format first: another format may check its header differently.
    if (header.format !== SNAPSHOT_FORMAT) throw new SnapshotFileError(`format version ${String(header.format)}, this build reads ${SNAPSHOT_FORMAT}`);
    if (crc32(json) !== trailer.readUInt32LE(4)) throw new SnapshotFileError("header checksum mismatch");
    const body = header.blocks.reduce((x, y) => x + y, 0) + header.strings;
    if (MAGIC.length + body + jsonBytes + TRAILER !== size) throw new SnapshotFileError(`truncated: ${size} bytes, the header describes ${MAGIC.length + body + jsonBytes + TRAILER}`);
    return { header, size, fh };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

function bad(what: string): never {
  throw new SnapshotFileError(`corrupt: ${what}`);
}

/** Reads the body of an opened file into a part (typed arrays are views on the blocks). Closes the file. */
export async function readSnapshotPart(f: OpenSnapshotFile): Promise<SnapshotPart> {
  const { header, fh } = f;
  try {
    let crc = 0;
    let position = MAGIC.length;
    const blocks: SharedArrayBuffer[] = [];
    for (const size of header.blocks) {
      // Shared memory: the evaluation pool's workers read the loaded part in place.
      const ab = new SharedArrayBuffer(size);
      const bytes = new Uint8Array(ab);
      await readAt(fh, bytes, position);
      crc = crcOf(bytes, crc);
      blocks.push(ab);
      position += size;
    }
    const lists = new Map<number, string[]>();
    let at = 0;
    for (const ref of collectLists(header.part)) {
      if (lists.has(ref.i)) continue;
      if (ref.i !== lists.size || ref.o !== at || !(ref.s >= 0) || at + ref.s > header.strings) bad(`string list ${ref.i}`);
      const buf = Buffer.allocUnsafeSlow(ref.s);
      await readAt(fh, buf, position + at);
      crc = crcOf(buf, crc);
      lists.set(ref.i, decodeList(buf, ref));
      at += ref.s;
    }
    if (at !== header.strings) bad("string region length");
    if (crc !== header.crc) throw new SnapshotFileError("checksum mismatch");
    return new Reader(blocks, lists).part(header.part);
  } finally {
    await fh.close();
  }
}

/** Every list ref of a part, in file order. */
function collectLists(p: PartRef): ListRef[] {
  const out: ListRef[] = [p.profileIds, p.namespaces];
  const texts = (t: TextsRef) => out.push("list" in t ? t.list : t.packed.wide);
  if (isTextsRef(p.identityText)) texts(p.identityText);
  else out.push(p.identityText);
  for (const t of [p.profiles, p.events]) {
    out.push(t.odd);
    for (const [, c] of t.cols) {
      if (c.k === "string") out.push(c.d);
      else if (c.k === "json") {
        if (isTextsRef(c.t)) texts(c.t);
        else out.push(c.t);
      } else if (c.k === "strings" || c.k === "sparse") texts(c.t);
    }
  }
  return out.sort((x, y) => x.i - y.i);
}

function isTextsRef(t: ListRef | TextsRef): t is TextsRef {
  return "list" in t || "packed" in t;
}

function decodeList(buf: Buffer, ref: ListRef): string[] {
  const endsAt = align(ref.b, 4);
  if (endsAt + ref.n * 4 + ref.w > ref.s) bad("string list layout");
  const ends = new Uint32Array(buf.buffer, buf.byteOffset + endsAt, ref.n);
  const out = new Array<string>(ref.n);
  let start = 0;
  for (let i = 0; i < ref.n; i++) {
    const end = ends[i]!;
    if (end < start || end > ref.b) bad("string ends");
    // latin1 makes a fresh flat string (a substring of one big decoded string would keep all of it alive).
    out[i] = buf.toString("latin1", start, end);
    start = end;
  }
  if (ref.w > 0) {
    const wide = JSON.parse(buf.toString("utf8", endsAt + ref.n * 4, endsAt + ref.n * 4 + ref.w)) as Array<[number, string]>;
    for (const [i, s] of wide) {
      if (!(i >= 0 && i < ref.n) || typeof s !== "string") bad("wide strings");
      out[i] = s;
    }
  }
  return out;
}

/** Makes the part's objects from the header's refs, the blocks and the decoded lists. */
class Reader {
  private readonly views = new Map<string, AnyTyped>();

  constructor(
    private readonly blocks: readonly ArrayBufferLike[],
    private readonly lists: ReadonlyMap<number, string[]>,
  ) {}

  typed<K extends TypedKind>(ref: TypedRef, ...kinds: K[]): InstanceType<(typeof TYPED)[K]> {
    if (!kinds.includes(ref.t as K)) bad(`an array of ${ref.t} where ${kinds.join(" or ")} belongs`);
    const id = `${ref.t}:${ref.b}:${ref.o}:${ref.n}`;
    let v = this.views.get(id);
    if (v === undefined) {
      const C = TYPED[ref.t];
      const block = this.blocks[ref.b];
      if (block === undefined || !(ref.o >= 0 && ref.n >= 0) || ref.o % C.BYTES_PER_ELEMENT !== 0 || ref.o + ref.n * C.BYTES_PER_ELEMENT > block.byteLength) bad(`array bounds ${id}`);
      v = new C(block as ArrayBuffer, ref.o, ref.n);
      this.views.set(id, v);
    }
    return v as InstanceType<(typeof TYPED)[K]>;
  }

  list(ref: ListRef): string[] {
    const l = this.lists.get(ref.i);
    if (l === undefined || l.length !== ref.n) bad(`string list ${ref.i}`);
    return l;
  }

  texts(t: TextsRef): Texts {
    if ("list" in t) return this.list(t.list);
    const p = t.packed;
    const wideAt = this.typed(p.wideAt, "u32");
    const wide = this.list(p.wide);
    return PackedStrings.from({ bytes: this.typed(p.bytes, "u8"), ends: this.typed(p.ends, "u32"), length: p.length, wide: new Map(Array.from(wideAt, (i, k) => [i, wide[k]!])) });
  }

  column(c: ColumnRef): StoredColumn {
    switch (c.k) {
      case "number":
        return { kind: "number", values: this.typed(c.v, "f64") };
      case "boolean":
        return { kind: "boolean", values: this.typed(c.v, "i8") };
      case "string":
        return { kind: "string", codes: this.typed(c.c, "i32"), dict: this.list(c.d) };
      case "json":
        return { kind: "json", codes: this.typed(c.c, "i32"), texts: isTextsRef(c.t) ? this.texts(c.t) : this.list(c.t) };
      case "strings":
        return { kind: "strings", codes: this.typed(c.c, "i32"), texts: this.texts(c.t) };
      case "sparse":
        return { kind: "sparse", of: c.of, rows: this.typed(c.r, "u32"), values: this.typed(c.v, "f64", "i32", "i8"), texts: this.texts(c.t) };
      default:
        return bad(`column kind ${(c as { k: string }).k}`);
    }
  }

  table(t: TableRef): StoredTable {
    const odd = new Map<number, Array<[string, string, string]>>();
    const oddRows = this.typed(t.oddRows, "u32");
    const oddTexts = this.list(t.odd);
    if (oddTexts.length !== oddRows.length * 3) bad("odd keys");
    oddRows.forEach((row, k) => {
      let l = odd.get(row);
      if (l === undefined) odd.set(row, (l = []));
      l.push([oddTexts[3 * k]!, oddTexts[3 * k + 1]!, oddTexts[3 * k + 2]!]);
    });
    const rows = (l: Array<[string, TypedRef]>) => new Map(l.map(([p, ref]) => [p, this.typed(ref, "u32")]));
    return new StoredTable(
      t.length,
      new Map(t.cols.map(([p, c]) => [p, this.column(c)])),
      new Set(t.objects),
      { empty: rows(t.empty), nulls: rows(t.nulls), odd },
      t.derivedTime === null ? null : this.typed(t.derivedTime, "f64"),
    );
  }

  part(p: PartRef): SnapshotPart {
    return new SnapshotPart({
      profiles: this.table(p.profiles),
      events: this.table(p.events),
      eventStart: this.typed(p.eventStart, "u32"),
      eventTime: this.typed(p.eventTime, "f64"),
      rowOrdinal: this.typed(p.rowOrdinal, "i32"),
      ordinalStart: this.typed(p.ordinalStart, "u32"),
      profileIds: this.list(p.profileIds),
      optedOut: this.typed(p.optedOut, "u8"),
      nsStart: this.typed(p.nsStart, "u32"),
      nsCodes: this.typed(p.nsCodes, "u16"),
      namespaces: this.list(p.namespaces),
      identityText: isTextsRef(p.identityText) ? this.texts(p.identityText) : this.list(p.identityText),
    });
  }
}

/**
 * A part as another thread rebuilds it (the evaluation pool, batch/pool/): the file's listing of
 * every array, each named by (buffer, byte offset, length) on the shared memory it lives on, and
 * the string lists by value. Arrays not on shared memory yet (row lists kept as numbers, a part
 * built before) are copied there once (`copiedBytes`). Profile ids and identity texts kept as a
 * list are left out: evaluation never reads them (packed identity texts go as the shared arrays
 * they already are, nothing copied).
 */
export interface SharedPartDescriptor {
  buffers: SharedArrayBuffer[];
  part: PartRef;
  lists: string[][];
  copiedBytes: number;
}

export function describeSharedPart(p: SnapshotPart): SharedPartDescriptor {
  const buffers: SharedArrayBuffer[] = [];
  const index = new Map<SharedArrayBuffer, number>();
  let copiedBytes = 0;
  const place = (a: AnyTyped): TypedRef => {
    if (!(a.buffer instanceof SharedArrayBuffer)) copiedBytes += a.byteLength;
    const s = sharedCopy(a);
    const buf = s.buffer as SharedArrayBuffer;
    let b = index.get(buf);
    if (b === undefined) {
      b = buffers.length;
      buffers.push(buf);
      index.set(buf, b);
    }
    return { t: kindOf(s), b, o: s.byteOffset, n: s.length };
  };
  const a = p.arrays();
  const plan = new Plan(place, new Set(a.identityText instanceof PackedStrings ? [a.profileIds] : [a.profileIds, a.identityText]));
  const part = plan.part(p);
  return { buffers, part, lists: plan.lists.map((l) => l.texts as string[]), copiedBytes };
}

/** The part a descriptor describes, its arrays views on the same shared memory. */
export function partFromDescriptor(d: Pick<SharedPartDescriptor, "buffers" | "part" | "lists">): SnapshotPart {
  return new Reader(d.buffers, new Map(d.lists.map((l, i) => [i, l]))).part(d.part);
}
