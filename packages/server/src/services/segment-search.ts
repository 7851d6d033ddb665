/**
 * Segment search (`/search/*`): the `s` parameter's Lucene query syntax, parsed by the `lucene`
 * package, compiled to a predicate over a sandbox's searchable objects. Knows nothing of HTTP.
 *
 * Matching, as a full-text index over these objects would: `segmentName` and
 * `segmentDescription` are text (lower-cased words: letters and digits); `segmentId`,
 * `folderId`, `folderLocation` and `parentFolderId` are keywords (the whole value, case
 * insensitive). A term without a field searches name, description and id. Supported: terms,
 * `field:term`, phrases (`"a b"`, with `~N` slop), wildcards (`*`, `?`), fuzzy terms (`~`, `~1`,
 * `~2`: edit distance), regular expressions (`/…/`, whole word or value, on the linear-time
 * engine of PQL's `matches`), ranges (`[a TO b]`, `{a TO b}`), AND / OR / NOT / `&&` / `||` /
 * `!`, `+` and `-`, and groups. Clauses without an operator are OR'ed, as in Lucene.
 *
 * A query compiles to a SearchPlan before any document is read (bad syntax is a 400 that costs
 * nothing); search-match.ts runs the plan over the sandbox's index under a budget (#37).
 */
import lucene from "lucene";
import { validateJavaRegex, type SafeRegex } from "@segmentd/pql";
import { words, type FieldKey, type KeywordField, type TextField } from "./search-index.js";

export { indexDoc, words, type SearchDoc } from "./search-index.js";
/** The work one regular-expression match may do (search-match.ts refuses a search past it). */
export { REGEX_MAX_STEPS } from "@segmentd/pql";

export const SEARCH_SCHEMA = "_xdm.context.segmentdefinition";
/** The namespace Platform's own audiences (segment definitions) are searched in. */
export const PLATFORM_NAMESPACE = "AEPSegments";

/** Longest `s`; deepest parenthesis nesting (the parser is recursive). */
export const MAX_SEARCH_QUERY = 1024;
export const MAX_SEARCH_DEPTH = 16;

export class SearchQueryError extends Error {}

const TEXT_FIELDS: Record<string, TextField> = { segmentName: "name", segmentDescription: "description" };
const KEYWORD_FIELDS = ["segmentId", "folderId", "folderLocation", "parentFolderId"] as const;
export const SEARCH_FIELDS = [...Object.keys(TEXT_FIELDS), ...KEYWORD_FIELDS] as const;
/**
 * The search objects' own property names (SearchEntityObject's `name`, `description`, `id`), which
 * Adobe's examples query (`s=name:test` in segmentation.yaml), read as the indexed fields.
 */
export const SEARCH_FIELD_ALIASES: Readonly<Record<string, string>> = { name: "segmentName", description: "segmentDescription", id: "segmentId" };

/** How one field's words (or keyword value) are tested: each kind is matched against the field's vocabulary. */
export type TermTest =
  | { kind: "exact"; value: string }
  | { kind: "fuzzy"; value: string; max: number }
  | { kind: "glob"; pattern: string }
  | { kind: "regex"; regex: SafeRegex }
  | { kind: "range"; lo: string; hi: string; inclusive: "both" | "left" | "right" | "none" }
  /** Quoted text: the words in order, at most `slop` words apart in all. */
  | { kind: "phrase"; words: string[]; slop: number }
  /** Quoted keyword: the whole value (the empty value included, as a document without one holds it). */
  | { kind: "value"; value: string };

export interface LeafPlan {
  kind: "leaf";
  field: FieldKey;
  test: TermTest;
  /** Equal for equal tests of the same field: each distinct one is matched once per search. */
  key: string;
  /** The term as the query wrote it, for a refusal's message. */
  label: string;
}

export interface BoolPlan {
  kind: "bool";
  must: SearchPlan[];
  should: SearchPlan[];
  not: SearchPlan[];
  negate: boolean;
}

export type SearchPlan = { kind: "all" } | LeafPlan | BoolPlan;

/** Parenthesis nesting outside quotes (the parser is recursive: MAX_SEARCH_DEPTH bounds it). */
export function nestingDepth(s: string): number {
  let depth = 0, max = 0, quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "\\") i++;
    else if (c === '"') quoted = !quoted;
    else if (!quoted && c === "(") max = Math.max(max, ++depth);
    else if (!quoted && c === ")") depth--;
  }
  return max;
}

/**
 * Lucene's edit distances (`term~1`, `term~2`) in the form the parser reads (`term~0.8`): it takes
 * only the old fractional similarity and would read `boat~1` as `boat~` OR `1`. Quoted phrases
 * (where `~N` is a slop the parser does read) and escapes are left alone.
 */
export function fuzzyDistances(s: string): string {
  let out = "";
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "\\") {
      out += c + (s[i + 1] ?? "");
      i++;
      continue;
    }
    if (c === '"') quoted = !quoted;
    const edits = s[i + 1];
    if (!quoted && c === "~" && i > 0 && s[i - 1] !== '"' && edits !== undefined && edits >= "0" && edits <= "2" && !/[\d.]/.test(s[i + 2] ?? "")) {
      out += `~${edits === "0" ? "0.99" : edits === "1" ? "0.8" : "0.5"}`;
      i++;
      continue;
    }
    out += c;
  }
  return out;
}

/** Edits allowed for the parser's similarity (Lucene's old scale): 0.99 and up none, 0.75 and up one, else two. */
export function editsOf(similarity: number): number {
  return similarity >= 0.99 ? 0 : similarity >= 0.75 ? 1 : 2;
}

/** A node of the `lucene` package's tree: a group or chain, or a term. */
export type Node = lucene.AST | lucene.Node;

const MAX_TERM = 256;

/** The term as written, for messages: its field when one was named, its operator, at most 80 characters of it. */
function labelOf(n: lucene.Node, field: string): string {
  const short = (t: string) => (t.length > 80 ? `${t.slice(0, 80)}…` : t);
  let text: string;
  if ("term_min" in n) {
    text = `${n.inclusive === "both" || n.inclusive === "left" ? "[" : "{"}${short(n.term_min)} TO ${short(n.term_max)}${n.inclusive === "both" || n.inclusive === "right" ? "]" : "}"}`;
  } else if (n.quoted) text = `"${short(n.term)}"`;
  else if (n.regex) text = `/${short(n.term)}/`;
  else if (n.similarity !== null && n.similarity !== undefined) text = `${short(n.term)}~${editsOf(n.similarity)}`;
  else text = short(n.term);
  return field === "<implicit>" ? text : `${field}:${text}`;
}

/** The test of one unquoted, non-range term (unescaped, lower-cased). */
function termTest(n: lucene.NodeTerm): TermTest {
  if (n.term.length > MAX_TERM) throw new SearchQueryError(`A search term is ${n.term.length} characters long, over the limit of ${MAX_TERM}`);
  const raw = lucene.term.unescape(n.term).toLowerCase();
  if (n.regex) {
    // Whole word or value, case-insensitive like the rest of the matching.
    const v = validateJavaRegex(`(?i)^(?:${n.term})$`);
    if (!v.ok) throw new SearchQueryError(`Invalid regular expression /${n.term.slice(0, 100)}/: ${v.message}`);
    return { kind: "regex", regex: v.regex };
  }
  if (n.similarity !== null && n.similarity !== undefined) return { kind: "fuzzy", value: raw, max: editsOf(n.similarity) };
  // Words hold letters and digits only, so an escaped \* or \? could never match one: any * or ? is a wildcard.
  if (/[*?]/.test(raw)) return { kind: "glob", pattern: raw };
  return { kind: "exact", value: raw };
}

function keyOf(field: FieldKey, t: TermTest): string {
  switch (t.kind) {
    case "regex":
      return `${field}\u0000regex\u0000${t.regex.pattern}`;
    case "fuzzy":
      return `${field}\u0000fuzzy\u0000${t.max}\u0000${t.value}`;
    case "range":
      return `${field}\u0000range\u0000${t.inclusive}\u0000${t.lo}\u0000${t.hi}`;
    case "phrase":
      return `${field}\u0000phrase\u0000${t.slop}\u0000${t.words.join("\u0000")}`;
    default:
      return `${field}\u0000${t.kind}\u0000${"value" in t ? t.value : t.pattern}`;
  }
}

function fieldPlan(field: string, n: lucene.Node): SearchPlan {
  const fields = field === "<implicit>" ? ["segmentName", "segmentDescription", "segmentId"] : [SEARCH_FIELD_ALIASES[field] ?? field];
  const label = labelOf(n, field);
  const leaves = fields.map((f): LeafPlan => {
    const text = TEXT_FIELDS[f];
    const keyword = (KEYWORD_FIELDS as readonly string[]).includes(f) ? (f as KeywordField) : undefined;
    const key: FieldKey | undefined = text ?? keyword;
    if (key === undefined) throw new SearchQueryError(`Unknown search field '${f.slice(0, 64)}': use one of ${SEARCH_FIELDS.join(", ")}`);
    let test: TermTest;
    if ("term_min" in n) {
      test = { kind: "range", lo: lucene.term.unescape(n.term_min).toLowerCase(), hi: lucene.term.unescape(n.term_max).toLowerCase(), inclusive: n.inclusive };
    } else if (n.quoted) {
      const phrase = lucene.term.unescape(n.term);
      test = text !== undefined
        ? { kind: "phrase", words: words(phrase), slop: (n as { proximity?: number | null }).proximity ?? 0 }
        : { kind: "value", value: phrase.toLowerCase() };
    } else test = termTest(n);
    return { kind: "leaf", field: key, test, key: keyOf(key, test), label };
  });
  return leaves.length === 1 ? leaves[0]! : { kind: "bool", must: [], should: leaves, not: [], negate: false };
}

interface Clause {
  plan: SearchPlan;
  occur: Occur;
}

/** How a clause takes part in its group, as Lucene's classic parser reads it. */
export type Occur = "must" | "should" | "not";

function occurOf(n: Node, fallback: Occur): Occur {
  const prefix = "prefix" in n ? (n as { prefix?: string }).prefix : undefined;
  return prefix === "+" ? "must" : prefix === "-" || prefix === "!" ? "not" : fallback;
}

function compileNode(n: Node, inheritedField: string): SearchPlan {
  if ("left" in n && n.left !== undefined) {
    const field = "field" in n && typeof n.field === "string" ? n.field : inheritedField;
    const clauses = chainClauses(n as lucene.AST).map((c) => ({ plan: compileNode(c.node, field), occur: c.occur }));
    const start = (n as { start?: string }).start;
    const pick = (o: Clause["occur"]) => clauses.filter((c) => c.occur === o).map((c) => c.plan);
    return { kind: "bool", must: pick("must"), should: pick("should"), not: pick("not"), negate: start === "NOT" || start === "!" };
  }
  const term = n as lucene.Node;
  const field = term.field === undefined || term.field === "<implicit>" ? inheritedField : term.field;
  return fieldPlan(field, term);
}

/**
 * A chain `x0 op1 x1 op2 x2 …` (the parser nests it to the right) as Lucene's classic parser reads
 * it: AND makes both neighbours required, NOT (and AND NOT, OR NOT) prohibits its right side, OR
 * and no operator leave a clause optional; `+`, `-` and `!` on a clause decide for it.
 */
export function chainClauses(ast: lucene.AST): Array<{ node: Node; occur: Occur }> {
  const items: Node[] = [];
  const ops: string[] = [];
  let node: lucene.AST = ast;
  for (;;) {
    items.push(node.left);
    const op = (node as { operator?: string }).operator;
    const right = (node as { right?: Node }).right;
    if (op === undefined || right === undefined) break;
    ops.push(op);
    const continues = "left" in right && right.left !== undefined && !(right as { parenthesized?: boolean }).parenthesized
      && (right as { field?: string }).field === undefined && (right as { start?: string }).start === undefined;
    if (!continues) {
      items.push(right);
      break;
    }
    node = right as lucene.AST;
  }
  const occurs: Occur[] = items.map(() => "should");
  ops.forEach((op, k) => {
    if (op === "AND" || op === "&&") {
      occurs[k] = occurs[k] === "not" ? "not" : "must";
      occurs[k + 1] = "must";
    } else if (op === "AND NOT" || op === "&& NOT") {
      occurs[k] = occurs[k] === "not" ? "not" : "must";
      occurs[k + 1] = "not";
    } else if (op === "NOT" || op === "OR NOT" || op === "|| NOT" || op === "!") {
      occurs[k + 1] = "not";
    }
  });
  return items.map((n, k) => ({ node: n, occur: occurOf(n, occurs[k]!) }));
}

/** `s` → its plan; undefined, blank or `*` match everything. Throws SearchQueryError with a message for the user. */
export function compileSearch(s: string | undefined): SearchPlan {
  if (s === undefined || s.trim() === "" || s.trim() === "*") return { kind: "all" };
  if (s.length > MAX_SEARCH_QUERY) throw new SearchQueryError(`The search query is ${s.length} characters long, over the limit of ${MAX_SEARCH_QUERY}`);
  if (nestingDepth(s) > MAX_SEARCH_DEPTH) throw new SearchQueryError(`The search query nests parentheses deeper than the limit of ${MAX_SEARCH_DEPTH}`);
  let ast: lucene.AST;
  try {
    ast = lucene.parse(fuzzyDistances(s));
  } catch (err) {
    throw new SearchQueryError(`Invalid search query: ${String((err as Error).message).slice(0, 200)}`);
  }
  return compileNode(ast, "<implicit>");
}
