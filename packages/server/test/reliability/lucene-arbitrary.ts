/**
 * Hostile but valid Lucene `s` queries for segment search (#37): what the parser accepts and the
 * matcher must bound — fuzzy terms (`~`, `~0`–`~2`) up to the 256-character term limit, leading,
 * trailing and repeated wildcards, regular expressions with heavy repetition, open and closed
 * ranges, phrases with slop, fields, `+`/`-` prefixes, AND/OR/NOT/&&/|| and nested groups —
 * always within the query's limits (1,024 characters, 16 levels of parentheses), so a refusal
 * is never a parse error. `luceneQuery({ words })` draws its words from `words` when given (a
 * sandbox's vocabulary makes matches likely), else from a small alphabet.
 */
import fc from "fast-check";
import { nestingDepth } from "../../src/services/segment-search.js";

export interface LuceneArbitraryOptions {
  /** Words to build terms from (lower-case letters and digits); default: generated from a small alphabet. */
  words?: readonly string[];
  /** Longest query, in characters (the service's limit is 1,024). */
  maxLength?: number;
  /** Deepest nesting of groups (the service's limit is 16). */
  maxDepth?: number;
}

const FIELDS = ["", "", "", "segmentName:", "segmentDescription:", "segmentId:", "parentFolderId:"] as const;
const REGEXES = ["(.*a){20}", "(a+)+b", "[a-z]*q[a-z]*", ".*", "(a|aa)*c", "a{1,500}", "(.*.*)*x", "[^x]{0,200}y", "c.r", "(?:a|b|c)+"] as const;

/** A term of 1–256 characters: a short word, a long run of one letter, or a word padded out. */
function termArb(words: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: words },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom("a", "q", "z"), fc.integer({ min: 1, max: 256 })).map(([c, n]) => c.repeat(n)) },
    { weight: 1, arbitrary: fc.tuple(words, fc.integer({ min: 0, max: 200 })).map(([w, n]) => (w + "a".repeat(n)).slice(0, 256)) },
  );
}

/** One clause, without its field: plain, fuzzy, wildcard, regex, range or phrase. */
function clauseArb(words: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const term = termArb(words);
  const glob = fc.tuple(fc.constantFrom("*", "?", "", "**"), term, fc.constantFrom("*", "?", "", "*a*"))
    .map(([x, t, y]) => `${x}${t}${y}`)
    .filter((g) => g.length <= 256 && /[*?]/.test(g));
  return fc.oneof(
    term,
    fc.tuple(term, fc.constantFrom("~", "~0", "~1", "~2")).map(([t, d]) => `${t}${d}`),
    glob,
    fc.constantFrom(...REGEXES).map((r) => `/${r}/`),
    fc.tuple(fc.oneof(words, fc.constant("*")), fc.oneof(words, fc.constant("*")), fc.constantFrom("[", "{"), fc.constantFrom("]", "}"))
      .map(([lo, hi, o, c]) => `${o}${lo} TO ${hi}${c}`),
    fc.tuple(fc.array(words, { minLength: 1, maxLength: 6 }), fc.option(fc.integer({ min: 0, max: 1000 }), { nil: undefined }))
      .map(([ws, slop]) => `"${ws.join(" ")}"${slop === undefined ? "" : `~${slop}`}`),
  );
}

/** A Lucene query for `/search/*`'s `s`; every one parses. */
export function luceneQuery(options: LuceneArbitraryOptions = {}): fc.Arbitrary<string> {
  const maxLength = options.maxLength ?? 1024;
  const maxDepth = Math.min(options.maxDepth ?? 16, 16);
  const words = options.words !== undefined && options.words.length > 0
    ? fc.constantFrom(...options.words)
    : fc.string({ unit: fc.constantFrom("a", "b", "c", "q", "r", "z", "1"), minLength: 1, maxLength: 10 });
  const clause = fc.tuple(fc.constantFrom(...FIELDS), fc.constantFrom("", "", "+", "-"), clauseArb(words))
    // The parser takes a range only after a field, and reads `+field:` as a field named "+field": prefixes go on unfielded clauses.
    .map(([field, prefix, c]) => (field === "" && /^[[{]/.test(c) ? `segmentName:${c}` : field === "" ? `${prefix}${c}` : `${field}${c}`));
  const op = fc.constantFrom(" ", " ", " AND ", " OR ", " NOT ", " && ", " || ", " AND NOT ");
  const { query } = fc.letrec<{ query: string; group: string }>((tie) => ({
    query: fc.tuple(fc.array(fc.oneof({ weight: 4, arbitrary: clause }, { weight: 1, arbitrary: tie("group") }), { minLength: 1, maxLength: 12 }), fc.array(op, { minLength: 12, maxLength: 12 }))
      .map(([items, ops]) => items.map((c, i) => (i === 0 ? c : `${ops[i]}${c}`)).join("")),
    group: fc.tuple(fc.constantFrom("", "NOT ", "segmentName:", "segmentDescription:"), tie("query")).map(([p, q]) => `${p}(${q})`),
  }));
  const many = fc.tuple(clause, fc.integer({ min: 1, max: 150 })).map(([c, n]) => Array.from({ length: n }, () => c).join(" "));
  return fc.oneof({ weight: 4, arbitrary: query }, { weight: 1, arbitrary: many })
    .map((q) => q.trim())
    .filter((q) => q.length > 0 && q.length <= maxLength && nestingDepth(q) <= maxDepth);
}

