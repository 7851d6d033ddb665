/**
 * Runs a segment search's plan (segment-search.ts) over a sandbox's index (search-index.ts) under
 * a budget (#37). Each distinct term is matched once, against the distinct words of its field —
 * fuzzy and wildcard terms only against words of a length they can match — and every unit of that
 * work is counted: the cost is bounded by the query and the vocabulary, never by terms × words of
 * every document. Results are bitmaps over the index's slots.
 */
import { SearchBudget } from "./search-budget.js";
import { wordsOf, type SearchIndex, type Vocabulary } from "./search-index.js";
import { REGEX_MAX_STEPS, type LeafPlan, type SearchPlan, type TermTest } from "./segment-search.js";

/** Does `piece` (where `?` is any character) match s at `at`? Adds the characters compared to `work`. */
function pieceAt(piece: string, s: string, at: number, work: { steps: number }): boolean {
  for (let k = 0; k < piece.length; k++) {
    work.steps++;
    const c = piece[k];
    if (c !== "?" && c !== s[at + k]) return false;
  }
  return true;
}

/**
 * The work of a glob match (characters compared) and whether it matched. The pattern is split on
 * `*`: the first piece must match at the start, the last at the end, and each middle piece is
 * taken at its leftmost place after the previous one (which never loses a match). A pattern with
 * one `*` costs at most its length; more pieces cost at most word × pattern.
 */
export function globSteps(pattern: string, s: string): { match: boolean; steps: number } {
  const work = { steps: 1 };
  const pieces = pattern.split("*");
  if (pieces.length === 1) return { match: s.length === pattern.length && pieceAt(pattern, s, 0, work), steps: work.steps };
  const first = pieces[0]!, last = pieces[pieces.length - 1]!;
  if (s.length < pattern.length - (pieces.length - 1)) return { match: false, steps: work.steps };
  if (!pieceAt(first, s, 0, work) || !pieceAt(last, s, s.length - last.length, work)) return { match: false, steps: work.steps };
  let pos = first.length;
  const end = s.length - last.length;
  for (const piece of pieces.slice(1, -1)) {
    let found = -1;
    for (let at = pos; at + piece.length <= end; at++) {
      if (pieceAt(piece, s, at, work)) {
        found = at;
        break;
      }
    }
    if (found < 0) return { match: false, steps: work.steps };
    pos = found + piece.length;
  }
  return { match: true, steps: work.steps };
}

/** `*` and `?` over a word, without backtracking blow-up: O(word × pattern) at worst. */
export function globMatch(pattern: string, s: string): boolean {
  return globSteps(pattern, s).match;
}

/**
 * Is the Levenshtein distance of a and b at most `max`? Only the band of cells within `max` of the
 * diagonal can stay within it, so the work (the returned steps) is at most a × (2 max + 1).
 */
let rowA = new Int32Array(64);
let rowB = new Int32Array(64);

export function editSteps(a: string, b: string, max: number): { match: boolean; steps: number } {
  if (Math.abs(a.length - b.length) > max) return { match: false, steps: 1 };
  // Two rows reused across calls: a term is tested against every word of the vocabulary.
  if (rowA.length < b.length + 2) {
    rowA = new Int32Array(b.length + 2);
    rowB = new Int32Array(b.length + 2);
  }
  let prev = rowA, row = rowB;
  const over = max + 1;
  for (let j = 0; j <= b.length + 1; j++) prev[j] = j <= max ? j : over;
  let steps = b.length + 1;
  for (let i = 1; i <= a.length; i++) {
    const lo = Math.max(1, i - max), hi = Math.min(b.length, i + max);
    // Cells outside the band are `over`: set the two the band's neighbours read.
    row[lo - 1] = lo === 1 && i <= max ? i : over;
    row[hi + 1] = over;
    let best = row[lo - 1]!;
    const ca = a.charCodeAt(i - 1);
    for (let j = lo; j <= hi; j++) {
      const v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (ca === b.charCodeAt(j - 1) ? 0 : 1));
      row[j] = v > over ? over : v;
      if (v < best) best = v;
    }
    steps += hi - lo + 2;
    if (best > max) return { match: false, steps };
    const t = prev;
    prev = row;
    row = t;
  }
  return { match: prev[b.length]! <= max, steps };
}

/** Levenshtein distance of a and b at most `max`. */
export function withinEdits(a: string, b: string, max: number): boolean {
  return editSteps(a, b, max).match;
}

/** The lengths of the vocabulary's words in [min, max], shortest first. */
function lengthsIn(v: Vocabulary, min: number, max: number): number[] {
  return v.lengths().filter((n) => n >= min && n <= max).sort((x, y) => x - y);
}

function inRange(t: Extract<TermTest, { kind: "range" }>, w: string): boolean {
  const lowOk = t.lo === "*" || (t.inclusive === "both" || t.inclusive === "left" ? w >= t.lo : w > t.lo);
  const highOk = t.hi === "*" || (t.inclusive === "both" || t.inclusive === "right" ? w <= t.hi : w < t.hi);
  return lowOk && highOk;
}

/**
 * Do the words hold the phrase, its words in order with at most `slop` words between them in all?
 * Each next word is looked for only as far as the slop left allows, so the work is bounded by
 * words × phrase × (slop + 1) and by words × phrase.
 */
function phraseSteps(ws: readonly string[], phrase: readonly string[], slop: number): { match: boolean; steps: number } {
  let steps = 1;
  for (let start = 0; start < ws.length; start++) {
    steps++;
    if (ws[start] !== phrase[0]) continue;
    let pos = start, gaps = 0, k = 1;
    for (; k < phrase.length; k++) {
      const last = Math.min(ws.length - 1, pos + 1 + (slop - gaps));
      let next = -1;
      for (let j = pos + 1; j <= last; j++) {
        steps++;
        if (ws[j] === phrase[k]) {
          next = j;
          break;
        }
      }
      if (next < 0) break;
      gaps += next - pos - 1;
      pos = next;
    }
    if (k === phrase.length) return { match: true, steps };
  }
  return { match: false, steps };
}

class Matcher {
  private readonly done = new Map<string, Uint8Array>();

  constructor(private readonly index: SearchIndex, private readonly budget: SearchBudget) {}

  private empty(): Uint8Array {
    return new Uint8Array(this.index.capacity);
  }

  private mark(out: Uint8Array, slots: readonly number[]): number {
    for (const s of slots) out[s] = 1;
    return slots.length;
  }

  async run(plan: SearchPlan): Promise<Uint8Array> {
    if (plan.kind === "all") return this.index.all();
    if (plan.kind === "leaf") {
      const hit = this.done.get(plan.key);
      if (hit !== undefined) return hit;
      this.budget.term = plan.label;
      const bits = await this.leaf(plan);
      this.done.set(plan.key, bits);
      return bits;
    }
    const n = this.index.capacity;
    const must = [];
    for (const p of plan.must) must.push(await this.run(p));
    const not = [];
    for (const p of plan.not) not.push(await this.run(p));
    const should = [];
    if (plan.must.length === 0) for (const p of plan.should) should.push(await this.run(p));
    const out = this.index.all();
    for (let s = 0; s < n; s++) {
      if (out[s] === 0) continue;
      let keep = must.every((b) => b[s] === 1) && !not.some((b) => b[s] === 1);
      if (keep && should.length > 0) keep = should.some((b) => b[s] === 1);
      out[s] = keep !== plan.negate ? 1 : 0;
    }
    if (this.budget.spend(n * (must.length + not.length + should.length + 1))) await this.budget.pause();
    return out;
  }

  /**
   * Test every word of the field whose length is in [min, max] (each once), count the work and
   * yield between slices. An unquoted term never matches an empty keyword (a document without one).
   */
  private async scan(plan: LeafPlan, min: number, max: number, test: (w: string) => { match: boolean; steps: number }): Promise<Uint8Array> {
    const v = this.index.vocab[plan.field];
    const out = this.empty();
    const keyword = plan.field !== "name" && plan.field !== "description";
    for (const n of lengthsIn(v, keyword ? Math.max(1, min) : min, max)) {
      for (const w of v.ofLength(n)) {
        if (!v.has(w)) continue;
        const r = test(w);
        const units = r.steps + (r.match ? this.mark(out, v.postings(w)) : 0);
        if (this.budget.spend(units)) await this.budget.pause();
      }
    }
    return out;
  }

  private async leaf(plan: LeafPlan): Promise<Uint8Array> {
    const v = this.index.vocab[plan.field];
    const t = plan.test;
    const keyword = plan.field !== "name" && plan.field !== "description";
    const ANY = Number.MAX_SAFE_INTEGER;
    switch (t.kind) {
      case "exact":
      case "value": {
        const out = this.empty();
        // An unquoted term never matches an empty keyword; a quoted one is the whole value, empty or not.
        if (t.kind === "exact" && keyword && t.value === "") return out;
        if (this.budget.spend(1 + this.mark(out, v.postings(t.value)))) await this.budget.pause();
        return out;
      }
      case "phrase":
        return this.phrase(plan.field as "name" | "description", t.words, t.slop);
      case "fuzzy":
        return this.scan(plan, t.value.length - t.max, t.value.length + t.max, (w) => editSteps(t.value, w, t.max));
      case "glob": {
        // Every character but `*` stands for one of the word's.
        const fixed = t.pattern.replaceAll("*", "").length;
        return this.scan(plan, fixed, t.pattern.includes("*") ? ANY : fixed, (w) => globSteps(t.pattern, w));
      }
      case "regex":
        return this.scan(plan, 0, ANY, (w) => {
          const match = t.regex.test(w);
          const steps = t.regex.lastSteps;
          // The engine gave up on this word: its answer would be a guess, so the search is refused.
          if (steps > REGEX_MAX_STEPS) throw this.budget.tooCostly(`more than ${REGEX_MAX_STEPS} units of work on one word, the limit of one regular expression match`);
          return { match, steps: steps + 1 };
        });
      case "range":
        return this.scan(plan, 0, ANY, (w) => ({ match: inRange(t, w), steps: 1 }));
    }
  }

  /** Documents holding every word of the phrase (from the postings), then checked word by word. */
  private async phrase(field: "name" | "description", phrase: string[], slop: number): Promise<Uint8Array> {
    if (phrase.length === 0) return this.index.all();
    const v = this.index.vocab[field];
    const lists = [...new Set(phrase)].map((w) => v.postings(w)).sort((a, b) => a.length - b.length);
    const out = this.empty();
    let candidates = lists[0]!;
    for (const other of lists.slice(1)) {
      const has = new Set(other);
      candidates = candidates.filter((s) => has.has(s));
      if (this.budget.spend(other.length + candidates.length)) await this.budget.pause();
    }
    for (const slot of candidates) {
      const d = this.index.doc(slot)!;
      const r = phraseSteps(wordsOf(d, field), phrase, slop);
      // Recomputing the words reads the field once.
      r.steps += field === "name" ? d.doc.name.length : d.doc.description.length;
      if (r.match) out[slot] = 1;
      if (this.budget.spend(r.steps)) await this.budget.pause();
    }
    return out;
  }
}

/** The ids of the documents matching `plan`; throws SearchTooCostlyError or SearchDeadlineError past the budget. */
export async function runSearch(plan: SearchPlan, index: SearchIndex, budget: SearchBudget): Promise<Set<string>> {
  const bits = await new Matcher(index, budget).run(plan);
  const out = new Set<string>();
  for (let s = 0; s < bits.length; s++) if (bits[s] === 1) out.add(index.doc(s)!.doc.id);
  return out;
}
