/**
 * Implementations of the built-in methods and functions of catalog.ts, shared
 * by the interpreter (evaluate.ts) and the compiler (compile.ts) so that both
 * have exactly the same semantics. Arguments arrive evaluated, except the
 * item-context arguments (catalog `itemArgs`), which arrive as functions of the
 * item. Data problems never throw: wrong types give null or false (pql.md §6).
 */
import { spend } from "./budget.js";
import {
  DateInterval,
  MapEntry,
  distinctValues,
  inList,
  isNull,
  isRecord,
  keyOf,
  newMap,
  orNull,
  orderOf,
  toBoolean,
  toInstant,
  valuesEqual,
} from "./values.js";
import { daysInMonth, isLeapYear } from "./timestamp.js";
import { validateJavaRegex } from "./regex.js";

/** An item-context argument: its value for one item (and, over a map, the item's key). */
export type ItemFn = (item: unknown, key: string | number) => unknown;

export type AggregateFn = "sum" | "average" | "min" | "max";

// --- aggregation (§7.8) -----------------------------------------------------

/**
 * Aggregate values, skipping nulls: sum of nothing = 0; average/min/max of
 * nothing = null. Sum and average use numbers only. Min and max order numbers
 * numerically; when there are no numbers, strings (timestamps by instant).
 */
export function aggregate(fn: AggregateFn, values: readonly unknown[]): unknown {
  if (fn === "sum" || fn === "average") {
    let sum = 0;
    let n = 0;
    for (const v of values) {
      if (typeof v === "number" && !Number.isNaN(v)) {
        sum += v;
        n++;
      }
    }
    if (fn === "sum") return sum;
    return n === 0 ? null : sum / n;
  }
  const nums = values.filter((v) => typeof v === "number" && !Number.isNaN(v));
  const pool = nums.length > 0 ? nums : values.filter((v) => typeof v === "string");
  let best: unknown = null;
  for (const v of pool) {
    if (best === null) {
      best = v;
      continue;
    }
    const o = orderOf(v, best);
    if (o !== null && (fn === "min" ? o < 0 : o > 0)) best = v;
  }
  return best;
}

function itemValues(recv: unknown[], f: ItemFn | null): unknown[] {
  if (f !== null) spend(recv.length);
  const out: unknown[] = [];
  for (let i = 0; i < recv.length; i++) {
    const v = orNull(f === null ? recv[i] : f(recv[i], i));
    if (v !== null) out.push(v);
  }
  return out;
}

/** `recv.sum(expr?)` etc. A null (or non-array) receiver gives null. */
export function aggregateMethod(fn: AggregateFn, recv: unknown, f: ItemFn | null): unknown {
  if (!Array.isArray(recv)) return null;
  return aggregate(fn, itemValues(recv, f));
}

/** `count()`: array length, number of map keys; null → 0 (R); other values → null. */
export function count(recv: unknown): number | null {
  if (isNull(recv)) return 0;
  if (Array.isArray(recv)) return recv.length;
  if (isRecord(recv)) return Object.keys(recv).length;
  return null;
}

// --- item-context methods ---------------------------------------------------

export function filterItems(recv: unknown, cond: ItemFn): unknown[] | null {
  if (!Array.isArray(recv)) return null;
  spend(recv.length);
  const out: unknown[] = [];
  for (let i = 0; i < recv.length; i++) if (toBoolean(cond(recv[i], i))) out.push(recv[i]);
  return out;
}

export function existsItem(recv: unknown, cond: ItemFn): boolean {
  if (!Array.isArray(recv)) return false;
  spend(recv.length);
  for (let i = 0; i < recv.length; i++) if (toBoolean(cond(recv[i], i))) return true;
  return false;
}

/** `groupBy(key)`: a map from each distinct key (printed as a string) to its items; null keys dropped. */
export function groupBy(recv: unknown, key: ItemFn): Record<string, unknown> | null {
  if (!Array.isArray(recv)) return null;
  spend(recv.length);
  const out = newMap();
  for (let i = 0; i < recv.length; i++) {
    const k = keyOf(orNull(key(recv[i], i)));
    if (k === null) continue;
    const list = (Object.hasOwn(out, k) ? out[k] : (out[k] = [])) as unknown[];
    list.push(recv[i]);
  }
  return out;
}

/**
 * `map(f)`: over an array, the array of results; over a map, a map: a result
 * that is a `mapEntry(k, v)` puts v under k, any other result replaces the
 * entry's value. An array whose results are all map entries becomes a map.
 */
export function mapItems(recv: unknown, f: ItemFn): unknown {
  if (Array.isArray(recv)) {
    spend(recv.length);
    const out: unknown[] = [];
    for (let i = 0; i < recv.length; i++) out.push(orNull(f(recv[i], i)));
    if (out.length > 0 && out.every((r) => r instanceof MapEntry)) return entriesToMap(out as MapEntry[]);
    return out;
  }
  if (!isRecord(recv)) return null;
  const out = newMap();
  const keys = Object.keys(recv);
  spend(keys.length);
  for (const k of keys) {
    const r = orNull(f(recv[k], k));
    if (r instanceof MapEntry) out[r.key] = r.value;
    else out[k] = r;
  }
  return out;
}

function entriesToMap(entries: readonly MapEntry[]): Record<string, unknown> {
  const out = newMap();
  for (const e of entries) out[e.key] = e.value;
  return out;
}

/**
 * `topN(key, n)` (R, OQ-8): the n items with the highest key, highest first;
 * `bottomN`: the lowest, lowest first. Stable for equal keys; items whose key
 * is null or not comparable are left out.
 */
export function topN(recv: unknown, key: ItemFn, n: unknown, highest: boolean): unknown[] | null {
  if (!Array.isArray(recv) || typeof n !== "number" || !Number.isFinite(n)) return null;
  spend(recv.length);
  const keyed: { item: unknown; k: unknown; i: number }[] = [];
  for (let i = 0; i < recv.length; i++) {
    const k = orNull(key(recv[i], i));
    if (k !== null) keyed.push({ item: recv[i], k, i });
  }
  keyed.sort((a, b) => {
    const o = orderOf(a.k, b.k) ?? 0;
    return (highest ? -o : o) || a.i - b.i;
  });
  return keyed.slice(0, Math.max(0, Math.floor(n))).map((x) => x.item);
}

// --- plain methods ----------------------------------------------------------

function stringPredicate(name: string, recv: unknown, arg: unknown, caseFlag: unknown): boolean {
  if (typeof recv !== "string" || typeof arg !== "string") return false;
  const sensitive = caseFlag !== false;
  const a = sensitive ? recv : recv.toLowerCase();
  const b = sensitive ? arg : arg.toLowerCase();
  switch (name) {
    case "startsWith":
      return a.startsWith(b);
    case "doesNotStartWith":
      return !a.startsWith(b);
    case "endsWith":
      return a.endsWith(b);
    case "doesNotEndWith":
      return !a.endsWith(b);
    case "contains":
      return a.includes(b);
    case "doesNotContain":
      return !a.includes(b);
    case "equals":
      return a === b;
    default:
      return a !== b; // notEqualTo
  }
}

export const STRING_PREDICATES = new Set([
  "startsWith",
  "doesNotStartWith",
  "endsWith",
  "doesNotEndWith",
  "contains",
  "doesNotContain",
  "equals",
  "notEqualTo",
]);

/** `s matches pattern` with an already-validated pattern (or a data-valued one: invalid → false). */
export function regexMatches(recv: unknown, pattern: unknown): boolean {
  if (typeof recv !== "string" || typeof pattern !== "string") return false;
  const v = validateJavaRegex(pattern);
  return v.ok && v.regex.test(recv);
}

/** `s.regexGroup(pattern, index = 0)` (R, OQ-15): no match or index out of range → null. */
export function regexGroup(recv: unknown, pattern: unknown, index: unknown): string | null {
  if (typeof recv !== "string" || typeof pattern !== "string") return null;
  const idx = isNull(index) ? 0 : index;
  if (typeof idx !== "number" || !Number.isInteger(idx) || idx < 0) return null;
  const v = validateJavaRegex(pattern);
  if (!v.ok || idx > v.regex.groups) return null;
  const m = v.regex.exec(recv);
  return m === null ? null : (m[idx] ?? null);
}

/** The longest `like` pattern, UTF-16 code units: a longer one never matches (check refuses a longer literal). */
export const LIKE_MAX_PATTERN = 256;
/**
 * The longest subject `like` searches, UTF-16 code units (the longest string an
 * XDM record may hold, 100 KiB): a longer subject never matches.
 */
export const LIKE_MAX_SUBJECT = 100 * 1024;

/**
 * `s like pattern` (R, OQ-16): whole-string, case-sensitive, `%` = any run,
 * `_` = one character (code point), no escape. Time is linear in the subject
 * (times ⌈segment length / 32⌉ for a segment holding `_`): the pattern splits
 * on `%` into fixed-length segments; the first must match at the start, the
 * last at the end, and each middle one is taken at its leftmost match after the
 * previous one, which is optimal because every segment has a fixed length.
 */
export function like(recv: unknown, pattern: unknown): boolean {
  if (typeof recv !== "string" || typeof pattern !== "string") return false;
  if (pattern.length > LIKE_MAX_PATTERN || recv.length > LIKE_MAX_SUBJECT) return false;
  const segs = likeSegments(pattern);
  const first = segs[0]!;
  if (segs.length === 1) return segmentAt(first, recv, 0) === recv.length;
  let pos = segmentAt(first, recv, 0);
  if (pos < 0) return false;
  const limit = segmentBefore(segs[segs.length - 1]!, recv, recv.length);
  if (limit < pos) return false;
  for (let k = 1; k < segs.length - 1 && pos >= 0; k++) pos = findSegment(segs[k]!, recv, pos, limit);
  return pos >= 0;
}

/** A run of a like pattern between two `%`: its code points, -1 for `_`. */
interface LikeSegment {
  text: string;
  cps: number[];
  /** Searchable with indexOf: no `_`, and no lone surrogate at an edge that could split a pair of the subject. */
  plain: boolean;
  /** Shift-And masks per code point (bit i: position i accepts it), and for any other code point; built on first use. */
  masks?: Map<number, Int32Array>;
  other?: Int32Array;
  /** The first word of the mask of each ASCII code point (segments of up to 32 code points). */
  ascii?: Int32Array;
  /** The mask of each ASCII code point. */
  asciiMasks?: Int32Array[];
}

// The last pattern's segments: a definition evaluates one pattern over many profiles.
let lastPattern = "";
let lastSegments: LikeSegment[] = [{ text: "", cps: [], plain: true }];

function likeSegments(pattern: string): LikeSegment[] {
  if (pattern === lastPattern) return lastSegments;
  const segs: LikeSegment[] = [];
  for (const text of pattern.split("%")) {
    const cps: number[] = [];
    for (const ch of text) cps.push(ch === "_" ? -1 : ch.codePointAt(0)!);
    const plain = !cps.includes(-1) && !isLowSurrogate(text.charCodeAt(0)) && !isHighSurrogate(text.charCodeAt(text.length - 1));
    segs.push({ text, cps, plain });
  }
  lastPattern = pattern;
  lastSegments = segs;
  return segs;
}

const isHighSurrogate = (u: number) => u >= 0xd800 && u <= 0xdbff;
const isLowSurrogate = (u: number) => u >= 0xdc00 && u <= 0xdfff;

/** Does seg match s at code-point boundary i? The end index, or -1. */
function segmentAt(seg: LikeSegment, s: string, i: number): number {
  for (const c of seg.cps) {
    if (i >= s.length) return -1;
    const cp = s.codePointAt(i)!;
    if (c !== -1 && c !== cp) return -1;
    i += cp > 0xffff ? 2 : 1;
  }
  return i;
}

/** Does seg match s ending at code-point boundary end? The start index, or -1. */
function segmentBefore(seg: LikeSegment, s: string, end: number): number {
  for (let k = seg.cps.length - 1; k >= 0; k--) {
    if (end <= 0) return -1;
    const width = end >= 2 && isLowSurrogate(s.charCodeAt(end - 1)) && isHighSurrogate(s.charCodeAt(end - 2)) ? 2 : 1;
    const c = seg.cps[k]!;
    if (c !== -1 && c !== s.codePointAt(end - width)) return -1;
    end -= width;
  }
  return end;
}

/** The end of seg's leftmost match in s[from, limit), or -1. */
function findSegment(seg: LikeSegment, s: string, from: number, limit: number): number {
  const m = seg.cps.length;
  if (m === 0) return from;
  if (seg.plain) {
    const j = s.indexOf(seg.text, from);
    return j < 0 || j + seg.text.length > limit ? -1 : j + seg.text.length;
  }
  // Shift-And over code points: bit i of the state is set when the segment's
  // first i+1 code points end here. Every match has the same length, so the
  // first match found is the leftmost one.
  if (seg.other === undefined) buildMasks(seg);
  const { ascii, asciiMasks, masks, other } = seg as Required<LikeSegment>;
  const words = other.length;
  const topWord = (m - 1) >>> 5;
  const topBit = 1 << ((m - 1) & 31);
  if (words === 1) {
    let state = 0;
    for (let i = from; i < limit; ) {
      const cp = s.codePointAt(i)!;
      i += cp > 0xffff ? 2 : 1;
      state = ((state << 1) | 1) & (cp < 128 ? ascii[cp]! : (masks.get(cp) ?? other)[0]!);
      if ((state & topBit) !== 0) return i <= limit ? i : -1;
    }
    return -1;
  }
  const state = new Int32Array(words);
  for (let i = from; i < limit; ) {
    const cp = s.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    const mask = cp < 128 ? asciiMasks[cp]! : (masks.get(cp) ?? other);
    let carry = 1;
    for (let w = 0; w < words; w++) {
      const d = state[w]!;
      state[w] = ((d << 1) | carry) & mask[w]!;
      carry = d >>> 31;
    }
    if ((state[topWord]! & topBit) !== 0) return i <= limit ? i : -1;
  }
  return -1;
}

function buildMasks(seg: LikeSegment): void {
  const words = (seg.cps.length + 31) >>> 5;
  const other = new Int32Array(words);
  seg.cps.forEach((c, i) => {
    if (c === -1) other[i >>> 5] = other[i >>> 5]! | (1 << (i & 31));
  });
  const masks = new Map<number, Int32Array>();
  seg.cps.forEach((c, i) => {
    if (c === -1) return;
    let mask = masks.get(c);
    if (mask === undefined) masks.set(c, (mask = other.slice()));
    mask[i >>> 5] = mask[i >>> 5]! | (1 << (i & 31));
  });
  const asciiMasks: Int32Array[] = [];
  for (let c = 0; c < 128; c++) asciiMasks.push(masks.get(c) ?? other);
  const ascii = Int32Array.from(asciiMasks, (mask) => mask[0]!);
  seg.masks = masks;
  seg.other = other;
  seg.ascii = ascii;
  seg.asciiMasks = asciiMasks;
}

function subsetOf(a: unknown[], b: unknown[]): boolean {
  return a.every((x) => inList(x, b));
}

/** The calendar fields of a time value, in UTC. */
function utcParts(v: unknown): Date | null {
  const t = toInstant(v);
  if (t === null) return null;
  const d = new Date(t);
  // Past ±8.64e15 ms a number is no date: null, as every engine answers (not NaN).
  return Number.isNaN(d.getTime()) ? null : d;
}

/**
 * Day of month, UTC. decisions.md §1: a 29 February counts as 28 February when
 * the evaluation year (the year of `now`) is not a leap year, so that
 * birthday-style comparisons with currentDayOfMonth() fire every year.
 */
export function dayOfMonth(v: unknown, now: number): number | null {
  const d = utcParts(v);
  if (d === null) return null;
  const day = d.getUTCDate();
  const month = d.getUTCMonth();
  if (month === 1 && day === 29 && !isLeapYear(new Date(now).getUTCFullYear())) return daysInMonth(2001, 1);
  return day;
}

/** Methods whose arguments are all plain values. Returns undefined for an unknown name. */
export function callPlainMethod(name: string, recv: unknown, args: readonly unknown[], now: number): unknown {
  const a0 = args[0] === undefined ? null : args[0];
  if (STRING_PREDICATES.has(name)) return stringPredicate(name, recv, a0, args[1]);
  switch (name) {
    case "intersects":
      return Array.isArray(recv) && Array.isArray(a0) && recv.some((x) => inList(x, a0));
    case "intersection":
      if (!Array.isArray(recv) || !Array.isArray(a0)) return null;
      return distinctValues(recv.filter((x) => inList(x, a0)));
    case "subsetOf":
      return Array.isArray(recv) && Array.isArray(a0) && subsetOf(recv, a0);
    case "supersetOf":
      return Array.isArray(recv) && Array.isArray(a0) && subsetOf(a0, recv);
    case "includes":
      return Array.isArray(recv) && inList(a0, recv);
    case "distinct":
      return Array.isArray(recv) ? distinctValues(recv) : null;
    case "head":
      return Array.isArray(recv) && recv.length > 0 ? orNull(recv[0]) : null;
    case "count":
      return count(recv);
    case "get": {
      const k = keyOf(a0);
      return isRecord(recv) && k !== null && Object.hasOwn(recv, k) ? orNull(recv[k]) : null;
    }
    case "keys":
      return isRecord(recv) ? Object.keys(recv) : null;
    case "values":
      return isRecord(recv) ? Object.values(recv).map(orNull) : null;
    case "matches":
      return regexMatches(recv, a0);
    case "regexGroup":
      return regexGroup(recv, a0, args[1]);
    case "isNull":
      return isNull(recv);
    case "isNotNull":
      return !isNull(recv);
    case "getMonth": {
      const d = utcParts(recv);
      return d === null ? null : d.getUTCMonth() + 1;
    }
    case "getYear": {
      const d = utcParts(recv);
      return d === null ? null : d.getUTCFullYear();
    }
    case "getDayOfMonth":
      return dayOfMonth(recv, now);
  }
  return undefined;
}

/** Item-context methods (their argument is evaluated per item). */
export const ITEM_METHODS = new Set(["groupBy", "filter", "map", "topN", "bottomN", "exists", "sum", "average", "min", "max"]);

/** Plain global functions (if/date/inSegment/... are handled by the evaluators, which need laziness or the profile). */
export function currentField(name: string, now: number): number | null {
  const d = new Date(now);
  switch (name) {
    case "currentMonth":
      return d.getUTCMonth() + 1;
    case "currentYear":
      return d.getUTCFullYear();
    case "currentDayOfMonth":
      return d.getUTCDate();
  }
  return null;
}

/**
 * `inSegment(id)` (R, OQ-26): the profile's segmentMembership holds the id with
 * status realized or existing. The `ups` namespace is consulted first; otherwise
 * the first namespace (in key order) that holds the id decides.
 */
export function inSegment(profile: unknown, id: unknown): boolean {
  if (typeof id !== "string") return false;
  const sm = isRecord(profile) ? profile["segmentMembership"] : null;
  if (!isRecord(sm)) return false;
  // `ups` first, then the other namespaces in key order; read in place (no key array, no sort):
  // edge definitions call this for every profile they evaluate.
  if (Object.hasOwn(sm, "ups")) {
    const entries = sm["ups"];
    if (isRecord(entries) && Object.hasOwn(entries, id)) return realizedOrExisting(entries[id]);
  }
  for (const ns in sm) {
    if (ns === "ups" || !Object.hasOwn(sm, ns)) continue;
    const entries = sm[ns];
    if (isRecord(entries) && Object.hasOwn(entries, id)) return realizedOrExisting(entries[id]);
  }
  return false;
}

function realizedOrExisting(entry: unknown): boolean {
  const status = isRecord(entry) ? entry["status"] : null;
  return typeof status === "string" && (status.toLowerCase() === "realized" || status.toLowerCase() === "existing");
}

/** `mapEntry(k, v)`: null when the key cannot be a map key. */
export function mapEntry(k: unknown, v: unknown): MapEntry | null {
  const key = keyOf(orNull(k));
  return key === null ? null : new MapEntry(key, orNull(v));
}

export { DateInterval, valuesEqual };
