/**
 * Runtime values of PQL and the rules of pql.md §6: missing → null, two-valued
 * comparisons, boolean coercion, literal coercion, path projection through
 * arrays, deep equality and ordering.
 *
 * Values are plain JSON-like data (the profile and events as given), plus:
 * - `Date` for instants produced by the language (`now`);
 * - `DateInterval` for days and calendar periods (`date(...)`, `today`, `this month`);
 * - `MapEntry` for `mapEntry(k, v)`;
 * - plain objects for maps; maps created by PQL itself (groupBy, map over a map)
 *   are remembered in a WeakSet so that an EMPTY one coerces to false (§6.4, R)
 *   while an empty object read from data stays "defined" (true).
 *
 * Nothing here recurses on the shape of the data: profiles nested 10,000 levels
 * deep must not overflow the stack (equality and projection use explicit stacks).
 */
import { parseInstant, parseTimestamp } from "./timestamp.js";

/** A half-open UTC interval [start, end) in epoch ms: a day or a calendar period. */
export class DateInterval {
  constructor(
    readonly start: number,
    readonly end: number,
  ) {}
}

/** A key/value pair built by `mapEntry(k, v)`; `map` over a map collects them into a map. */
export class MapEntry {
  constructor(
    readonly key: string,
    readonly value: unknown,
  ) {}
}

const pqlMaps = new WeakSet<object>();

/** A new, empty map value (remembered as a map for boolean coercion). */
export function newMap(): Record<string, unknown> {
  const m: Record<string, unknown> = {};
  pqlMaps.add(m);
  return m;
}

export function isNull(v: unknown): v is null | undefined {
  return v === null || v === undefined || (typeof v === "number" && Number.isNaN(v));
}

/** A plain data object (not an array, instant, interval or entry). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null) return false;
  // Fast path for data (JSON objects): with Object.prototype (or no prototype) as its prototype,
  // `v` is no Date, DateInterval or MapEntry (instanceof would walk that one-link chain in vain).
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto === Object.prototype || proto === null) return !Array.isArray(v);
  return (
    !Array.isArray(v) &&
    !(v instanceof Date) &&
    !(v instanceof DateInterval) &&
    !(v instanceof MapEntry)
  );
}

/**
 * Boolean coercion (§6.4): null → false; boolean → itself; array → non-empty;
 * a map created by PQL → non-empty; anything else defined (including "", 0 and
 * an empty data object) → true.
 */
export function toBoolean(v: unknown): boolean {
  if (v === true) return true;
  if (v === false || isNull(v)) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object" && pqlMaps.has(v)) {
    for (const _k in v) return true;
    return false;
  }
  return true;
}

/** Normalise `undefined` (a missing property) to null. */
export function orNull(v: unknown): unknown {
  return v === undefined || (typeof v === "number" && Number.isNaN(v)) ? null : v;
}

/**
 * `value.name` (§6.1): a field of an object or map; null on null/scalars;
 * over an array, the field of every item with nulls dropped and array values
 * flattened one level (nested arrays of items are projected too).
 */
export function member(v: unknown, name: string): unknown {
  if (typeof v !== "object" || v === null) return null;
  if (Array.isArray(v)) return project(v, name);
  if (!isRecord(v)) return null;
  return Object.hasOwn(v, name) ? orNull(v[name]) : null;
}

function project(arr: unknown[], name: string): unknown[] {
  const out: unknown[] = [];
  // Explicit stack of (array, next index) so that arrays nested 10,000 deep are fine.
  const stack: { a: unknown[]; i: number }[] = [{ a: arr, i: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.i >= top.a.length) {
      stack.pop();
      continue;
    }
    const item = top.a[top.i++];
    if (Array.isArray(item)) {
      stack.push({ a: item, i: 0 });
      continue;
    }
    if (!isRecord(item) || !Object.hasOwn(item, name)) continue;
    const f = item[name];
    if (isNull(f)) continue;
    if (Array.isArray(f)) {
      for (const x of f) if (!isNull(x)) out.push(x);
    } else out.push(f);
  }
  return out;
}

/** The instant (epoch ms) a value denotes, or null: numbers are epoch ms, strings ISO 8601. */
export function toInstant(v: unknown): number | null {
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v === "string") return parseInstant(v);
  if (v instanceof Date) {
    const t = v.getTime();
    return Number.isFinite(t) ? t : null;
  }
  if (v instanceof DateInterval) return v.start;
  return null;
}

type Kind = "null" | "boolean" | "number" | "string" | "array" | "time" | "object" | "entry";

export function kindOf(v: unknown): Kind {
  if (isNull(v)) return "null";
  switch (typeof v) {
    case "boolean":
      return "boolean";
    case "number":
      return "number";
    case "string":
      return "string";
    default:
      if (Array.isArray(v)) return "array";
      if (v instanceof Date || v instanceof DateInterval) return "time";
      if (v instanceof MapEntry) return "entry";
      return "object";
  }
}

const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * Literal coercion (§6.5): a literal operand takes the runtime type of the
 * other operand when it can: "5" → 5 against a number, "true" → true against a
 * boolean, 5 → "5" against a string. Anything else is left as it is (and the
 * comparison then fails as a type mismatch).
 */
export function coerceLiteral(lit: unknown, other: unknown): unknown {
  if (typeof lit === "string") {
    if (typeof other === "number") return NUMBER_TEXT.test(lit.trim()) ? Number(lit) : lit;
    if (typeof other === "boolean") {
      const l = lit.toLowerCase();
      return l === "true" ? true : l === "false" ? false : lit;
    }
    return lit;
  }
  if ((typeof lit === "number" || typeof lit === "boolean") && typeof other === "string") return String(lit);
  return lit;
}

/**
 * Deep equality of two non-null values (§7.2): numbers numerically (5 = 5.0),
 * strings case-sensitively, arrays element-wise in order (R, OQ-9), objects by
 * their non-null fields; a time value equals an instant inside it. Different
 * kinds are never equal.
 */
export function valuesEqual(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (x === y) continue;
    const kx = kindOf(x);
    const ky = kindOf(y);
    if (kx === "time" || ky === "time") {
      if (!timeEqual(x, y)) return false;
      continue;
    }
    if (kx !== ky) return false;
    switch (kx) {
      case "array": {
        const xa = x as unknown[];
        const ya = y as unknown[];
        if (xa.length !== ya.length) return false;
        for (let i = 0; i < xa.length; i++) stack.push([orNull(xa[i]), orNull(ya[i])]);
        break;
      }
      case "object": {
        const xo = x as Record<string, unknown>;
        const yo = y as Record<string, unknown>;
        const xk = Object.keys(xo).filter((k) => !isNull(xo[k]));
        const yk = Object.keys(yo).filter((k) => !isNull(yo[k]));
        if (xk.length !== yk.length) return false;
        for (const k of xk) {
          if (isNull(yo[k])) return false;
          stack.push([xo[k], yo[k]]);
        }
        break;
      }
      case "entry": {
        const xe = x as MapEntry;
        const ye = y as MapEntry;
        if (xe.key !== ye.key) return false;
        stack.push([orNull(xe.value), orNull(ye.value)]);
        break;
      }
      default:
        // null, numbers (NaN already null), strings and booleans: === failed above.
        return false;
    }
  }
  return true;
}

function timeEqual(x: unknown, y: unknown): boolean {
  if (x instanceof DateInterval && y instanceof DateInterval) return x.start === y.start && x.end === y.end;
  if (x instanceof DateInterval || y instanceof DateInterval) {
    const iv = (x instanceof DateInterval ? x : y) as DateInterval;
    const t = toInstant(x instanceof DateInterval ? y : x);
    return t !== null && iv.start <= t && t < iv.end;
  }
  const tx = toInstant(x);
  const ty = toInstant(y);
  return tx !== null && tx === ty;
}

/**
 * Ordering of two values: negative, zero or positive, or null when they are
 * not comparable. Numbers numerically; strings as instants when both are ISO
 * timestamps, lexicographically (UTF-16, like Java) otherwise; time values by
 * instant (an interval by its start).
 */
export function orderOf(a: unknown, b: unknown): number | null {
  if (typeof a === "number" && typeof b === "number") return Number.isNaN(a) || Number.isNaN(b) ? null : a - b;
  if (typeof a === "string" && typeof b === "string") {
    const ta = parseTimestamp(a);
    const tb = ta === null ? null : parseTimestamp(b);
    if (ta !== null && tb !== null) return ta.start - tb.start;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (kindOf(a) === "time" || kindOf(b) === "time") {
    const ta = toInstant(a);
    const tb = toInstant(b);
    return ta === null || tb === null ? null : ta - tb;
  }
  return null;
}

export type CmpOp = "=" | "!=" | "<" | "<=" | ">" | ">=";

/**
 * A comparison operator (§6.3): false whenever either side is null or the two
 * sides cannot be compared; `!=` is true only for two non-null, comparable,
 * different values. An interval compares as a whole period: `t < day` means
 * before the day starts, `t <= day` before it ends.
 */
export function compareValues(op: CmpOp, a: unknown, b: unknown): boolean {
  if (isNull(a) || isNull(b)) return false;
  if (op === "=") return valuesEqual(a, b);
  if (op === "!=") return comparableForEquality(a, b) && !valuesEqual(a, b);
  if (b instanceof DateInterval && !(a instanceof DateInterval)) {
    const t = toInstant(a);
    if (t === null) return false;
    switch (op) {
      case "<":
        return t < b.start;
      case "<=":
        return t < b.end;
      case ">":
        return t >= b.end;
      case ">=":
        return t >= b.start;
    }
  }
  if (a instanceof DateInterval && !(b instanceof DateInterval)) {
    const flipped = { "<": ">", "<=": ">=", ">": "<", ">=": "<=" } as const;
    return compareValues(flipped[op], b, a);
  }
  const o = orderOf(a, b);
  if (o === null) return false;
  switch (op) {
    case "<":
      return o < 0;
    case "<=":
      return o <= 0;
    case ">":
      return o > 0;
    case ">=":
      return o >= 0;
  }
}

function comparableForEquality(a: unknown, b: unknown): boolean {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka === "time" || kb === "time") return toInstant(ka === "time" ? b : a) !== null;
  return ka === kb;
}

/** `+ - * / %` (§7.7): numbers only, null otherwise; `/` and `%` by zero → null. */
export function arithmetic(op: "+" | "-" | "*" | "/" | "%", a: unknown, b: unknown): number | null {
  if (typeof a !== "number" || typeof b !== "number") return null;
  let r: number;
  switch (op) {
    case "+":
      r = a + b;
      break;
    case "-":
      r = a - b;
      break;
    case "*":
      r = a * b;
      break;
    case "/":
      if (b === 0) return null;
      r = a / b;
      break;
    case "%":
      if (b === 0) return null;
      r = a % b;
      break;
  }
  return Number.isFinite(r) ? r : null;
}

/** `x in list` (§7.3): false when either side is null or the right side is not an array. */
export function inList(x: unknown, list: unknown): boolean {
  if (isNull(x) || !Array.isArray(list)) return false;
  for (const e of list) if (!isNull(e) && valuesEqual(x, e)) return true;
  return false;
}

/** A string key for grouping/map entries: strings as they are, numbers and booleans printed; others null. */
export function keyOf(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : null;
  if (typeof v === "boolean") return String(v);
  if (v instanceof Date) return Number.isFinite(v.getTime()) ? v.toISOString() : null;
  return null;
}

/** Remove duplicates keeping the first occurrence (§7.3 distinct). */
export function distinctValues(arr: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  const seenPrimitive = new Set<unknown>();
  for (const raw of arr) {
    const v = orNull(raw);
    if (v === null || typeof v !== "object") {
      if (seenPrimitive.has(v)) continue;
      seenPrimitive.add(v);
      out.push(v);
      continue;
    }
    if (out.some((o) => o !== null && typeof o === "object" && valuesEqual(o, v))) continue;
    out.push(v);
  }
  return out;
}
