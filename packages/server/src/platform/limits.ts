/**
 * The input limits of the service, in one place (docs/reliability.md lists them).
 *
 * Every JSON body, stored record, edge event, work order and query parameter is
 * held to these before anything is stored or any quota consumed: a value that
 * breaks one is refused with a 4xx naming the limit. They exist because the
 * code behind the boundary is allowed to be simple — recursive merges and
 * JSON.stringify overflow the stack near 2,000 levels, PostgreSQL text cannot
 * hold NUL, and neither PostgreSQL nor a strict UTF-8 reader accepts a lone
 * UTF-16 surrogate.
 */

export interface JsonLimits {
  /** Deepest nesting of objects and arrays (the root is level 1). */
  maxDepth: number;
  /** Longest string value, UTF-16 code units. */
  maxStringLength: number;
  /** Longest object key, UTF-16 code units. */
  maxKeyLength: number;
  /** Most items in one array. */
  maxArrayLength: number;
  /** Most keys in one object. */
  maxObjectKeys: number;
  /**
   * Leave NUL and lone surrogates to a later, finer check (routes whose body carries
   * several records refuse such a string per record, not for the whole request).
   */
  allowUnstorable?: boolean;
}

/** Any JSON request body. 512 levels leave room for pql/json at the parser's 200 levels of PQL nesting. */
export const BODY_LIMITS: Readonly<JsonLimits> = {
  maxDepth: 512,
  maxStringLength: 1024 * 1024,
  maxKeyLength: 1024,
  maxArrayLength: 100_000,
  maxObjectKeys: 10_000,
};

/** One XDM record (profile fragment, experience event, edge event) or work-order field update. */
export const RECORD_LIMITS: Readonly<JsonLimits> = {
  maxDepth: 64,
  maxStringLength: 100 * 1024,
  maxKeyLength: 256,
  maxArrayLength: 10_000,
  maxObjectKeys: 2_000,
};

/** A query-string value, UTF-16 code units. */
export const MAX_QUERY_VALUE_LENGTH = 4096;

export const LIMIT_CODES = {
  depth: "SEGMENTD-LIMIT-DEPTH-400",
  string: "SEGMENTD-LIMIT-STRING-400",
  key: "SEGMENTD-LIMIT-KEY-400",
  array: "SEGMENTD-LIMIT-ARRAY-400",
  keys: "SEGMENTD-LIMIT-KEYS-400",
  number: "SEGMENTD-LIMIT-NUMBER-400",
  unstorable: "SEGMENTD-UNSTORABLE-STRING-400",
  query: "SEGMENTD-LIMIT-QUERY-400",
} as const;

export type LimitCode = (typeof LIMIT_CODES)[keyof typeof LIMIT_CODES];

export interface LimitViolation {
  code: LimitCode;
  /** The JSON path of the offending value ($ is the root). */
  path: string;
  /** A message a person can act on; names the limit. */
  message: string;
}

/** A path as the messages spell it: `$.a.b[2]["odd key"]`. */
function pathOf(parts: readonly (string | number)[]): string {
  let s = "$";
  for (const p of parts) s += typeof p === "number" ? `[${p}]` : /^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`;
  return s;
}

// String.prototype.isWellFormed (V8 11.x, Node 20) is not in the ES2022 lib the project targets.
const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Why a string cannot be stored, or null: NUL (PostgreSQL text) or a lone surrogate (not UTF-8). */
export function unstorableReason(s: string): string | null {
  if (s.includes("\u0000")) return "contains NUL (\\u0000)";
  if (!isWellFormed(s)) return "contains a lone UTF-16 surrogate (not valid Unicode)";
  return null;
}

function stringViolation(s: string, path: readonly (string | number)[], what: "string" | "key", limits: Readonly<JsonLimits>): LimitViolation | null {
  const max = what === "key" ? limits.maxKeyLength : limits.maxStringLength;
  if (s.length > max) {
    return {
      code: what === "key" ? LIMIT_CODES.key : LIMIT_CODES.string,
      path: pathOf(path),
      message: `${what === "key" ? "A key" : "A string"} at ${pathOf(path)} is ${s.length} characters long, over the limit of ${max}`,
    };
  }
  if (limits.allowUnstorable === true) return null;
  const why = unstorableReason(s);
  if (why !== null) {
    return { code: LIMIT_CODES.unstorable, path: pathOf(path), message: `The ${what} at ${pathOf(path)} ${why} and cannot be stored` };
  }
  return null;
}

/**
 * The first limit a parsed JSON value breaks, or null. It stops at the first problem and never
 * goes deeper than maxDepth + 1 levels, so its recursion is bounded (≤ 513 frames for bodies)
 * whatever the value; no allocation per value (it runs on every request: bench:limits).
 */
export function findViolation(value: unknown, limits: Readonly<JsonLimits> = BODY_LIMITS): LimitViolation | null {
  const path: (string | number)[] = [];
  return typeof value === "object" && value !== null ? visit(value, 1, limits, path) : leaf(value, limits, path);
}

function leaf(v: unknown, limits: Readonly<JsonLimits>, path: (string | number)[]): LimitViolation | null {
  if (typeof v === "string") return stringViolation(v, path, "string", limits);
  if (typeof v === "number" && !Number.isFinite(v)) {
    return { code: LIMIT_CODES.number, path: pathOf(path), message: `The number at ${pathOf(path)} is outside the range of a double-precision number` };
  }
  return null;
}

function visit(v: object, depth: number, limits: Readonly<JsonLimits>, path: (string | number)[]): LimitViolation | null {
  if (depth > limits.maxDepth) {
    return { code: LIMIT_CODES.depth, path: pathOf(path), message: `The value at ${pathOf(path)} nests deeper than the limit of ${limits.maxDepth} levels` };
  }
  if (Array.isArray(v)) {
    if (v.length > limits.maxArrayLength) {
      return { code: LIMIT_CODES.array, path: pathOf(path), message: `The array at ${pathOf(path)} has ${v.length} items, over the limit of ${limits.maxArrayLength}` };
    }
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      path.push(i);
      const bad = typeof x === "object" && x !== null ? visit(x, depth + 1, limits, path) : leaf(x, limits, path);
      if (bad !== null) return bad;
      path.pop();
    }
    return null;
  }
  let keys = 0;
  for (const k in v) {
    if (++keys > limits.maxObjectKeys) {
      return { code: LIMIT_CODES.keys, path: pathOf(path), message: `The object at ${pathOf(path)} has more than ${limits.maxObjectKeys} keys, over the limit` };
    }
    path.push(k);
    const badKey = stringViolation(k, path, "key", limits);
    if (badKey !== null) return badKey;
    const x: unknown = (v as Record<string, unknown>)[k];
    const bad = typeof x === "object" && x !== null ? visit(x, depth + 1, limits, path) : leaf(x, limits, path);
    if (bad !== null) return bad;
    path.pop();
  }
  return null;
}

/**
 * Nesting depth of JSON text, read without parsing (strings skipped), stopping
 * as soon as it passes `max`: JSON.parse itself takes ~0.3 s on 400,000 levels,
 * so the text is measured first. Returns true when the text nests deeper than max.
 */
export function textNestsDeeperThan(text: string, max: number): boolean {
  // Nesting past max needs more than max opening brackets: counted natively first (most bodies
  // have a few dozen), the character walk only for a text that has that many.
  let opening = 0;
  for (const bracket of ["{", "["]) {
    for (let i = text.indexOf(bracket); i !== -1 && opening <= max; i = text.indexOf(bracket, i + 1)) opening++;
  }
  if (opening <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return false;
}
