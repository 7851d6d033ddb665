/**
 * The PQL lexer: turns pql/text into a flat token sequence in one linear pass.
 *
 * Tokenising everything up front (rather than on demand) keeps the parser's
 * look-ahead trivial — lambda detection and the `sum V from` binder test peek
 * several tokens ahead — makes every lexical error win over any syntax error
 * (whatever its position), and a 1 MB query still lexes in a few milliseconds.
 *
 * For speed (the parser runs on every definition save and every validation
 * request) the tokens are not objects: `scan()` writes them into reusable
 * parallel typed arrays (`TOKENS`) — kind, start, end, keyword id, numeric
 * value — and allocates nothing per token but the decoded string literals.
 * Identifier text is sliced from the source only when the parser needs it.
 * `tokenize()` builds the object form (`Token[]`) from the same scan, for
 * tests and tools.
 *
 * Keywords are NOT classified as tokens: whether `from`, `last` or `count` is
 * a keyword depends on its position (pql.md §2.6). The lexer only records,
 * for each identifier, which known word (if any) it spells case-insensitively
 * (`kw`, see `keywordId`), found by a hash computed while scanning, so that
 * the parser compares small integers instead of lower-cased strings.
 *
 * Lexical errors the lexer reports (pql.md §2): unterminated strings, unknown
 * escapes, single quotes, `==`, comments (`//`, `/*`, `--`, `#`), malformed or
 * out-of-range numbers, `$` without a positive number, stray characters.
 */
import type { TimeUnit } from "./ast.js";
import { BUILTINS } from "./catalog.js";
import { PqlError } from "./errors.js";

export type TokenKind =
  | "ident"
  | "int"
  | "double"
  | "string"
  | "param"
  /** Punctuation and operators; `text` holds the symbol. */
  | "punct"
  | "eof";

export interface Token {
  kind: TokenKind;
  /** Source text of the token (for strings: the raw text including quotes). */
  text: string;
  /** Lower-cased `text`, used for case-insensitive keyword matching. */
  lower: string;
  /** Decoded value: string contents, numeric value, or parameter index. */
  value: string | number;
  start: number;
  end: number;
}

// ------------------------------------------------------------ token codes

/*
 * Numeric token kinds in `TOKENS.kind`. A single-character punctuation token's
 * kind is its character code (`(` is 40, `.` is 46, …); the two-character
 * operators have codes of their own above 127.
 */
export const T_EOF = 0;
export const T_IDENT = 1;
export const T_INT = 2;
export const T_DOUBLE = 3;
export const T_STRING = 4;
export const T_PARAM = 5;
/** `<=` */
export const T_LE = 128;
/** `!=` */
export const T_NE = 129;
/** `>=` */
export const T_GE = 130;
/** `=>` */
export const T_ARROW = 131;

/** Single-character punctuation, indexed by character code. */
const PUNCT1: (string | undefined)[] = [];
for (const p of "()[]{},:.=<>+-*/%!^") PUNCT1[p.charCodeAt(0)] = p;

/** The symbol of a punctuation token kind. */
function punctText(kind: number): string {
  switch (kind) {
    case T_LE:
      return "<=";
    case T_NE:
      return "!=";
    case T_GE:
      return ">=";
    case T_ARROW:
      return "=>";
    default:
      return PUNCT1[kind]!;
  }
}

// --------------------------------------------------------------- keywords

/**
 * Words the parser recognises case-insensitively in keyword position, the
 * time-unit words and the built-in function and method names (whose canonical
 * spelling the parser looks up by id): an identifier spelling one of them
 * gets its id (index + 1) in `TOKENS.kw`.
 */
const WORDS: string[] = [
  "and", "or", "not", "in", "notin", "like", "matches", "occurs", "between", "where",
  "on", "before", "after", "from", "over",
  "select", "exists", "forall", "let", "sum", "average", "min", "max",
  "true", "false", "null", "now", "today", "yesterday", "tomorrow", "this", "last", "next",
  "xevent", "chain", "what", "when", "count",
  "millisecond", "milliseconds", "second", "seconds", "minute", "minutes", "hour", "hours",
  "day", "days", "week", "weeks", "month", "months", "year", "years", "decade", "decades",
  "century", "centuries", "millennium", "millennia", "millenniums", "millenium", "millenia", "milleniums",
];
for (const b of BUILTINS) {
  const w = b.name.toLowerCase();
  // Hashing folds case with `| 32`, which is only right for letters and digits.
  if (/^[a-z][a-z0-9]*$/.test(w) && !WORDS.includes(w)) WORDS.push(w);
}
if (WORDS.length > 255) throw new Error("lexer.ts: keyword ids must fit in a byte");

/** The keyword id of a lower-case word, for the parser's constants (0 if it is not one). */
export function keywordId(word: string): number {
  return WORDS.indexOf(word) + 1;
}

/** The number of keyword ids (ids run from 1 to this). */
export function keywordCount(): number {
  return WORDS.length;
}

/** The lower-case spelling of a keyword id. */
export function keywordText(id: number): string {
  return WORDS[id - 1]!;
}

/** Length of the longest word in WORDS: longer identifiers are not looked up. */
const MAX_WORD = Math.max(...WORDS.map((w) => w.length));
/** Sparse (about 5% full), so that most names that are not words find their home slot empty. */
const HASH_SLOTS = 2048;
/** Open-addressing table: slot → keyword id (0 = empty). */
const HASH_IDS = new Uint8Array(HASH_SLOTS);
/** The full hash of the keyword in each slot. */
const HASH_FULL = new Int32Array(HASH_SLOTS);
/** Every word's characters, one after another: word id's are WORD_CHARS[WORD_AT[id] … WORD_AT[id + 1]). */
const WORD_AT = new Int32Array(WORDS.length + 2);
const WORD_CHARS = new Uint8Array(WORDS.reduce((n, w) => n + w.length, 0));
for (let id = 1; id <= WORDS.length; id++) {
  const w = WORDS[id - 1]!;
  for (let k = 0; k < w.length; k++) WORD_CHARS[WORD_AT[id]! + k] = w.charCodeAt(k);
  WORD_AT[id + 1] = WORD_AT[id]! + w.length;
}

/** The hash `scan` computes over an identifier's characters, folded to lower case (`| 32`). */
function wordHash(word: string): number {
  let h = 0;
  for (let i = 0; i < word.length; i++) h = (Math.imul(h, 31) + (word.charCodeAt(i) | 32)) | 0;
  return h;
}

function homeSlot(h: number): number {
  return (h ^ (h >>> 11)) & (HASH_SLOTS - 1);
}

for (let id = 1; id <= WORDS.length; id++) {
  const h = wordHash(WORDS[id - 1]!);
  let slot = homeSlot(h);
  while (HASH_IDS[slot] !== 0) slot = (slot + 1) & (HASH_SLOTS - 1);
  HASH_IDS[slot] = id;
  HASH_FULL[slot] = h;
}

/** The keyword id of text[start, end) with hash h, matched case-insensitively; 0 if none. */
function lookupWord(text: string, start: number, end: number, h: number): number {
  let slot = homeSlot(h);
  let id: number;
  while ((id = HASH_IDS[slot]!) !== 0) {
    if (HASH_FULL[slot] === h) {
      const at = WORD_AT[id]!;
      const len = WORD_AT[id + 1]! - at;
      if (len === end - start) {
        let k = 0;
        // Identifier characters are ASCII letters, digits and `_`; `| 32` lower-cases letters
        // and never turns a digit or `_` into a letter.
        while (k < len && (text.charCodeAt(start + k) | 32) === WORD_CHARS[at + k]) k++;
        if (k === len) return id;
      }
    }
    slot = (slot + 1) & (HASH_SLOTS - 1);
  }
  return 0;
}

const UNIT_OF_WORD: readonly [string, TimeUnit][] = [
  ["millisecond", "millisecond"],
  ["milliseconds", "millisecond"],
  ["second", "second"],
  ["seconds", "second"],
  ["minute", "minute"],
  ["minutes", "minute"],
  ["hour", "hour"],
  ["hours", "hour"],
  ["day", "day"],
  ["days", "day"],
  ["week", "week"],
  ["weeks", "week"],
  ["month", "month"],
  ["months", "month"],
  ["year", "year"],
  ["years", "year"],
  ["decade", "decade"],
  ["decades", "decade"],
  ["century", "century"],
  ["centuries", "century"],
  ["millennium", "millennium"],
  ["millennia", "millennium"],
  ["millenniums", "millennium"],
  ["millenium", "millennium"],
  ["millenia", "millennium"],
  ["milleniums", "millennium"],
];

const UNIT_WORDS = new Map<string, TimeUnit>(UNIT_OF_WORD);

/** Time unit by keyword id (undefined for keywords that are not unit words). */
const UNIT_BY_ID: (TimeUnit | undefined)[] = WORDS.map(() => undefined);
UNIT_BY_ID.push(undefined);
for (const [word, unit] of UNIT_OF_WORD) UNIT_BY_ID[keywordId(word)] = unit;

/** Canonical time unit for a unit word (singular, plural, `millenium`), or undefined. */
export function timeUnitOf(word: string): TimeUnit | undefined {
  return UNIT_WORDS.get(word.toLowerCase());
}

/** The time unit a keyword id spells (0 or a non-unit id: undefined). */
export function unitOfKeyword(id: number): TimeUnit | undefined {
  return UNIT_BY_ID[id];
}

/** Keywords after which an operand starts, so that `or .5` reads `.5` as a number. */
const OPERAND_PREFIX_WORD = new Uint8Array(WORDS.length + 1);
for (const w of [
  "and", "or", "not", "in", "notin", "like", "matches", "occurs", "between", "on", "before", "after", "from",
  "where", "over",
]) {
  OPERAND_PREFIX_WORD[keywordId(w)] = 1;
}

// ------------------------------------------------------------------ tokens

/**
 * The token buffers of the latest `scan()`, reused between scans (the lexer
 * and parser never run re-entrantly). Token i: `kind[i]`, `start[i]`,
 * `end[i]`; `kw[i]`: the keyword id an identifier spells (0 for any other
 * token); int/double/param: the value in `num[i]`; strings: the decoded
 * contents in `str[num[i]]`. The last token is T_EOF at the text's end.
 */
export interface TokenBuffers {
  kind: Uint8Array;
  kw: Uint8Array;
  start: Int32Array;
  end: Int32Array;
  num: Float64Array;
  str: string[];
  count: number;
}

const INITIAL_CAPACITY = 1024;
/** How many decoded strings the current scan has stored in `TOKENS.str`. */
let strings = 0;

export const TOKENS: TokenBuffers = {
  kind: new Uint8Array(INITIAL_CAPACITY),
  kw: new Uint8Array(INITIAL_CAPACITY),
  start: new Int32Array(INITIAL_CAPACITY),
  end: new Int32Array(INITIAL_CAPACITY),
  num: new Float64Array(INITIAL_CAPACITY),
  str: [],
  count: 0,
};

/** Sizes the buffers for `n` tokens; gives memory back after a huge query. */
function reserve(n: number): void {
  const cap = TOKENS.kind.length;
  let size = cap;
  if (cap < n) size = Math.max(n, cap * 2);
  else if (cap > 65_536 && n < cap / 4) size = Math.max(INITIAL_CAPACITY, n);
  // Decoded strings of a huge query are dropped too (a scan stores at most one per token).
  if (TOKENS.str.length > 65_536 && TOKENS.str.length > n) TOKENS.str = [];
  if (size === cap) return;
  TOKENS.kind = new Uint8Array(size);
  TOKENS.kw = new Uint8Array(size);
  TOKENS.start = new Int32Array(size);
  TOKENS.end = new Int32Array(size);
  TOKENS.num = new Float64Array(size);
  TOKENS.str = [];
}

const ESCAPES: Record<string, string> = { "\\": "\\", '"': '"', n: "\n", t: "\t", r: "\r", b: "\b", f: "\f" };

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isIdentStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function isIdentPart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** Whether the token before index i ends an operand, so that a `.` is member access rather than `.45`. */
function endsOperand(i: number): boolean {
  if (i === 0) return false;
  const k = TOKENS.kind[i - 1]!;
  if (k === T_IDENT) return OPERAND_PREFIX_WORD[TOKENS.kw[i - 1]!] === 0;
  if (k > T_PARAM) return k === 41 || k === 93 || k === 125; // ) ] }
  return true;
}

/** A printable rendering of one character for error messages. */
function showChar(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  if (code < 32 || code === 127) return `\\u${code.toString(16).padStart(4, "0")}`;
  return ch;
}

// Character classes, for scan()'s first look at a character (ASCII; 0 for anything else: scanOther()).
const C_SPACE = 1;
const C_IDENT = 2;
/** Punctuation that never starts a longer token or a number: `( ) [ ] { } , : + * % ^`. */
const C_PUNCT = 3;
const C_DIGIT = 4;
const C_QUOTE = 5;
/** `.`: member access, or a number such as `.5`. */
const C_DOT = 6;
/** `=`, `<`, `>`, `!`: alone, or the first character of `<=`, `>=`, `!=`, `=>` (`==` is refused). */
const C_CMP = 7;
// Both tables cover every UTF-16 code unit (64 KB each, of which scanning touches the ASCII part):
// charCodeAt() is always in range, so the scan loops need no `< 128` test before the look-up.
const CLASS = new Uint8Array(65_536);
/** 1 for the characters an identifier continues with: ASCII letters, digits, `_`. */
const IDENT_PART = new Uint8Array(65_536);
for (let c = 0; c < 128; c++) {
  if (isIdentStart(c)) CLASS[c] = C_IDENT;
  if (isDigit(c)) CLASS[c] = C_DIGIT;
  if (isIdentPart(c)) IDENT_PART[c] = 1;
}
CLASS[32] = C_SPACE;
CLASS[34] = C_QUOTE;
for (const p of "()[]{},:+*%^") CLASS[p.charCodeAt(0)] = C_PUNCT;
CLASS[46] = C_DOT;
for (const p of "=<>!") CLASS[p.charCodeAt(0)] = C_CMP;

/**
 * Lexes `text` into `TOKENS` (see there) and returns the token count,
 * including the final T_EOF. Throws PqlError at the first lexical error.
 * The common characters (comparison operators and `.` included) are settled
 * here after one class look-up; the rest (other whitespace, `-`, `/`, `$n`,
 * refused characters) by scanOther().
 */
export function scan(text: string): number {
  const n = text.length;
  // Every token but EOF takes at least one character.
  reserve(n + 1);
  const kind = TOKENS.kind;
  const kw = TOKENS.kw;
  const starts = TOKENS.start;
  const ends = TOKENS.end;
  let count = 0;
  let i = 0;
  strings = 0;

  while (i < n) {
    const c = text.charCodeAt(i);
    const cls = CLASS[c]!;
    if (cls === C_IDENT) {
      const start = i;
      let h = c | 32;
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (IDENT_PART[d] === 0) break;
        h = (Math.imul(h, 31) + (d | 32)) | 0;
        i++;
      }
      kind[count] = T_IDENT;
      // Most names are not words: an empty home slot settles it without a call.
      kw[count] = i - start <= MAX_WORD && HASH_IDS[homeSlot(h)] !== 0 ? lookupWord(text, start, i, h) : 0;
      starts[count] = start;
      ends[count++] = i;
    } else if (cls === C_SPACE) {
      i++;
    } else if (cls === C_PUNCT) {
      kind[count] = c;
      kw[count] = 0;
      starts[count] = i;
      ends[count++] = ++i;
    } else if (cls === C_DIGIT) {
      i = lexNumber(text, i, count++);
    } else if (cls === C_QUOTE) {
      i = lexString(text, i, count++);
    } else if (cls === C_DOT) {
      const d = i + 1 < n ? text.charCodeAt(i + 1) : -1;
      if (d >= 48 && d <= 57 && !endsOperand(count)) {
        i = lexNumber(text, i, count++);
      } else {
        kind[count] = c;
        kw[count] = 0;
        starts[count] = i;
        ends[count++] = ++i;
      }
    } else if (cls === C_CMP) {
      const d = i + 1 < n ? text.charCodeAt(i + 1) : -1;
      // scanOther() refuses `==` (it throws).
      if (c === 61 && d === 61) scanOther(text, i, c, count);
      kw[count] = 0;
      starts[count] = i;
      if (d === 61) {
        kind[count] = c === 33 ? T_NE : c === 60 ? T_LE : T_GE;
        i += 2;
      } else if (c === 61 && d === 62) {
        kind[count] = T_ARROW;
        i += 2;
      } else {
        kind[count] = c;
        i++;
      }
      ends[count++] = i;
    } else {
      const next = scanOther(text, i, c, count);
      // A negative result is whitespace skipped: no token.
      if (next < 0) {
        i = -next;
      } else {
        i = next;
        count++;
      }
    }
  }
  kind[count] = T_EOF;
  kw[count] = 0;
  starts[count] = n;
  ends[count++] = n;
  TOKENS.count = count;
  return count;
}

/**
 * The characters of no class in scan(): other whitespace (returns minus the next index), `.`
 * (a number such as `.5`, or member access), operators that may be two characters long, `$n`,
 * and the characters PQL refuses. Writes token `index`; returns the end.
 */
function scanOther(text: string, start: number, c: number, index: number): number {
  const n = text.length;
  let i = start;
  // Other whitespace: tabs, newlines, and other Unicode blanks an editor may paste.
  if (c === 9 || c === 10 || c === 13 || c === 0xa0 || c === 0xfeff || c === 0x2028 || c === 0x2029) return -(i + 1);
  const c2 = i + 1 < n ? text.charCodeAt(i + 1) : -1;
  if (c === 46 && isDigit(c2) && !endsOperand(index)) return lexNumber(text, start, index);
  if (c === 39) {
    throw new PqlError("PQL_SINGLE_QUOTE", "Single-quoted strings are not PQL; use double quotes", text, start);
  }
  let k: number;
  if (c === 36) {
    // `$n`: positional parameter, 1-based.
    i++;
    while (i < n && isDigit(text.charCodeAt(i))) i++;
    if (i === start + 1) {
      throw new PqlError("PQL_BAD_PARAMETER", "Expected a parameter number after '$' (e.g. $1)", text, start);
    }
    const digits = text.slice(start + 1, i);
    const value = Number(digits);
    if (value < 1) {
      throw new PqlError("PQL_BAD_PARAMETER", `Parameters are numbered from $1; found '$${digits}'`, text, start, i);
    }
    if (!Number.isSafeInteger(value)) {
      throw new PqlError("PQL_BAD_PARAMETER", `Parameter number '$${digits}' is too large`, text, start, i);
    }
    k = T_PARAM;
    TOKENS.num[index] = value;
  } else {
    if (c === 61 && c2 === 61) {
      throw new PqlError("PQL_DOUBLE_EQUALS", "'==' is not PQL; use '=' for equality", text, start, start + 2);
    }
    if ((c === 47 && (c2 === 47 || c2 === 42)) || (c === 45 && c2 === 45)) {
      const two = text.slice(i, i + 2);
      const hint = two === "--" ? "; write '- -' with a space for a double minus" : "";
      throw new PqlError("PQL_COMMENT", `Comments are not supported in PQL ('${two}')${hint}`, text, start, start + 2);
    }
    if (c === 35) {
      throw new PqlError("PQL_COMMENT", "Comments are not supported in PQL ('#')", text, start);
    }
    if ((c === 38 && c2 === 38) || (c === 124 && c2 === 124)) {
      const two = text.slice(i, i + 2);
      const word = two === "&&" ? "and" : "or";
      throw new PqlError("PQL_UNEXPECTED_CHARACTER", `'${two}' is not PQL; use '${word}'`, text, start, start + 2);
    }
    // `!=`, `<=`, `>=`, `=>`: longest match first.
    if (c2 === 61 && (c === 33 || c === 60 || c === 62)) {
      k = c === 33 ? T_NE : c === 60 ? T_LE : T_GE;
      i += 2;
    } else if (c === 61 && c2 === 62) {
      k = T_ARROW;
      i += 2;
    } else if (c < 128 && PUNCT1[c] !== undefined) {
      k = c;
      i++;
    } else {
      const cp = text.codePointAt(i) ?? c;
      const full = String.fromCodePoint(cp);
      throw new PqlError("PQL_UNEXPECTED_CHARACTER", `Unexpected character '${showChar(full)}'`, text, start, start + full.length);
    }
  }
  TOKENS.kind[index] = k;
  TOKENS.kw[index] = 0;
  TOKENS.start[index] = start;
  TOKENS.end[index] = i;
  return i;
}

/** Lexes `text` into token objects (the same tokens `scan` produces, in object form). */
export function tokenize(text: string): Token[] {
  const count = scan(text);
  const { kind, start, end, num, str } = TOKENS;
  const tokens: Token[] = [];
  for (let i = 0; i < count; i++) {
    const k = kind[i]!;
    const s = start[i]!;
    const e = end[i]!;
    const raw = text.slice(s, e);
    switch (k) {
      case T_EOF:
        tokens.push({ kind: "eof", text: "", lower: "", value: "", start: s, end: e });
        break;
      case T_IDENT:
        tokens.push({ kind: "ident", text: raw, lower: raw.toLowerCase(), value: raw, start: s, end: e });
        break;
      case T_INT:
      case T_DOUBLE:
        tokens.push({ kind: k === T_INT ? "int" : "double", text: raw, lower: raw, value: num[i]!, start: s, end: e });
        break;
      case T_PARAM:
        tokens.push({ kind: "param", text: raw, lower: raw, value: num[i]!, start: s, end: e });
        break;
      case T_STRING:
        tokens.push({ kind: "string", text: raw, lower: "", value: str[num[i]!]!, start: s, end: e });
        break;
      default: {
        const p = punctText(k);
        tokens.push({ kind: "punct", text: p, lower: p, value: p, start: s, end: e });
      }
    }
  }
  return tokens;
}

/**
 * Numbers (pql.md §2.4, OQ-5): `412`, `3.14`, `.45`, `1e3`, `2.02E-12`.
 * No sign (unary minus is the parser's), no spaces, integer exponents only.
 * Integers must be within the IEEE-754 safe range so that they survive
 * pql/json and JS arithmetic exactly. Writes token `index`; returns the end.
 */
function lexNumber(text: string, start: number, index: number): number {
  const n = text.length;
  let i = start;
  let isDouble = false;
  // Up to 15 digits are exact in a double, so short integers need no string conversion.
  let acc = 0;
  let c: number;
  while (i < n && (c = text.charCodeAt(i)) >= 48 && c <= 57) {
    acc = acc * 10 + (c - 48);
    i++;
  }
  // A fraction needs a digit after the dot: `1.foo` is the integer 1 then `.foo`.
  if (text.charCodeAt(i) === 46 && isDigit(text.charCodeAt(i + 1))) {
    isDouble = true;
    i++;
    while (i < n && isDigit(text.charCodeAt(i))) i++;
  }
  const e = text.charCodeAt(i);
  if (e === 101 || e === 69) {
    let j = i + 1;
    const sign = text.charCodeAt(j);
    if (sign === 43 || sign === 45) j++;
    if (!isDigit(text.charCodeAt(j))) {
      throw new PqlError("PQL_BAD_NUMBER", `Malformed number '${text.slice(start, j)}': the exponent needs digits`, text, start, j);
    }
    while (j < n && isDigit(text.charCodeAt(j))) j++;
    isDouble = true;
    i = j;
  }
  if (i < n && isIdentStart(text.charCodeAt(i))) {
    let j = i;
    while (j < n && isIdentPart(text.charCodeAt(j))) j++;
    throw new PqlError("PQL_BAD_NUMBER", `Malformed number '${text.slice(start, j)}'`, text, start, j);
  }
  let value: number;
  if (!isDouble && i - start <= 15) {
    value = acc;
  } else {
    const raw = text.slice(start, i);
    value = Number(raw);
    if (isDouble) {
      if (!Number.isFinite(value)) {
        throw new PqlError("PQL_NUMBER_RANGE", `Number '${raw}' is too large`, text, start, i);
      }
    } else if (!Number.isSafeInteger(value)) {
      throw new PqlError(
        "PQL_NUMBER_RANGE",
        `Integer '${raw}' is outside the supported range (at most ${Number.MAX_SAFE_INTEGER})`,
        text,
        start,
        i,
      );
    }
  }
  TOKENS.kind[index] = isDouble ? T_DOUBLE : T_INT;
  TOKENS.kw[index] = 0;
  TOKENS.num[index] = value;
  TOKENS.start[index] = start;
  TOKENS.end[index] = i;
  return i;
}

/** Double-quoted strings with Java escapes (pql.md §2.4, OQ-3). Writes token `index`; returns the end. */
function lexString(text: string, start: number, index: number): number {
  const n = text.length;
  let i = start + 1;
  let c: number;
  // Fast path: no escape before the closing quote.
  while (i < n && (c = text.charCodeAt(i)) !== 34 && c !== 92) i++;
  let out: string;
  if (i < n && text.charCodeAt(i) === 34) {
    out = text.slice(start + 1, i);
  } else {
    out = "";
    let chunk = start + 1;
    while (true) {
      if (i >= n) throw new PqlError("PQL_UNTERMINATED_STRING", "Unterminated string literal", text, start, n);
      c = text.charCodeAt(i);
      if (c === 34) break;
      if (c !== 92) {
        i++;
        continue;
      }
      out += text.slice(chunk, i);
      const esc = text[i + 1];
      if (esc === undefined) throw new PqlError("PQL_UNTERMINATED_STRING", "Unterminated string literal", text, start, n);
      if (esc === "u") {
        let ok = i + 6 <= n;
        for (let k = i + 2; ok && k < i + 6; k++) ok = isHex(text.charCodeAt(k));
        if (!ok) {
          throw new PqlError("PQL_BAD_ESCAPE", "Invalid unicode escape: '\\u' needs four hex digits", text, i, Math.min(n, i + 6));
        }
        out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
        i += 6;
      } else {
        const decoded = ESCAPES[esc];
        if (decoded === undefined) {
          throw new PqlError(
            "PQL_BAD_ESCAPE",
            `Unknown escape sequence '\\${showChar(esc)}' in string literal (write '\\\\' for a backslash)`,
            text,
            i,
            i + 2,
          );
        }
        out += decoded;
        i += 2;
      }
      chunk = i;
    }
    out += text.slice(chunk, i);
  }
  i++;
  TOKENS.kind[index] = T_STRING;
  TOKENS.kw[index] = 0;
  TOKENS.num[index] = strings;
  TOKENS.str[strings++] = out;
  TOKENS.start[index] = start;
  TOKENS.end[index] = i;
  return i;
}
