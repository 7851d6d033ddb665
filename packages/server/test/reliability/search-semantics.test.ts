/**
 * #37: the indexed, budgeted segment search answers every query as the matcher before it did.
 * Random documents and hostile-but-valid queries (lucene-arbitrary.ts); for each, the new matcher
 * (index, vocabulary scans, bitmaps) and the old one (a predicate per document, kept in
 * search-reference.ts) agree on the ids matched, or refuse with the same message. Also: every
 * generated query parses, so the fuzz suite's queries reach the matcher.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { SearchBudget } from "../../src/services/search-budget.js";
import { SearchIndex } from "../../src/services/search-index.js";
import { runSearch } from "../../src/services/search-match.js";
import { compileSearch, SearchQueryError, type SearchDoc } from "../../src/services/segment-search.js";
import { luceneQuery } from "./lucene-arbitrary.js";
import { referenceDoc, referenceSearch } from "./search-reference.js";

const VOCAB = ["red", "car", "cars", "care", "boat", "boats", "qqqa", "qqq", "2024", "gold", "a", "aa", "aaaa", "ab", "abc", "root", "d", "z9"];
const NO_LIMIT = { maxUnits: Number.MAX_SAFE_INTEGER, deadlineMs: 60_000, sliceMs: 8 };

const docArb: fc.Arbitrary<SearchDoc[]> = fc.array(
  fc.tuple(fc.array(fc.constantFrom(...VOCAB), { maxLength: 4 }), fc.array(fc.constantFrom(...VOCAB, "a".repeat(255), "a".repeat(254) + "b"), { maxLength: 12 }), fc.constantFrom(" ", ", ", " - ")),
  { minLength: 1, maxLength: 10 },
).map((ds) => ds.map(([name, description, sep], k) => ({ id: `d-${k}`, namespace: "AEPSegments", name: name.join(sep).toUpperCase(), description: description.join(sep), parentFolderId: "root" })));

function outcome(f: () => string[]): string[] | { error: string } {
  try {
    return f();
  } catch (err) {
    return { error: (err as Error).message };
  }
}

test("the indexed matcher answers as the per-document one did", async () => {
  await fc.assert(fc.asyncProperty(docArb, luceneQuery({ words: VOCAB }), async (docs, s) => {
    const expected = outcome(() => {
      const pred = referenceSearch(s);
      return docs.filter((d) => pred(referenceDoc(d))).map((d) => d.id);
    });
    let actual: string[] | { error: string };
    try {
      const plan = compileSearch(s);
      const index = new SearchIndex();
      await index.sync(docs, () => false, async () => {});
      const found = await runSearch(plan, index, new SearchBudget(NO_LIMIT));
      actual = docs.filter((d) => found.has(d.id)).map((d) => d.id);
    } catch (err) {
      if (!(err instanceof SearchQueryError)) throw err;
      actual = { error: err.message };
    }
    assert.deepEqual(actual, expected, s);
  }), { numRuns: Number(process.env.SEGMENTD_SEARCH_RUNS ?? 300) });
});

test("a synced index answers as a fresh one after documents change, go and come back", async () => {
  await fc.assert(fc.asyncProperty(docArb, docArb, luceneQuery({ words: VOCAB }), async (before, after, s) => {
    let plan;
    try {
      plan = compileSearch(s);
    } catch {
      return;
    }
    const synced = new SearchIndex();
    await synced.sync(before, () => false, async () => {});
    // `after` reuses ids d-0…: some documents change, some disappear, some are new.
    await synced.sync(after, () => false, async () => {});
    const fresh = new SearchIndex();
    await fresh.sync(after, () => false, async () => {});
    const a = await runSearch(plan, synced, new SearchBudget(NO_LIMIT));
    const b = await runSearch(plan, fresh, new SearchBudget(NO_LIMIT));
    assert.deepEqual([...a].sort(), [...b].sort(), s);
  }), { numRuns: 150 });
});

test("every generated query parses", () => {
  fc.assert(fc.property(luceneQuery(), (s) => {
    try {
      compileSearch(s);
    } catch (err) {
      assert.ok(!(err as Error).message.startsWith("Invalid search query"), `${s}: ${(err as Error).message}`);
    }
  }), { numRuns: 500 });
});
