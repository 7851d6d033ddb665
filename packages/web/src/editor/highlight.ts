/**
 * Tokens for the PQL editor's coloured overlay. This is a display lexer, not
 * the parser: it must never fail and must cover every character (so that the
 * overlay lines up with the textarea exactly), including unfinished strings
 * while the user is typing. Correctness of the query is the job of `check`.
 */
import { BUILTINS, KEYWORDS } from "@segmentd/pql";

export type TokenKind = "keyword" | "function" | "string" | "number" | "operator" | "punct" | "field" | "space" | "other";

export interface Token {
  kind: TokenKind;
  text: string;
}

// Lower-case keywords (and, or, select…) are matched in any case; the upper-case
// chain words (WHAT, WHEN, COUNT…) only as written, so a field named `count` stays a field.
const KEYWORD_ANY_CASE = new Set(KEYWORDS.filter((k) => k !== k.toUpperCase()).map((k) => k.toLowerCase()));
const KEYWORD_EXACT = new Set(KEYWORDS);
const FUNCTIONS = new Set(BUILTINS.map((b) => b.name.toLowerCase()));

const RULES: Array<[TokenKind, RegExp]> = [
  ["space", /\s+/y],
  // A string runs to its closing quote, or to the end of the text while unfinished.
  ["string", /"(?:[^"\\]|\\[\s\S])*(?:"|$)|'(?:[^'\\]|\\[\s\S])*(?:'|$)/y],
  ["number", /\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y],
  ["field", /[A-Za-z_$][A-Za-z0-9_$]*/y],
  ["operator", /!=|<=|>=|=|<|>|\+|-|\*|\/|%|:/y],
  ["punct", /[()[\]{},.]/y],
];

export function tokenize(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    let matched = false;
    for (const [kind, re] of RULES) {
      re.lastIndex = i;
      const m = re.exec(text);
      if (!m || m[0] === "") continue;
      out.push({ kind: kind === "field" ? wordKind(m[0], text, i + m[0].length) : kind, text: m[0] });
      i += m[0].length;
      matched = true;
      break;
    }
    if (!matched) {
      out.push({ kind: "other", text: text[i]! });
      i++;
    }
  }
  return out;
}

function wordKind(word: string, text: string, end: number): TokenKind {
  if (KEYWORD_EXACT.has(word) || KEYWORD_ANY_CASE.has(word.toLowerCase())) return "keyword";
  // A builtin name directly followed by "(" is a call; the same word elsewhere is a field step.
  if (FUNCTIONS.has(word.toLowerCase()) && /^\s*\(/.test(text.slice(end, end + 20))) return "function";
  return "field";
}
