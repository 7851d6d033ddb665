/**
 * The segment search matcher as it was before #37 — a predicate over each document's words, with
 * no index and no budget — kept as the oracle of search-semantics.test.ts: the indexed, budgeted
 * matcher must answer every query exactly as this one did. The reading of the query (nesting,
 * fuzzy distances, words) is the service's own; the matching is the old one. Test code only.
 */
import lucene from "lucene";
import { validateJavaRegex } from "@segmentd/pql";
import {
  chainClauses, editsOf, fuzzyDistances, MAX_SEARCH_DEPTH, MAX_SEARCH_QUERY, nestingDepth, SEARCH_FIELD_ALIASES, SEARCH_FIELDS, SearchQueryError, words,
  type Node, type Occur, type SearchDoc,
} from "../../src/services/segment-search.js";

const TEXT_FIELDS = { segmentName: "name", segmentDescription: "description" } as const;
const KEYWORD_FIELDS = ["segmentId", "folderId", "folderLocation", "parentFolderId"] as const;

type Pred = (d: IndexedDoc) => boolean;

interface IndexedDoc {
  doc: SearchDoc;
  words: { name: string[]; description: string[] };
  keywords: Record<(typeof KEYWORD_FIELDS)[number], string>;
}

export function referenceDoc(doc: SearchDoc): IndexedDoc {
  return {
    doc,
    words: { name: words(doc.name), description: words(doc.description) },
    keywords: { segmentId: doc.id.toLowerCase(), folderId: "", folderLocation: "", parentFolderId: doc.parentFolderId.toLowerCase() },
  };
}

/** `*` and `?` over a word, without backtracking blow-up: O(word × pattern) at worst. */
function globMatch(pattern: string, s: string): boolean {
  let p = 0, i = 0, star = -1, mark = 0;
  while (i < s.length) {
    if (p < pattern.length && (pattern[p] === "?" || pattern[p] === s[i])) {
      p++;
      i++;
    } else if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      mark = i;
    } else if (star >= 0) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}

/** Levenshtein distance, stopping early once it exceeds `max`. */
function withinEdits(a: string, b: string, max: number): boolean {
  if (Math.abs(a.length - b.length) > max) return false;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(v);
      best = Math.min(best, v);
    }
    if (best > max) return false;
    prev = row;
  }
  return prev[b.length]! <= max;
}


/** A word-level test for one term node (unescaped, lower-cased). */
function termTest(n: lucene.NodeTerm): (word: string) => boolean {
  if (n.term.length > 256) throw new SearchQueryError(`A search term is ${n.term.length} characters long, over the limit of 256`);
  const raw = lucene.term.unescape(n.term).toLowerCase();
  if (n.regex) {
    // Whole word or value, case-insensitive like the rest of the matching.
    const v = validateJavaRegex(`(?i)^(?:${n.term})$`);
    if (!v.ok) throw new SearchQueryError(`Invalid regular expression /${n.term.slice(0, 100)}/: ${v.message}`);
    return (w) => v.regex.test(w);
  }
  if (n.similarity !== null && n.similarity !== undefined) {
    const max = editsOf(n.similarity);
    return (w) => withinEdits(raw, w, max);
  }
  // Words hold letters and digits only, so an escaped \* or \? could never match one: any * or ? is a wildcard.
  if (/[*?]/.test(raw)) return (w) => globMatch(raw, w);
  return (w) => w === raw;
}

function phraseTest(field: "name" | "description", phrase: string[], slop: number): Pred {
  return (d) => {
    const ws = d.words[field];
    if (phrase.length === 0) return true;
    for (let start = 0; start < ws.length; start++) {
      if (ws[start] !== phrase[0]) continue;
      let pos = start, gaps = 0, k = 1;
      for (; k < phrase.length; k++) {
        const next = ws.indexOf(phrase[k]!, pos + 1);
        if (next < 0) break;
        gaps += next - pos - 1;
        if (gaps > slop) break;
        pos = next;
      }
      if (k === phrase.length && gaps <= slop) return true;
    }
    return false;
  };
}

function fieldPred(field: string, n: lucene.Node): Pred {
  const fields = field === "<implicit>" ? ["segmentName", "segmentDescription", "segmentId"] : [SEARCH_FIELD_ALIASES[field] ?? field];
  const preds = fields.map((f): Pred => {
    const text = (TEXT_FIELDS as Record<string, "name" | "description">)[f];
    const keyword = (KEYWORD_FIELDS as readonly string[]).includes(f) ? (f as (typeof KEYWORD_FIELDS)[number]) : undefined;
    if (text === undefined && keyword === undefined) {
      throw new SearchQueryError(`Unknown search field '${f.slice(0, 64)}': use one of ${SEARCH_FIELDS.join(", ")}`);
    }
    if ("term_min" in n) {
      const lo = lucene.term.unescape(n.term_min).toLowerCase(), hi = lucene.term.unescape(n.term_max).toLowerCase();
      const lowOk = (w: string) => lo === "*" || (n.inclusive === "both" || n.inclusive === "left" ? w >= lo : w > lo);
      const highOk = (w: string) => hi === "*" || (n.inclusive === "both" || n.inclusive === "right" ? w <= hi : w < hi);
      const inRange = (w: string) => lowOk(w) && highOk(w);
      return text !== undefined ? (d) => d.words[text].some(inRange) : (d) => d.keywords[keyword!] !== "" && inRange(d.keywords[keyword!]);
    }
    if (n.quoted) {
      const phrase = lucene.term.unescape(n.term);
      if (text !== undefined) return phraseTest(text, words(phrase), (n as { proximity?: number | null }).proximity ?? 0);
      const value = phrase.toLowerCase();
      return (d) => d.keywords[keyword!] === value;
    }
    const test = termTest(n);
    return text !== undefined ? (d) => d.words[text].some(test) : (d) => d.keywords[keyword!] !== "" && test(d.keywords[keyword!]);
  });
  return preds.length === 1 ? preds[0]! : (d) => preds.some((p) => p(d));
}

interface Clause {
  pred: Pred;
  occur: Occur;
}

function compileNode(n: Node, inheritedField: string): Pred {
  if ("left" in n && n.left !== undefined) {
    const field = "field" in n && typeof n.field === "string" ? n.field : inheritedField;
    const clauses = chainClauses(n as lucene.AST).map((c) => ({ pred: compileNode(c.node, field), occur: c.occur }));
    const start = (n as { start?: string }).start;
    const group = booleanOf(clauses);
    return start === "NOT" || start === "!" ? (d) => !group(d) : group;
  }
  const term = n as lucene.Node;
  const field = term.field === undefined || term.field === "<implicit>" ? inheritedField : term.field;
  return fieldPred(field, term);
}

function booleanOf(clauses: Clause[]): Pred {
  const must = clauses.filter((c) => c.occur === "must").map((c) => c.pred);
  const not = clauses.filter((c) => c.occur === "not").map((c) => c.pred);
  const should = clauses.filter((c) => c.occur === "should").map((c) => c.pred);
  return (d) => {
    for (const p of must) if (!p(d)) return false;
    for (const p of not) if (p(d)) return false;
    if (must.length === 0 && should.length > 0) return should.some((p) => p(d));
    return true;
  };
}

/** `s` → a predicate; undefined, blank or `*` match everything. Throws SearchQueryError with a message for the user. */
export function referenceSearch(s: string | undefined): (doc: IndexedDoc) => boolean {
  if (s === undefined || s.trim() === "" || s.trim() === "*") return () => true;
  if (s.length > MAX_SEARCH_QUERY) throw new SearchQueryError(`The search query is ${s.length} characters long, over the limit of ${MAX_SEARCH_QUERY}`);
  if (nestingDepth(s) > MAX_SEARCH_DEPTH) throw new SearchQueryError(`The search query nests parentheses deeper than the limit of ${MAX_SEARCH_DEPTH}`);
  let ast: lucene.AST;
  try {
    ast = lucene.parse(fuzzyDistances(s));
  } catch (err) {
    throw new SearchQueryError(`Invalid search query: ${String((err as Error).message).slice(0, 200)}`);
  }
  const pred = compileNode(ast, "<implicit>");
  return pred;
}
