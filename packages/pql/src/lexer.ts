/**
 * The PQL lexer: turns pql/text into a flat token array in one linear pass.
 *
 * Tokenising everything up front (rather than on demand) keeps the parser's
 * look-ahead trivial — lambda detection and the `sum V from` binder test peek
 * several tokens ahead — and a 1 MB query still lexes in a few milliseconds.
 *
 * Keywords are NOT classified here: whether `from`, `last` or `count` is a
 * keyword depends on its position (pql.md §2.6), so identifiers carry their
 * text and a lower-cased copy and the parser decides.
 *
 * Lexical errors the lexer reports (pql.md §2): unterminated strings, unknown
 * escapes, single quotes, `==`, comments (`//`, `/*`, `--`, `#`), malformed or
 * out-of-range numbers, `$` without a positive number, stray characters.
 */
import type { TimeUnit } from "./ast.js";
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

/** Single-character punctuation, indexed by character code. */
const PUNCT1: (string | undefined)[] = [];
for (const p of "()[]{},:.=<>+-*/%!^") PUNCT1[p.charCodeAt(0)] = p;

const ESCAPES: Record<string, string> = { "\\": "\\", '"': '"', n: "\n", t: "\t", r: "\r", b: "\b", f: "\f" };

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isIdentStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function isIdentPart(c: number): boolean {
  return isIdentStart(c) || isDigit(c);
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** Keywords after which an operand starts, so that `or .5` reads `.5` as a number. */
const OPERAND_PREFIX_WORDS = new Set([
  "and", "or", "not", "in", "notin", "like", "matches", "occurs", "between", "on", "before", "after", "from",
  "where", "over",
]);

/** Tokens after which a `.` is member access rather than the start of `.45`. */
function endsOperand(t: Token | undefined): boolean {
  if (!t) return false;
  if (t.kind === "punct") return t.text === ")" || t.text === "]" || t.text === "}";
  if (t.kind === "ident") return !OPERAND_PREFIX_WORDS.has(t.lower);
  return t.kind !== "eof";
}

/** A printable rendering of one character for error messages. */
function showChar(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  if (code < 32 || code === 127) return `\\u${code.toString(16).padStart(4, "0")}`;
  return ch;
}

export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const n = text.length;
  let i = 0;
  const push = (kind: TokenKind, start: number, end: number, value: string | number): void => {
    const t = text.slice(start, end);
    tokens.push({ kind, text: t, lower: kind === "ident" ? t.toLowerCase() : t, value, start, end });
  };

  while (i < n) {
    const c = text.charCodeAt(i);
    // Whitespace: spaces, tabs, newlines, and other Unicode blanks an editor may paste.
    if (c === 32 || c === 9 || c === 10 || c === 13 || c === 0xa0 || c === 0xfeff || c === 0x2028 || c === 0x2029) {
      i++;
      continue;
    }
    const start = i;
    if (isIdentStart(c)) {
      i++;
      while (i < n && isIdentPart(text.charCodeAt(i))) i++;
      push("ident", start, i, text.slice(start, i));
      continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(text.charCodeAt(i + 1)) && !endsOperand(tokens[tokens.length - 1]))) {
      i = lexNumber(text, start, tokens);
      continue;
    }
    if (c === 34) {
      i = lexString(text, start, tokens);
      continue;
    }
    if (c === 39) {
      throw new PqlError("PQL_SINGLE_QUOTE", "Single-quoted strings are not PQL; use double quotes", text, start);
    }
    if (c === 36) {
      // `$n`: positional parameter, 1-based.
      i++;
      while (i < n && isDigit(text.charCodeAt(i))) i++;
      if (i === start + 1) {
        throw new PqlError("PQL_BAD_PARAMETER", "Expected a parameter number after '$' (e.g. $1)", text, start);
      }
      const digits = text.slice(start + 1, i);
      const index = Number(digits);
      if (index < 1) {
        throw new PqlError("PQL_BAD_PARAMETER", `Parameters are numbered from $1; found '$${digits}'`, text, start, i);
      }
      if (!Number.isSafeInteger(index)) {
        throw new PqlError("PQL_BAD_PARAMETER", `Parameter number '$${digits}' is too large`, text, start, i);
      }
      push("param", start, i, index);
      continue;
    }
    // Operators by character code: this loop runs for every token of a 1 MB query.
    const c2 = text.charCodeAt(i + 1);
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
    if ((c2 === 61 && (c === 33 || c === 60 || c === 62)) || (c === 61 && c2 === 62)) {
      i += 2;
      const op = text.slice(start, i);
      tokens.push({ kind: "punct", text: op, lower: op, value: op, start, end: i });
      continue;
    }
    const single = PUNCT1[c];
    if (single !== undefined) {
      i++;
      tokens.push({ kind: "punct", text: single, lower: single, value: single, start, end: i });
      continue;
    }
    const cp = text.codePointAt(i) ?? c;
    const full = String.fromCodePoint(cp);
    throw new PqlError("PQL_UNEXPECTED_CHARACTER", `Unexpected character '${showChar(full)}'`, text, start, start + full.length);
  }
  tokens.push({ kind: "eof", text: "", lower: "", value: "", start: n, end: n });
  return tokens;
}

/**
 * Numbers (pql.md §2.4, OQ-5): `412`, `3.14`, `.45`, `1e3`, `2.02E-12`.
 * No sign (unary minus is the parser's), no spaces, integer exponents only.
 * Integers must be within the IEEE-754 safe range so that they survive
 * pql/json and JS arithmetic exactly.
 */
function lexNumber(text: string, start: number, tokens: Token[]): number {
  const n = text.length;
  let i = start;
  let isDouble = false;
  while (i < n && isDigit(text.charCodeAt(i))) i++;
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
  const raw = text.slice(start, i);
  const value = Number(raw);
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
  tokens.push({ kind: isDouble ? "double" : "int", text: raw, lower: raw, value, start, end: i });
  return i;
}

/** Double-quoted strings with Java escapes (pql.md §2.4, OQ-3). */
function lexString(text: string, start: number, tokens: Token[]): number {
  const n = text.length;
  let i = start + 1;
  let out = "";
  let chunk = i;
  while (true) {
    if (i >= n) throw new PqlError("PQL_UNTERMINATED_STRING", "Unterminated string literal", text, start, n);
    const c = text.charCodeAt(i);
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
  i++;
  tokens.push({ kind: "string", text: text.slice(start, i), lower: "", value: out, start, end: i });
  return i;
}

/** Canonical time unit for a unit word (singular, plural, `millenium`), or undefined. */
export function timeUnitOf(word: string): TimeUnit | undefined {
  return UNIT_WORDS.get(word.toLowerCase());
}

const UNIT_WORDS = new Map<string, TimeUnit>([
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
]);
