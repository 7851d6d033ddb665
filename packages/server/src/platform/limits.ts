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

// A value's place in the walk; the path is spelled out only for a violation.
interface Frame {
  v: unknown;
  key: string | number | null;
  parent: Frame | null;
  depth: number;
}

function pathOf(f: Frame | null, extraKey?: string): string {
  const parts: (string | number)[] = extraKey === undefined ? [] : [extraKey];
  for (let n = f; n !== null && n.key !== null; n = n.parent) parts.push(n.key);
  let s = "$";
  for (let i = parts.length - 1; i >= 0; i--) {
    const p = parts[i]!;
    s += typeof p === "number" ? `[${p}]` : /^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`;
  }
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

function stringViolation(s: string, at: () => string, what: "string" | "key", limits: Readonly<JsonLimits>): LimitViolation | null {
  const max = what === "key" ? limits.maxKeyLength : limits.maxStringLength;
  if (s.length > max) {
    return {
      code: what === "key" ? LIMIT_CODES.key : LIMIT_CODES.string,
      path: at(),
      message: `${what === "key" ? "A key" : "A string"} at ${at()} is ${s.length} characters long, over the limit of ${max}`,
    };
  }
  if (limits.allowUnstorable === true) return null;
  const why = unstorableReason(s);
  if (why !== null) {
    return { code: LIMIT_CODES.unstorable, path: at(), message: `The ${what} at ${at()} ${why} and cannot be stored` };
  }
  return null;
}

/**
 * The first limit a parsed JSON value breaks, or null. Iterative (a hostile value
 * cannot overflow the stack here) and stops at the first problem; it never looks
 * deeper than maxDepth + 1 levels.
 */
export function findViolation(value: unknown, limits: Readonly<JsonLimits> = BODY_LIMITS): LimitViolation | null {
  const stack: Frame[] = [{ v: value, key: null, parent: null, depth: 0 }];
  while (stack.length > 0) {
    const f = stack.pop()!;
    const v = f.v;
    if (typeof v === "string") {
      const bad = stringViolation(v, () => pathOf(f), "string", limits);
      if (bad !== null) return bad;
      continue;
    }
    if (typeof v === "number") {
      if (!Number.isFinite(v)) {
        return { code: LIMIT_CODES.number, path: pathOf(f), message: `The number at ${pathOf(f)} is outside the range of a double-precision number` };
      }
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    const depth = f.depth + 1;
    if (depth > limits.maxDepth) {
      return { code: LIMIT_CODES.depth, path: pathOf(f), message: `The value at ${pathOf(f)} nests deeper than the limit of ${limits.maxDepth} levels` };
    }
    if (Array.isArray(v)) {
      if (v.length > limits.maxArrayLength) {
        return { code: LIMIT_CODES.array, path: pathOf(f), message: `The array at ${pathOf(f)} has ${v.length} items, over the limit of ${limits.maxArrayLength}` };
      }
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], key: i, parent: f, depth });
      continue;
    }
    const keys = Object.keys(v);
    if (keys.length > limits.maxObjectKeys) {
      return { code: LIMIT_CODES.keys, path: pathOf(f), message: `The object at ${pathOf(f)} has ${keys.length} keys, over the limit of ${limits.maxObjectKeys}` };
    }
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i]!;
      const bad = stringViolation(k, () => pathOf(f, k), "key", limits);
      if (bad !== null) return bad;
      stack.push({ v: (v as Record<string, unknown>)[k], key: k, parent: f, depth });
    }
  }
  return null;
}

/**
 * Nesting depth of JSON text, read without parsing (strings skipped), stopping
 * as soon as it passes `max`: JSON.parse itself takes ~0.3 s on 400,000 levels,
 * so the text is measured first. Returns true when the text nests deeper than max.
 */
export function textNestsDeeperThan(text: string, max: number): boolean {
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
