/**
 * The builder's round trip over real PQL (issue #29): every expression of the
 * PQL package's worked examples, of the benchmark corpus and of the shapes
 * Segment Builder writes, and ASTs from the PQL package's generator, is read
 * into rules and written back to the same tree ("same AST" = `astEqual`,
 * positions ignored; equivalently the same canonical `format` text). Builder
 * shapes must come back as rules only, with no read-only block.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import fc from "fast-check";
import ts from "typescript";
import type { Query } from "@segmentd/pql";
import { astEqual, format, parse } from "@segmentd/pql";
import { PQL_CORPUS } from "../../../bench/corpus/pql-corpus.js";
import { queryArbitrary } from "../../pql/test/support/ast-arbitrary.js";
import { withIgnoreYear } from "../src/editor/ignore-year.js";
import { normalize, pqlToRules, rulesToPql } from "../src/visual/index.js";
import { queryOf } from "../src/visual/build.js";
import { readQuery } from "../src/visual/from-pql.js";

/** The query strings of examples.test.ts's `examples` table (its second column), read with the TypeScript parser. */
function workedExamples(): string[] {
  const file = new URL("../../pql/test/examples.test.ts", import.meta.url);
  const src = ts.createSourceFile("examples.test.ts", readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && node.name.getText(src) === "examples" && node.initializer && ts.isArrayLiteralExpression(node.initializer)) {
      for (const row of node.initializer.elements) {
        const query = ts.isArrayLiteralExpression(row) ? row.elements[1] : undefined;
        if (query && ts.isStringLiteralLike(query)) out.push(query.text);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(src);
  return out;
}

const SEGMENT = "9a1c1b7e-0000-4000-8000-000000000001";

/** Shapes Segment Builder (and this tool's editor helpers) write; the rule kinds. */
const BUILDER_FORMS: readonly string[] = [
  'homeAddress.countryCode = "US"',
  'homeAddress.countryCode != "FR"',
  'homeAddress.countryCode.equals("us", false)',
  'person.gender.notEqualTo("male", false)',
  'person.name.firstName.startsWith("jo", false)',
  'personalEmail.address.contains("@example.com")',
  'personalEmail.address.doesNotContain("test", false)',
  'personalEmail.address.endsWith(".org")',
  'personalEmail.address.doesNotEndWith(".edu")',
  'personalEmail.address.doesNotStartWith("admin")',
  'homeAddress.countryCode in ["US", "CA", "MX"]',
  'homeAddress.countryCode notIn ["FR"]',
  "person.age >= 18 and person.age <= 65",
  "loyalty.points > 1000.5",
  "person.age < 30",
  "person.age = 40",
  "person.isVip = true",
  "person.isVip = false",
  "mobilePhone.number.isNotNull()",
  "workAddress.isNull()",
  "person.birthDate occurs between date(1980, 1, 1) and date(1989, 12, 31)",
  "person.birthDate occurs on date(1990, 5, 12)",
  "_acme.lastVisit occurs <= 7 days before now",
  "_acme.lastVisit occurs <= 12 hours before now",
  "_acme.renewal occurs <= 2 weeks after now",
  "_acme.lastVisit occurs this month",
  "_acme.lastVisit occurs today",
  "_acme.lastVisit occurs last week",
  "_acme.lastVisit occurs before date(2024, 1, 1)",
  "_acme.lastVisit occurs after yesterday",
  "_acme.lastVisit occurs > 90 days before now",
  "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()",
  withIgnoreYear("", "person.birthDate"),
  withIgnoreYear('homeAddress.countryCode = "US" and person.age > 21', "loyalty.joinDate"),
  'person.favoriteColors.includes("teal")',
  'person.favoriteColors.intersects(["teal", "red"])',
  'person.favoriteColors.supersetOf(["teal", "red"])',
  "_acme.scores.subsetOf([3, 4, 9, 10])",
  'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 3',
  'xEvent[eventType = "commerce.purchases"].count() > 0',
  'xEvent[eventType = "commerce.checkouts" and timestamp occurs <= 24 hours before now].count() <= 1',
  'xEvent[eventType = "commerce.purchases" and commerce.order.priceTotal > 100 and timestamp occurs between date(2024, 1, 1) and date(2024, 3, 31)].count() = 2',
  'xEvent[eventType in ["commerce.purchases", "commerce.checkouts"] and timestamp occurs <= 10 minutes before now].count() >= 1',
  'xEvent[eventType.equals("web.webpagedetails.pageViews", false) and web.webPageDetails.name.contains("pricing")].count() >= 5',
  'chain(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.purchases", false)) WHEN(<= 30 days before now) COUNT(2)])',
  'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.checkouts", false)) WHEN(< 24 hours before now)])',
  'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.purchases", false)) WHEN(today) COUNT(2)])',
  'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.productListAdds"), B: WHAT(eventType = "commerce.purchases") WHEN(< 24 hours before now)])',
  'chain(xEvent, timestamp, [A: WHAT(eventType = "web.webpagedetails.pageViews"), B: WHAT(eventType = "commerce.productListAdds"), C: WHAT(eventType = "commerce.purchases") WHEN(<= 7 days before now)])',
  "chain(xEvent, timestamp, [A: WHAT(true) WHERE(commerce.order.priceTotal > 100)])",
  `inSegment("${SEGMENT}")`,
  `not inSegment("${SEGMENT}")`,
  'homeAddress.countryCode = "US" and not (person.age < 18 or person.isVip = false)',
  `(homeAddress.countryCode = "US" or homeAddress.countryCode = "CA") and xEvent[eventType = "commerce.purchases"].count() >= 1 and not inSegment("${SEGMENT}")`,
  'not (xEvent[eventType = "commerce.purchases" and timestamp occurs <= 90 days before now].count() >= 1)',
  'person.age >= 21 and (homeAddress.countryCode = "US" or (homeAddress.countryCode = "CA" and person.age >= 19))',
  'not (homeAddress.countryCode = "US") and not (homeAddress.countryCode = "CA")',
];

interface Outcome {
  text: string;
  full: boolean;
}

/** Reads and writes one expression; asserts exactness, the canonical form and a stable second trip. */
function roundTrip(text: string): Outcome {
  const original = parse(text);
  const r = pqlToRules(text);
  assert.ok(r.ok, `did not read: ${text}`);
  const written = rulesToPql(r.model);
  assert.equal(format(parse(written)), format(original), `not exact: ${text}`);
  assert.ok(astEqual(parse(written), original), `not the same tree: ${text}`);
  const unchecked = queryOf(readQuery(original).model);
  assert.ok(unchecked && astEqual(unchecked, original), `needed the whole-expression fallback: ${text}`);
  assert.deepEqual(normalize(r.model), r.model, `not in canonical form: ${text}`);
  const again = pqlToRules(written, { previous: r.model });
  assert.deepEqual(again.ok && again.model, r.model, `a second trip changed the model: ${text}`);
  return { text, full: r.blocks === 0 };
}

function summary(name: string, outcomes: Outcome[]): string {
  const full = outcomes.filter((o) => o.full).length;
  return `${name}: ${full} of ${outcomes.length} fully represented, ${outcomes.length - full} with read-only blocks, all exact`;
}

describe("round trip over the PQL corpora", () => {
  it("the PQL package's worked examples (pql.md §7)", (t) => {
    const examples = workedExamples();
    assert.ok(examples.length >= 60, `found ${examples.length} examples`);
    const outcomes = examples.map(roundTrip);
    t.diagnostic(summary("worked examples", outcomes));
    // The examples of the builder's own kinds (§7.2 comparisons, §7.5 string predicates, inSegment) are rules.
    for (const text of ["person.birthMonth = 12", 'personalEmail.address.endsWith(".org")', `inSegment("${SEGMENT}")`]) {
      assert.ok(outcomes.find((o) => o.text === text)?.full, `${text} is rules`);
    }
  });

  it("the benchmark corpus (PQL_CORPUS)", (t) => {
    const outcomes = PQL_CORPUS.map(roundTrip);
    t.diagnostic(summary("PQL_CORPUS", outcomes));
    const full = outcomes.filter((o) => o.full).length;
    assert.ok(full / outcomes.length >= 0.4, `only ${full} of ${outcomes.length} fully represented`);
  });

  it("the shapes Segment Builder writes: all fully represented", (t) => {
    const outcomes = BUILDER_FORMS.map(roundTrip);
    t.diagnostic(summary("builder forms", outcomes));
    assert.deepEqual(
      outcomes.filter((o) => !o.full).map((o) => o.text),
      [],
    );
  });

  it("reads each builder form as the rule kind it is", () => {
    const kindsOf = (text: string) => {
      const r = pqlToRules(text);
      assert.ok(r.ok, text);
      return r.model.root.children.map((c) => (c.kind === "condition" ? `${c.kind}:${c.operator}` : c.kind));
    };
    assert.deepEqual(kindsOf("person.age >= 18 and person.age <= 65"), ["condition:between"]);
    assert.deepEqual(kindsOf(withIgnoreYear("person.age > 21", "person.birthDate")), ["condition:greaterThan", "condition:ignoreYear"]);
    assert.deepEqual(kindsOf("_acme.lastVisit occurs <= 7 days before now"), ["condition:inLast"]);
    assert.deepEqual(kindsOf("_acme.lastVisit occurs > 90 days before now"), ["condition:relative"]);
    assert.deepEqual(kindsOf('xEvent[eventType = "a"].count() >= 1 and chain(xEvent, timestamp, [A: WHAT(true)])'), ["event", "sequence"]);
    assert.deepEqual(kindsOf(`not inSegment("${SEGMENT}") and not (a = 1)`), ["segment", "group"]);
  });
});

describe("round trip over generated ASTs", () => {
  it("is exact for 1,000 random well-formed queries, read as text and as trees", () => {
    fc.assert(
      fc.property(queryArbitrary({ maxDepth: 4 }), (q: Query) => {
        const fromTree = pqlToRules(q);
        assert.ok(fromTree.ok, "reads the tree");
        assert.ok(astEqual(parse(rulesToPql(fromTree.model)), q), `not exact: ${format(q)}`);
        const fromText = pqlToRules(format(q));
        assert.deepEqual(fromText.ok && fromText.model, fromTree.model, "text and tree read alike");
        const unchecked = queryOf(readQuery(q).model);
        assert.ok(unchecked && astEqual(unchecked, q), `needed the whole-expression fallback: ${format(q)}`);
        assert.deepEqual(normalize(fromTree.model), fromTree.model, "canonical form");
      }),
      { numRuns: 1000 },
    );
  });
});
