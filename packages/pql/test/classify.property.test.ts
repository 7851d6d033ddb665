/**
 * Properties of classify() (issue #3 point 2): it never throws on anything
 * check() accepts — random trees from the shared AST generator and realistic
 * segment definitions built from templates — it is stable under format(), and
 * its flags, query type and reasons always agree with each other.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { classify, type Classification, type ClassifyOptions } from "../src/classify.js";
import { check } from "../src/check.js";
import { format } from "../src/format.js";
import { queryArbitrary } from "./support/ast-arbitrary.js";

const DEFINITIONS: Record<string, string> = {
  p1: "person.age > 30",
  p2: 'inSegment("p1") and homeAddress.countryCode = "US"',
  e1: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(today)])',
  c1: 'inSegment("c2")',
  c2: 'inSegment("c1")',
};
const OPTIONS: ClassifyOptions = { resolveSegment: (id) => DEFINITIONS[id] };

/** The invariants that tie the fields of a classification together. */
function assertConsistent(c: Classification, text: string): void {
  assert.equal(c.batch, true, text);
  if (c.continuous) assert.equal(c.synchronous, true, `streaming implies edge: ${text}`);
  assert.equal(c.queryType === null, !c.synchronous, `queryType is null exactly when not edge: ${text}`);
  assert.equal(c.reasons.length === 0, c.synchronous && c.continuous, `reasons are empty exactly when both apply: ${text}`);
  for (const e of c.events) assert.ok(e.windowMs === null || e.windowMs >= 0, text);
}

/** A keyword in a random case: keywords are case-insensitive. */
const kw = (word: string) => fc.constantFrom(word, word.toUpperCase());

const windowArb = fc.constantFrom(
  "today",
  "yesterday",
  "this hour",
  "last week",
  "this month",
  "< 23 hours before now",
  "< 24 hours before now",
  "<= 24 hours before now",
  "<= 2 days before now",
  "> 1 hours before now",
  "between today and tomorrow",
  "between date(2024, 1, 1) and date(2024, 2, 1)",
  "after now",
  "before today",
);
const eventPredicateArb = fc.constantFrom('eventType = "commerce.purchases"', 'web.webPageDetails.name = "home"', "commerce.order.priceTotal > 50", "true");
const profileAtomArb = fc.constantFrom(
  "person.age > 30",
  'homeAddress.countryCode = "US"',
  "orders.count() > 2",
  'address.last = "Smith"',
  "xEventCount > 3",
  "person.birthDate occurs this month",
  "person.birthDate.getMonth() = currentMonth()",
  "exists O from orders : O.price > 100",
  'inSegment("p1")',
  'inSegment("p2")',
  'inSegment("e1")',
  'inSegment("c1")',
  'inSegment("missing")',
);

const chainArb = fc
  .tuple(
    kw("chain"),
    fc.array(fc.tuple(eventPredicateArb, fc.option(windowArb, { nil: undefined }), fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined })), {
      minLength: 1,
      maxLength: 3,
    }),
  )
  .map(([c, steps]) => {
    const body = steps.map(([what, w, n], i) => `S${i}: WHAT(${what})${n ? ` COUNT(${n})` : ""}${w ? ` WHEN(${w})` : ""}`).join(", ");
    return `${c}(xEvent, timestamp, [${body}])`;
  });

const eventAtomArb = fc.oneof(
  chainArb,
  fc.tuple(kw("select"), kw("from"), kw("where"), eventPredicateArb, windowArb).map(([s, f, w, p, t]) => `(${s} X ${f} xEvent ${w} X.${p} and X.timestamp occurs ${t})`),
  fc.tuple(eventPredicateArb, windowArb, fc.constantFrom("> 0", ">= 3", "= 0", "< 2", "!= 0")).map(([p, t, c]) => `xEvent[${p} and timestamp occurs ${t}].count() ${c}`),
  fc.tuple(eventPredicateArb, windowArb).map(([p, t]) => `xEvent[${p}].exists(timestamp occurs ${t})`),
  fc.tuple(fc.oneof(kw("exists"), kw("forall")), kw("from"), eventPredicateArb, windowArb).map(
    ([q, f, p, t]) => `(${q} E ${f} xEvent : E.${p} and E.timestamp occurs ${t})`,
  ),
  fc.tuple(windowArb).map(([t]) => `(sum E.commerce.order.priceTotal over E from xEvent where E.timestamp occurs ${t}) > 100`),
);

type Tree = { atom: string } | { op: "and" | "or"; left: Tree; right: Tree } | { not: Tree };
const treeArb: fc.Arbitrary<Tree> = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.oneof(eventAtomArb, profileAtomArb).map((atom) => ({ atom })),
    fc.record({ op: fc.constantFrom("and" as const, "or" as const), left: tie("tree"), right: tie("tree") }),
    fc.record({ not: tie("tree") }),
  ),
})).tree;

function render(t: Tree, upper: boolean): string {
  if ("atom" in t) return t.atom;
  if ("not" in t) return `${upper ? "NOT" : "not"} (${render(t.not, upper)})`;
  const op = upper ? t.op.toUpperCase() : t.op;
  return `(${render(t.left, upper)}) ${op} (${render(t.right, upper)})`;
}

const segmentArb = fc.tuple(treeArb, fc.boolean()).map(([t, upper]) => render(t, upper));

describe("classify: properties", () => {
  it("never throws on random trees, and is stable under format when check accepts the text", () => {
    fc.assert(
      fc.property(queryArbitrary({ maxDepth: 4 }), (q) => {
        // Any tree at all: classify works on trees, it never evaluates anything.
        assertConsistent(classify(q, OPTIONS), "(tree)");
        const text = format(q);
        if (check(text).some((d) => d.severity === "error")) return;
        const c = classify(text, OPTIONS);
        assertConsistent(c, text);
        assert.deepEqual(classify(format(text), OPTIONS), c, text);
      }),
      { numRuns: 400 },
    );
  });

  it("never throws on realistic segment definitions, and is stable under format", () => {
    fc.assert(
      fc.property(segmentArb, (text) => {
        assert.deepEqual(
          check(text).filter((d) => d.severity === "error"),
          [],
          `the template produced a definition check rejects: ${text}`,
        );
        const c = classify(text, OPTIONS);
        assertConsistent(c, text);
        assert.deepEqual(classify(format(text), OPTIONS), c, text);
      }),
      { numRuns: 400 },
    );
  });

  it("adding an ignore-year condition always makes a definition batch-only", () => {
    fc.assert(
      fc.property(segmentArb, (text) => {
        const c = classify(`(${text}) and person.birthDate.getDayOfMonth() = 1`, OPTIONS);
        assert.equal(c.synchronous, false);
        assert.equal(c.continuous, false);
        assert.ok(c.reasons.some((r) => r.includes("'ignore year'")), text);
      }),
      { numRuns: 200 },
    );
  });

  it("negating a chain always removes edge eligibility and marks every step negated", () => {
    fc.assert(
      fc.property(chainArb, (chain) => {
        const c = classify(`not ${chain}`, OPTIONS);
        assert.equal(c.synchronous, false, chain);
        assert.ok(c.events.every((e) => e.negated), chain);
      }),
      { numRuns: 200 },
    );
  });
});
