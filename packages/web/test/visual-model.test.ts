/**
 * The visual builder's rule model (issue #29), rule kind by rule kind: the PQL
 * each rule writes, that the PQL reads back as the same rule, and that it
 * means what the rule says (evaluated on a small profile with events). Also
 * groups, blocks, ids, normalisation and bad input.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { astEqual, evaluatePredicate, parse } from "@segmentd/pql";
import type { EvalContext } from "@segmentd/pql";
import type { ConditionRule, Group, Operand, Rule, SequenceStep, VisualModel } from "../src/visual/index.js";
import {
  COUNT_OPERATORS,
  MAX_GROUP_DEPTH,
  ModelError,
  OPERATORS,
  OPERATORS_BY_TYPE,
  freshId,
  normalize,
  pqlToRules,
  rulesToPql,
  tryRulesToPql,
  validateModel,
  valueTypeOf,
} from "../src/visual/index.js";

let seq = 0;
const id = () => `t${++seq}`;
const s = (value: string): Operand => ({ kind: "string", value });
const int = (value: number): Operand => ({ kind: "integer", value });
const dbl = (value: number): Operand => ({ kind: "double", value });
const day = (year: number, month: number, d: number): Operand => ({ kind: "date", year, month, day: d });

function cond(field: string, operator: ConditionRule["operator"], operands: Operand[] = [], ignoreCase?: boolean): ConditionRule {
  const c: ConditionRule = { kind: "condition", id: id(), field, operator, operands };
  if (ignoreCase !== undefined) c.ignoreCase = ignoreCase;
  return c;
}
function group(combinator: "and" | "or", children: Rule[], mode: "include" | "exclude" = "include"): Group {
  return { kind: "group", id: id(), mode, combinator, children };
}
function model(...children: Rule[]): VisualModel {
  return { version: 1, params: [], root: group("and", children) };
}
function anyOf(...children: Rule[]): VisualModel {
  return { version: 1, params: [], root: group("or", children) };
}
function events(filter: Rule[], op: "=" | "!=" | "<" | "<=" | ">" | ">=", value: number): Rule {
  return { kind: "event", id: id(), filter: group("and", filter), count: { op, value } };
}
function step(label: string, what: Rule[], extra: Partial<SequenceStep> = {}): SequenceStep {
  return { id: id(), label, what: group("and", what), ...extra };
}

/** A deep copy without ids (ids are the UI's, not the PQL's). */
function noIds<T>(x: T): T {
  return JSON.parse(JSON.stringify(x, (k, v) => (k === "id" ? undefined : v))) as T;
}

function read(text: string): VisualModel {
  const r = pqlToRules(text);
  assert.ok(r.ok, `did not read: ${text}`);
  return r.model;
}

/** The rule writes `expected`, which reads back as the same (normalised) rules. */
function writes(m: VisualModel, expected: string): void {
  const text = rulesToPql(m);
  assert.equal(text, expected);
  assert.deepEqual(noIds(read(text)), noIds(normalize(m)));
}

const NOW = "2024-12-05T12:00:00Z";
const profile = {
  person: {
    age: 34,
    isVip: true,
    birthDate: "1990-12-05",
    name: { firstName: "Joanna" },
    favoriteColors: ["teal", "orange"],
    lastVisit: "2024-12-02T08:00:00Z",
  },
  homeAddress: { countryCode: "CA", city: "Montreal" },
  personalEmail: { address: "joanna.smith@example.org" },
  loyalty: { points: 1250.5 },
  segmentMembership: { ups: { "seg-gold": { status: "realized" }, "seg-old": { status: "exited" } } },
};
const purchase = (timestamp: string, total = 50) => ({ eventType: "commerce.purchases", timestamp, commerce: { order: { priceTotal: total } } });
const view = (timestamp: string) => ({ eventType: "web.webpagedetails.pageViews", timestamp });

function holds(m: VisualModel, evts: Record<string, unknown>[] = []): boolean {
  const ctx: EvalContext = { profile, events: evts, now: NOW } as unknown as EvalContext;
  return evaluatePredicate(rulesToPql(m), ctx);
}

describe("profile attribute conditions", () => {
  it("write text operators, with the case flag when ignoring case", () => {
    writes(model(cond("homeAddress.countryCode", "equals", [s("US")])), 'homeAddress.countryCode = "US"');
    writes(model(cond("homeAddress.countryCode", "notEquals", [s("FR")])), 'homeAddress.countryCode != "FR"');
    writes(model(cond("person.gender", "equals", [s("female")], true)), 'person.gender.equals("female", false)');
    writes(model(cond("person.gender", "notEquals", [s("male")], true)), 'person.gender.notEqualTo("male", false)');
    writes(model(cond("personalEmail.address", "contains", [s("smith")])), 'personalEmail.address.contains("smith")');
    writes(model(cond("personalEmail.address", "doesNotContain", [s("test")], true)), 'personalEmail.address.doesNotContain("test", false)');
    writes(model(cond("person.name.firstName", "startsWith", [s("jo")], true)), 'person.name.firstName.startsWith("jo", false)');
    writes(model(cond("personalEmail.address", "doesNotStartWith", [s("admin")])), 'personalEmail.address.doesNotStartWith("admin")');
    writes(model(cond("personalEmail.address", "endsWith", [s(".org")])), 'personalEmail.address.endsWith(".org")');
    writes(model(cond("personalEmail.address", "doesNotEndWith", [s(".edu")])), 'personalEmail.address.doesNotEndWith(".edu")');
    writes(model(cond("homeAddress.city", "in", [s("Oslo"), s("Lima")])), 'homeAddress.city in ["Oslo", "Lima"]');
    writes(model(cond("homeAddress.city", "notIn", [s("Oslo")])), 'homeAddress.city notIn ["Oslo"]');
    writes(model(cond("homeAddress.city", "like", [s("Mon%")])), 'homeAddress.city like "Mon%"');
    writes(model(cond("person.name.firstName", "matches", [s("(?i)^jo")])), 'person.name.firstName.matches("(?i)^jo")');
    writes(model(cond("person.nickname", "exists")), "person.nickname.isNotNull()");
    writes(model(cond("workAddress", "notExists")), "workAddress.isNull()");
    writes(model(cond("note", "equals", [s('say "hi"\n')])), 'note = "say \\"hi\\"\\n"');
  });
  it("mean what they say", () => {
    assert.equal(holds(model(cond("personalEmail.address", "contains", [s("SMITH")], true))), true);
    assert.equal(holds(model(cond("personalEmail.address", "contains", [s("SMITH")]))), false);
    assert.equal(holds(model(cond("homeAddress.city", "in", [s("Montreal"), s("Lima")]))), true);
    assert.equal(holds(model(cond("homeAddress.city", "notIn", [s("Montreal")]))), false);
    assert.equal(holds(model(cond("person.name.firstName", "startsWith", [s("JO")], true))), true);
    assert.equal(holds(model(cond("person.nickname", "exists"))), false);
    assert.equal(holds(model(cond("person.nickname", "notExists"))), true);
  });
  it("write number and boolean operators; between is two terms", () => {
    writes(model(cond("person.age", "equals", [int(34)])), "person.age = 34");
    writes(model(cond("loyalty.points", "greaterThan", [dbl(1000)])), "loyalty.points > 1000.0");
    writes(model(cond("person.age", "atLeast", [int(-5)])), "person.age >= -5");
    writes(model(cond("person.age", "lessThan", [int(18)])), "person.age < 18");
    writes(model(cond("person.age", "atMost", [int(65)])), "person.age <= 65");
    writes(model(cond("person.age", "notEquals", [int(3)])), "person.age != 3");
    writes(model(cond("person.age", "between", [int(18), int(65)])), "person.age >= 18 and person.age <= 65");
    writes(model(cond("person.birthMonth", "notIn", [int(1), int(2)])), "person.birthMonth notIn [1, 2]");
    writes(model(cond("person.isVip", "isTrue")), "person.isVip = true");
    writes(model(cond("person.isVip", "isFalse")), "person.isVip = false");
  });
  it("number and boolean operators mean what they say", () => {
    assert.equal(holds(model(cond("person.age", "between", [int(30), int(40)]))), true);
    assert.equal(holds(model(cond("person.age", "between", [int(35), int(40)]))), false);
    assert.equal(holds(model(cond("person.age", "between", [int(20), int(34)]))), true, "both ends are inclusive");
    assert.equal(holds(model(cond("loyalty.points", "atLeast", [dbl(1250.5)]))), true);
    assert.equal(holds(model(cond("person.isVip", "isTrue"))), true);
    assert.equal(holds(model(cond("person.isVip", "isFalse"))), false);
  });
  it("write date operators with occurs, date(), relative windows and keywords", () => {
    const f = "person.lastVisit";
    writes(model(cond(f, "inLast", [{ kind: "duration", amount: 7, unit: "day" }])), `${f} occurs <= 7 days before now`);
    writes(model(cond(f, "inLast", [{ kind: "duration", amount: 1, unit: "hour" }])), `${f} occurs <= 1 hour before now`);
    writes(model(cond(f, "inNext", [{ kind: "duration", amount: 2, unit: "week" }])), `${f} occurs <= 2 weeks after now`);
    writes(model(cond(f, "dateOn", [{ kind: "time", word: "today" }])), `${f} occurs today`);
    writes(model(cond(f, "dateOn", [{ kind: "period", which: "this", unit: "month" }])), `${f} occurs this month`);
    writes(model(cond(f, "dateOn", [day(2024, 12, 2)])), `${f} occurs on date(2024, 12, 2)`);
    writes(model(cond(f, "dateBefore", [day(2024, 1, 1)])), `${f} occurs before date(2024, 1, 1)`);
    writes(model(cond(f, "dateAfter", [{ kind: "time", word: "yesterday" }])), `${f} occurs after yesterday`);
    writes(
      model(cond("person.birthDate", "dateBetween", [day(1980, 1, 1), day(1990, 12, 31)])),
      "person.birthDate occurs between date(1980, 1, 1) and date(1990, 12, 31)",
    );
    const offset: Operand = { kind: "offset", cmp: ">", amount: 3, unit: "month", direction: "before" };
    writes(model(cond(f, "relative", [offset, { kind: "time", word: "today" }])), `${f} occurs > 3 months before today`);
    writes(
      model(cond("person.birthDate", "ignoreYear")),
      "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()",
    );
  });
  it("date operators mean what they say", () => {
    const f = "person.lastVisit";
    assert.equal(holds(model(cond(f, "inLast", [{ kind: "duration", amount: 7, unit: "day" }]))), true);
    assert.equal(holds(model(cond(f, "inLast", [{ kind: "duration", amount: 2, unit: "day" }]))), false);
    assert.equal(holds(model(cond(f, "dateOn", [{ kind: "period", which: "this", unit: "month" }]))), true);
    assert.equal(holds(model(cond(f, "dateOn", [{ kind: "time", word: "today" }]))), false);
    assert.equal(holds(model(cond(f, "dateOn", [day(2024, 12, 2)]))), true);
    assert.equal(holds(model(cond("person.birthDate", "dateBetween", [day(1980, 1, 1), day(1990, 12, 31)]))), true);
    assert.equal(holds(model(cond("person.birthDate", "dateBefore", [day(1990, 12, 5)]))), false);
    assert.equal(holds(model(cond("person.birthDate", "ignoreYear"))), true, "born on 5 December, and it is 5 December");
    assert.equal(holds(model(cond("person.lastVisit", "ignoreYear"))), false);
  });
  it("write array operators", () => {
    writes(model(cond("person.favoriteColors", "includes", [s("teal")])), 'person.favoriteColors.includes("teal")');
    writes(model(cond("person.favoriteColors", "intersects", [s("teal"), s("red")])), 'person.favoriteColors.intersects(["teal", "red"])');
    writes(model(cond("person.favoriteColors", "supersetOf", [s("teal"), s("red")])), 'person.favoriteColors.supersetOf(["teal", "red"])');
    writes(model(cond("_acme.scores", "subsetOf", [int(3), int(4)])), "_acme.scores.subsetOf([3, 4])");
    assert.equal(holds(model(cond("person.favoriteColors", "intersects", [s("teal"), s("red")]))), true);
    assert.equal(holds(model(cond("person.favoriteColors", "supersetOf", [s("teal"), s("red")]))), false);
    assert.equal(holds(model(cond("person.favoriteColors", "supersetOf", [s("orange"), s("teal")]))), true);
    assert.equal(holds(model(cond("person.favoriteColors", "includes", [s("red")]))), false);
  });
});

describe("event conditions", () => {
  const purchases = () => cond("eventType", "equals", [s("commerce.purchases")]);
  const last30 = () => cond("timestamp", "inLast", [{ kind: "duration", amount: 30, unit: "day" }]);
  it("write xEvent[…].count() with the count comparison", () => {
    writes(
      model(events([purchases(), last30()], ">=", 3)),
      'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 3',
    );
    writes(model(events([], ">=", 1)), "xEvent.count() >= 1");
    writes(model(events([cond("commerce.order.priceTotal", "greaterThan", [int(100)])], "=", 0)), "xEvent[commerce.order.priceTotal > 100].count() = 0");
  });
  it("'at least 2 purchases in the last 30 days' holds for 2 and not for 1", () => {
    const m = model(events([purchases(), last30()], ">=", 2));
    assert.equal(holds(m, [purchase("2024-12-01T00:00:00Z"), purchase("2024-11-20T00:00:00Z")]), true);
    assert.equal(holds(m, [purchase("2024-12-01T00:00:00Z"), view("2024-12-02T00:00:00Z")]), false);
    assert.equal(holds(m, [purchase("2024-12-01T00:00:00Z"), purchase("2024-10-01T00:00:00Z")]), false, "one is 65 days old");
    const atMost = model(events([purchases()], "<=", 1));
    assert.equal(holds(atMost, [purchase("2024-12-01T00:00:00Z")]), true);
    assert.equal(holds(atMost, [purchase("2024-12-01T00:00:00Z"), purchase("2024-12-02T00:00:00Z")]), false);
  });
  it("reads the 'exists' form .count() > 0 and Segment Builder's one-step chain exactly", () => {
    const gt0 = read('xEvent[eventType = "commerce.checkouts"].count() > 0');
    const ev = gt0.root.children[0]!;
    assert.equal(ev.kind, "event");
    assert.deepEqual(ev.kind === "event" && ev.count, { op: ">", value: 0 });
    const chain = read('CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.purchases", false)) WHEN(<= 7 days before now) COUNT(2)])');
    const rule = chain.root.children[0]!;
    assert.equal(rule.kind, "sequence");
    assert.equal(rule.kind === "sequence" && rule.steps[0]!.count, 2);
  });
  it("offers a labelled count comparison for every comparison operator", () => {
    assert.deepEqual(COUNT_OPERATORS.map((c) => c.op).sort(), ["!=", "<", "<=", "=", ">", ">="]);
  });
});

describe("sequences", () => {
  it("write chain steps with WHAT, WHEN, COUNT and WHERE; an empty WHAT is any event", () => {
    const m = model({
      kind: "sequence",
      id: id(),
      timestampField: "timestamp",
      steps: [
        step("A", [cond("eventType", "equals", [s("commerce.productListAdds")])]),
        step("B", [cond("eventType", "equals", [s("commerce.purchases")])], {
          when: { operator: "relative", operands: [{ kind: "offset", cmp: "<", amount: 24, unit: "hour", direction: "before" }, { kind: "time", word: "now" }] },
          count: 2,
          where: group("and", [cond("commerce.order.priceTotal", "greaterThan", [int(10)])]),
        }),
        step("C", []),
      ],
    });
    writes(
      m,
      'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.productListAdds"), B: WHAT(eventType = "commerce.purchases") WHEN(< 24 hours before now) COUNT(2) WHERE(commerce.order.priceTotal > 10), C: WHAT(true)])',
    );
  });
  it("'this, then that' holds only in that order", () => {
    const m = model({
      kind: "sequence",
      id: id(),
      timestampField: "timestamp",
      steps: [step("A", [cond("eventType", "equals", [s("web.webpagedetails.pageViews")])]), step("B", [cond("eventType", "equals", [s("commerce.purchases")])])],
    });
    assert.equal(holds(m, [view("2024-12-01T00:00:00Z"), purchase("2024-12-02T00:00:00Z")]), true);
    assert.equal(holds(m, [purchase("2024-12-01T00:00:00Z"), view("2024-12-02T00:00:00Z")]), false);
  });
});

describe("audience membership, groups and blocks", () => {
  it("write inSegment and not inSegment", () => {
    writes(model({ kind: "segment", id: id(), segmentId: "seg-gold", member: true }), 'inSegment("seg-gold")');
    writes(model({ kind: "segment", id: id(), segmentId: "seg-gold", member: false }), 'not inSegment("seg-gold")');
    assert.equal(holds(model({ kind: "segment", id: id(), segmentId: "seg-gold", member: true })), true);
    assert.equal(holds(model({ kind: "segment", id: id(), segmentId: "seg-old", member: true })), false);
    assert.equal(holds(model({ kind: "segment", id: id(), segmentId: "seg-old", member: false })), true);
  });
  it("write nested include and exclude groups with the fewest parentheses that keep them", () => {
    const us = () => cond("homeAddress.countryCode", "equals", [s("US")]);
    const ca = () => cond("homeAddress.countryCode", "equals", [s("CA")]);
    const adult = () => cond("person.age", "atLeast", [int(18)]);
    writes(model(group("or", [us(), ca()]), adult()), '(homeAddress.countryCode = "US" or homeAddress.countryCode = "CA") and person.age >= 18');
    writes(anyOf(group("and", [us(), adult()]), ca()), 'homeAddress.countryCode = "US" and person.age >= 18 or homeAddress.countryCode = "CA"');
    writes(model(adult(), group("or", [us(), ca()], "exclude")), 'person.age >= 18 and not (homeAddress.countryCode = "US" or homeAddress.countryCode = "CA")');
    writes(model(adult(), group("and", [us()], "exclude")), 'person.age >= 18 and not homeAddress.countryCode = "US"');
    writes(model(adult(), group("and", [cond("person.age", "between", [int(1), int(2)])])), "person.age >= 18 and (person.age >= 1 and person.age <= 2)");
    writes(anyOf(adult(), cond("person.age", "between", [int(1), int(2)])), "person.age >= 18 or person.age >= 1 and person.age <= 2");
  });
  it("groups mean what they say", () => {
    const us = () => cond("homeAddress.countryCode", "equals", [s("US")]);
    const ca = () => cond("homeAddress.countryCode", "equals", [s("CA")]);
    assert.equal(holds(model(group("or", [us(), ca()]), cond("person.age", "atLeast", [int(18)]))), true);
    assert.equal(holds(model(group("or", [us(), ca()], "exclude"))), false);
    assert.equal(holds(model(group("and", [us()], "exclude"))), true);
  });
  it("keeps what it cannot show as read-only blocks between rules, in order", () => {
    const m = read('homeAddress.countryCode = "CA" and orders.topN(price, 1).head().orderId = "o4" and person.age > 30');
    assert.deepEqual(
      m.root.children.map((c) => c.kind),
      ["condition", "pql", "condition"],
    );
    const block = m.root.children[1]!;
    assert.deepEqual(block.kind === "pql" && { pql: block.pql, context: block.context }, { pql: 'orders.topN(price, 1).head().orderId = "o4"', context: "profile" });
    const r = pqlToRules('xEvent[eventType = "a" and productListItems[SKU = "PS"]].count() >= 1');
    assert.ok(r.ok, "reads");
    assert.deepEqual([r.rules, r.blocks], [2, 1]);
    const ev = r.model.root.children[0]!;
    assert.equal(ev.kind === "event" && ev.filter.children[1]!.kind === "pql" && ev.filter.children[1]!.context, "event");
  });
  it("keeps spellings it has no rule for as blocks rather than changing them", () => {
    for (const text of [
      'person.gender.equals("x")',
      'person.gender.contains("x", true)',
      "person.isVip != true and x occurs from now",
      '"US" = homeAddress.countryCode',
      "person.age > -(5)",
      "xEvent[a = 1].count() >= 1.0",
      "person.birthDate occurs on date(2024, 13, 1)",
      "person.birthDate.getMonth() = currentMonth() and other.getDayOfMonth() = currentDayOfMonth()",
      'person.age >= 18 and person.height <= 2',
      "not (not inSegment(\"a\"))",
    ]) {
      const r = pqlToRules(text);
      assert.ok(r.ok, text);
      assert.ok(astEqual(parse(rulesToPql(r.model)), parse(text)), text);
    }
    const r = pqlToRules('person.gender.equals("x")');
    assert.deepEqual(r.ok && r.blocks, 1);
  });
});

describe("operators", () => {
  it("list operators per value type, each defined and with a label", () => {
    for (const [type, choices] of Object.entries(OPERATORS_BY_TYPE)) {
      assert.ok(choices.length > 0, type);
      for (const c of choices) {
        assert.ok(OPERATORS[c.id], `${type}: ${c.id}`);
        assert.ok(c.label.length > 0, `${c.id} has a label`);
      }
    }
    const listed = new Set(Object.values(OPERATORS_BY_TYPE).flatMap((cs) => cs.map((c) => c.id)));
    assert.deepEqual(Object.keys(OPERATORS).filter((k) => !listed.has(k as never)), []);
  });
  it("tell a condition's value type from its operator and operands", () => {
    assert.equal(valueTypeOf({ operator: "equals", operands: [s("x")] }), "text");
    assert.equal(valueTypeOf({ operator: "equals", operands: [int(1)] }), "number");
    assert.equal(valueTypeOf({ operator: "isTrue", operands: [] }), "boolean");
    assert.equal(valueTypeOf({ operator: "inLast", operands: [{ kind: "duration", amount: 1, unit: "day" }] }), "date");
    assert.equal(valueTypeOf({ operator: "includes", operands: [s("x")] }), "array");
    assert.equal(valueTypeOf({ operator: "exists", operands: [] }), undefined);
  });
});

describe("ids, normalisation and validation", () => {
  it("numbers ids in document order and keeps a previous model's ids for unchanged rules", () => {
    const first = read('a = 1 and (b = 2 or c = 3) and inSegment("s")');
    const ids = JSON.stringify(first).match(/"id":"[^"]+"/g);
    assert.deepEqual(ids, ['"id":"root"', '"id":"r1"', '"id":"r2"', '"id":"r3"', '"id":"r4"', '"id":"r5"']);
    const r = pqlToRules('a = 1 and (b = 2 or c = 4) and inSegment("s")', { previous: first });
    assert.ok(r.ok, "reads");
    const [a, g, seg] = r.model.root.children;
    assert.equal(a!.id, first.root.children[0]!.id);
    assert.equal(seg!.id, first.root.children[2]!.id);
    assert.equal(g?.kind === "group" && g.children[0]!.id, (first.root.children[1] as Group).children[0]!.id);
    const changed = (g as Group).children[1]!.id;
    assert.ok(!JSON.stringify(first).includes(`"${changed}"`), "a changed rule gets an unused id");
    assert.ok(!JSON.stringify(r.model).includes(`"${freshId(r.model)}"`), "freshId is unused");
  });
  it("normalises what the UI can build into what the PQL reads back as", () => {
    const ge = cond("person.age", "atLeast", [int(18)]);
    const le = cond("person.age", "atMost", [int(65)]);
    const m = model(group("and", []), group("or", [group("and", [ge, le])]), cond("x", "contains", [s("a")], false));
    const n = normalize(m);
    assert.deepEqual(noIds(n.root.children), noIds([cond("person.age", "between", [int(18), int(65)]), cond("x", "contains", [s("a")])]));
    assert.equal(n.root.children[0]!.id, ge.id, "a merged rule keeps its first part's id");
    assert.equal(rulesToPql(n), rulesToPql(m));
    assert.deepEqual(normalize(n), n);
  });
  it("refuses invalid models with the offending rule's id, without throwing from tryRulesToPql", () => {
    const bad = cond("person.age", "between", [int(1)]);
    assert.deepEqual(validateModel(model(bad)).map((p) => p.ruleId), [bad.id]);
    assert.throws(() => rulesToPql(model(bad)), (e: unknown) => e instanceof ModelError && e.ruleId === bad.id);
    const keyword = cond("select.x", "equals", [int(1)]);
    assert.equal(tryRulesToPql(model(keyword)).ok, false);
    const nested: Rule = { kind: "event", id: id(), filter: group("and", [events([], ">=", 1)]), count: { op: ">=", value: 1 } };
    assert.match(validateModel(model(nested))[0]!.message, /cannot be nested/);
    const twice = cond("a", "exists");
    assert.match(validateModel(model(twice, twice))[0]!.message, /used twice/);
    const moved = read("xEvent[productListItems[SKU = 1]].count() > 0");
    const block = (moved.root.children[0] as { filter: Group }).filter.children[0]!;
    assert.match(validateModel(model(block))[0]!.message, /written for the event/);
    assert.equal(tryRulesToPql({ version: 1, params: [], root: null } as unknown as VisualModel).ok, false);
  });
  it("writes an empty model as empty text and reads empty text as an empty model", () => {
    assert.equal(rulesToPql(model()), "");
    assert.deepEqual(noIds(read("  \n")), noIds(model()));
  });
});

describe("bad and hostile input", () => {
  it("answers invalid PQL with an error result naming the place", () => {
    const r = pqlToRules('homeAddress.countryCode = "US" and');
    assert.equal(r.ok, false);
    assert.deepEqual(!r.ok && [r.error.code, r.error.line, r.error.column], ["PQL_EXPECTED_EXPRESSION", 1, 35]);
    assert.ok(!r.ok && r.error.message.length > 0, "with a message");
    const notText = pqlToRules(42 as unknown as string);
    assert.equal(!notText.ok && notText.error.code, "VISUAL_BAD_INPUT");
  });
  it("keeps groups nested deeper than the limit as blocks, exactly", () => {
    const depth = 90;
    const text = `${"not (a = 1 or ".repeat(depth)}b = 2${")".repeat(depth)}`;
    const r = pqlToRules(text);
    assert.ok(r.ok, "reads");
    assert.equal(r.blocks, 1, "the part below the limit is one block");
    assert.ok(r.rules > MAX_GROUP_DEPTH - 2, "the part above it is rules");
    assert.ok(astEqual(parse(rulesToPql(r.model)), parse(text)), "exact");
    const tooDeep = pqlToRules(`${"(".repeat(5000)}a${")".repeat(5000)}`);
    assert.equal(!tooDeep.ok && tooDeep.error.code, "PQL_TOO_DEEP");
  });
  it("handles a 20,000-term chain and refuses a 100,000-deep model without overflowing", () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `x = ${i}`).join(" or ");
    const r = pqlToRules(text);
    assert.ok(r.ok, "reads");
    assert.deepEqual([r.model.root.children.length, r.blocks], [20_000, 0]);
    assert.equal(rulesToPql(r.model), text);
    let root: Group = group("and", []);
    const m: VisualModel = { version: 1, params: [], root };
    for (let i = 0; i < 100_000; i++) {
      const g = group("and", []);
      root.children.push(g);
      root = g;
    }
    assert.match(validateModel(m)[0]!.message, /deeper than/);
    assert.equal(tryRulesToPql(m).ok, false);
  });
});
