/**
 * Every built-in and operator (catalog.ts + pql.md §7): a true case, a false
 * case and a null/missing case each, evaluated by both the interpreter and the
 * compiler. Expected values come from the reference, not from the code.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluate } from "../src/evaluate.js";
import { compile } from "../src/compile.js";
import { BUILTINS } from "../src/catalog.js";
import type { EvalContext } from "../src/evaluate.js";

const profile = {
  person: {
    age: 35,
    isVip: true,
    gender: "Female",
    birthYear: 1989,
    birthDate: "1989-05-12",
    name: { firstName: "John", lastName: "Smith" },
    favoriteColors: ["teal", "red"],
    visitedCities: ["Oslo", "Lima", "Rome"],
    emptyText: "",
    zero: 0,
  },
  homeAddress: { countryCode: "US", city: "Montreal" },
  personalEmail: { address: "john.smith@example.com" },
  loyalty: { points: 1250 },
  orders: [
    { orderId: "o1", price: 10, storeId: "s1" },
    { orderId: "o2", price: 120, storeId: "s1" },
    { orderId: "o3", price: 60, storeId: "s2" },
    { orderId: "o4", price: 200, storeId: null },
  ],
  scores: [3, 4, 9],
  emptyList: [],
  prefs: { email: "yes", sms: "no" },
  emptyObject: {},
  identityMap: { ECID: [{ id: "123" }], Email: [{ id: "john.smith@example.com" }] },
  segmentMembership: {
    ups: {
      "seg-realized": { status: "realized" },
      "seg-existing": { status: "existing" },
      "seg-exited": { status: "exited" },
    },
    other: { "seg-other": { status: "realized" } },
  },
};

const events = [
  { eventType: "commerce.purchases", timestamp: "2024-03-14T10:00:00Z", commerce: { order: { priceTotal: 50 } } },
  { eventType: "web.pageViews", timestamp: "2024-03-15T08:00:00Z" },
];

const ctx: EvalContext = { profile, events, now: "2024-03-15T12:00:00Z" };

type Case = [query: string, expected: unknown];

// name → [true/value case, false/other case, null/missing case]
const cases: Record<string, Case[]> = {
  and: [["person.isVip = true and homeAddress.countryCode = \"US\"", true], ["person.isVip = true and homeAddress.countryCode = \"CA\"", false], ["person.missing and true", false]],
  or: [["person.age < 30 or person.isVip = true", true], ["person.age < 30 or person.isVip = false", false], ["person.missing or person.missing2", false]],
  not: [["not (homeAddress.countryCode = \"CA\")", true], ["not (homeAddress.countryCode = \"US\")", false], ["not (workAddress.countryCode = \"US\")", true]],
  "!": [["!(person.age > 40)", true], ["!(person.age > 30)", false], ["!(person.missing = 1)", true]],
  if: [["if(person.isVip = true, 10, 0) > 5", true], ["if(person.isVip = false, 10, 0) > 5", false], ["if(person.missing, 1, 2)", 2]],
  "=": [["person.age = 35", true], ["person.age = 36", false], ["person.missing = 35", false]],
  "!=": [["homeAddress.countryCode != \"FR\"", true], ["homeAddress.countryCode != \"US\"", false], ["person.missing != \"US\"", false]],
  "<": [["person.age < 36", true], ["person.age < 35", false], ["person.missing < 1", false]],
  "<=": [["person.age <= 35", true], ["person.age <= 34", false], ["person.missing <= 1", false]],
  ">": [["loyalty.points > 1000", true], ["loyalty.points > 2000", false], ["loyalty.missing > 0", false]],
  ">=": [["loyalty.points >= 1250", true], ["loyalty.points >= 1251", false], ["loyalty.missing >= 0", false]],
  "+": [["person.birthYear + 18", 2007], ["person.birthYear + 18 > 2010", false], ["person.missing + 1", null]],
  "-": [["currentYear() - person.birthYear", 35], ["-person.age", -35], ["person.missing - 1", null]],
  "*": [["orders.count() * 2", 8], ["person.age * 2 = 71", false], ["person.missing * 2", null]],
  "/": [["loyalty.points / 250", 5], ["7 / 2", 3.5], ["loyalty.points / 0", null]],
  "%": [["person.age % 2", 1], ["-7 % 3", -1], ["person.age % 0", null]],
  in: [["homeAddress.city in [\"Oslo\", \"Montreal\"]", true], ["homeAddress.city in [\"Oslo\", \"Lima\"]", false], ["person.missing in [\"Oslo\"]", false]],
  notIn: [["person.age notIn [1, 2]", true], ["person.age notIn [35]", false], ["person.missing notIn [1, 2]", false]],
  like: [["homeAddress.city like \"Mon%\"", true], ["homeAddress.city like \"mon%\"", false], ["person.missing like \"%\"", false]],
  matches: [["person.name.firstName.matches(\"(?i)^jo\")", true], ["person.name.firstName.matches(\"^jo\")", false], ["person.missing.matches(\".*\")", false]],
  intersects: [["person.favoriteColors.intersects([\"teal\"])", true], ["person.favoriteColors.intersects([\"blue\"])", false], ["person.missing.intersects([\"teal\"])", false]],
  intersection: [["person.visitedCities.intersection([\"Oslo\", \"Rome\", \"Paris\"])", ["Oslo", "Rome"]], ["person.visitedCities.intersection([\"Paris\"])", []], ["person.missing.intersection([\"Oslo\"])", null]],
  subsetOf: [["scores.subsetOf([3, 4, 9, 10])", true], ["scores.subsetOf([3, 4])", false], ["person.missing.subsetOf([1])", false]],
  supersetOf: [["person.visitedCities.supersetOf([\"Lima\"])", true], ["person.visitedCities.supersetOf([\"Lima\", \"Paris\"])", false], ["person.missing.supersetOf([\"Lima\"])", false]],
  includes: [["person.favoriteColors.includes(\"teal\")", true], ["person.favoriteColors.includes(\"blue\")", false], ["person.missing.includes(\"teal\")", false]],
  distinct: [["orders.storeId.distinct()", ["s1", "s2"]], ["orders.storeId.distinct().count() = 3", false], ["person.missing.distinct()", null]],
  groupBy: [["orders.groupBy(storeId).get(\"s1\").count()", 2], ["orders.groupBy(storeId).keys()", ["s1", "s2"]], ["person.missing.groupBy(storeId)", null]],
  filter: [["orders.filter(price > 50).count()", 3], ["orders.filter(price > 500).count()", 0], ["person.missing.filter(price > 1)", null]],
  map: [["orders.map(price * 2).includes(240)", true], ["orders.map(price * 2).includes(20.5)", false], ["person.missing.map(price)", null]],
  topN: [["orders.topN(price, 2).map(orderId)", ["o4", "o2"]], ["orders.topN(price, 1).head().orderId = \"o1\"", false], ["person.missing.topN(price, 1)", null]],
  bottomN: [["orders.bottomN(price, 2).map(orderId)", ["o1", "o3"]], ["orders.bottomN(price, 1).head().orderId = \"o4\"", false], ["person.missing.bottomN(price, 1)", null]],
  head: [["orders.head().orderId", "o1"], ["emptyList.head()", null], ["person.missing.head()", null]],
  exists: [["orders.exists(price > 150)", true], ["orders.exists(price > 500)", false], ["person.missing.exists(price > 1)", false]],
  count: [["orders.count()", 4], ["emptyList.count()", 0], ["person.missing.count()", 0]],
  sum: [["orders.sum(price)", 390], ["emptyList.sum()", 0], ["person.missing.sum()", null]],
  average: [["scores.average()", 16 / 3], ["orders.average(price) > 100", false], ["emptyList.average()", null]],
  min: [["orders.min(price)", 10], ["scores.min() = 4", false], ["emptyList.min()", null]],
  max: [["scores.max()", 9], ["orders.max(price) = 120", false], ["emptyList.max()", null]],
  get: [["prefs.get(\"email\")", "yes"], ["prefs.get(\"email\") = \"no\"", false], ["prefs.get(\"push\")", null]],
  keys: [["identityMap.keys().includes(\"ECID\")", true], ["identityMap.keys().includes(\"Phone\")", false], ["person.missing.keys()", null]],
  values: [["prefs.values()", ["yes", "no"]], ["prefs.values().includes(\"maybe\")", false], ["person.missing.values()", null]],
  mapEntry: [["orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get(\"s1\")", 2], ["orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get(\"s2\") = 2", false], ["orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get(\"null\")", null]],
  startsWith: [["person.name.firstName.startsWith(\"jo\", false)", true], ["person.name.firstName.startsWith(\"jo\")", false], ["person.missing.startsWith(\"jo\")", false]],
  doesNotStartWith: [["personalEmail.address.doesNotStartWith(\"admin\")", true], ["personalEmail.address.doesNotStartWith(\"john\")", false], ["person.missing.doesNotStartWith(\"a\")", false]],
  endsWith: [["personalEmail.address.endsWith(\".com\")", true], ["personalEmail.address.endsWith(\".org\")", false], ["person.missing.endsWith(\".com\")", false]],
  doesNotEndWith: [["personalEmail.address.doesNotEndWith(\".edu\")", true], ["personalEmail.address.doesNotEndWith(\".COM\", false)", false], ["person.missing.doesNotEndWith(\".edu\")", false]],
  contains: [["personalEmail.address.contains(\"SMITH\", false)", true], ["personalEmail.address.contains(\"SMITH\")", false], ["person.missing.contains(\"a\")", false]],
  doesNotContain: [["personalEmail.address.doesNotContain(\"test\")", true], ["personalEmail.address.doesNotContain(\"smith\")", false], ["person.missing.doesNotContain(\"test\")", false]],
  equals: [["person.gender.equals(\"FEMALE\", false)", true], ["person.gender.equals(\"FEMALE\")", false], ["person.missing.equals(\"x\")", false]],
  notEqualTo: [["person.gender.notEqualTo(\"male\")", true], ["person.gender.notEqualTo(\"female\", false)", false], ["person.missing.notEqualTo(\"male\")", false]],
  regexGroup: [["personalEmail.address.regexGroup(\"@(\\\\w+)\", 1)", "example"], ["personalEmail.address.regexGroup(\"@(\\\\w+)\")", "@example"], ["personalEmail.address.regexGroup(\"#(\\\\w+)\", 1)", null]],
  isNull: [["workAddress.isNull()", true], ["homeAddress.isNull()", false], ["person.missing.deeper.isNull()", true]],
  isNotNull: [["person.name.isNotNull()", true], ["person.nickname.isNotNull()", false], ["person.missing.deeper.isNotNull()", false]],
  currentMonth: [["currentMonth()", 3], ["currentMonth() = 12", false], ["currentMonth() = person.missing", false]],
  currentYear: [["currentYear()", 2024], ["currentYear() = 2023", false], ["currentYear() - person.missing", null]],
  currentDayOfMonth: [["currentDayOfMonth()", 15], ["currentDayOfMonth() <= 7", false], ["currentDayOfMonth() = person.missing", false]],
  getMonth: [["person.birthDate.getMonth()", 5], ["person.birthDate.getMonth() = 12", false], ["person.missing.getMonth()", null]],
  getYear: [["person.birthDate.getYear()", 1989], ["person.birthDate.getYear() < 1980", false], ["person.missing.getYear()", null]],
  getDayOfMonth: [["person.birthDate.getDayOfMonth()", 12], ["person.birthDate.getDayOfMonth() = 1", false], ["person.missing.getDayOfMonth()", null]],
  date: [["person.birthDate occurs on date(1989, 5, 12)", true], ["person.birthDate occurs on date(1989, 5, 13)", false], ["person.missing occurs on date(1989, 5, 12)", false]],
  inSegment: [["inSegment(\"seg-realized\") and inSegment(\"seg-existing\") and inSegment(\"seg-other\")", true], ["inSegment(\"seg-exited\")", false], ["inSegment(\"seg-unknown\")", false]],
  occurs: [["xEvent[timestamp occurs today].count()", 1], ["xEvent[timestamp occurs tomorrow].count() > 0", false], ["person.missing occurs today", false]],
  filterOperator: [["xEvent[eventType = \"commerce.purchases\"].count()", 1], ["xEvent[eventType = \"x\"].count() > 0", false], ["person.missing[price > 1]", null]],
  up: [["orders[price > 100 and ^homeAddress.countryCode = \"US\"].count()", 2], ["orders[^homeAddress.countryCode = \"CA\"].count() > 0", false], ["orders[^person.missing = 1].count()", 0]],
  existsQuantifier: [["exists O from orders : O.price > 100", true], ["exists O from orders : O.price > 500", false], ["exists O from person.missing : O.price > 1", false]],
  forall: [["forall O from orders : O.price > 1", true], ["forall O from orders : O.price > 50", false], ["forall O from person.missing : O.price > 1", true]],
  select: [["(select O from orders where O.price > 100).count()", 2], ["select O from orders where O.price > 500", []], ["select O from person.missing where O.price > 1", []]],
  let: [["let T = (orders.sum(price)) in (T > 100 and T < 500)", true], ["let T = (orders.sum(price)) in (T > 500)", false], ["let T = person.missing in T", null]],
  sumOver: [["sum O.price over O from orders where O.price > 50", 380], ["(sum O.price over O from orders where O.price > 500) > 0", false], ["sum O.missing over O from orders", 0]],
  averageOver: [["average O.price over O from orders where O.storeId = \"s1\"", 65], ["(average O.price over O from orders) > 100", false], ["average O.price over O from emptyList", null]],
  minOver: [["min O.price over O from orders", 10], ["(min O.price over O from orders) = 60", false], ["min O.price over O from emptyList", null]],
  maxOver: [["max O.price over O from orders where O.price < 100", 60], ["(max O.price over O from orders) < 100", false], ["max O.price over O from person.missing", null]],
  chain: [
    ["chain(xEvent, timestamp, [A: WHAT(eventType = \"commerce.purchases\"), B: WHAT(eventType = \"web.pageViews\")])", true],
    ["chain(xEvent, timestamp, [A: WHAT(eventType = \"web.pageViews\"), B: WHAT(eventType = \"commerce.purchases\")])", false],
    ["chain(person.missing, timestamp, [A: WHAT(true)])", false],
  ],
};

const ctxFor = (q: string) => ({ q, ctx });

test("every catalog built-in has cases", () => {
  for (const b of BUILTINS) assert.ok(cases[b.name], `no cases for ${b.name}`);
});

for (const [name, list] of Object.entries(cases)) {
  test(`${name}: true, false and null cases`, () => {
    assert.equal(list.length, 3);
    for (const [query, expected] of list) {
      const { q, ctx: c } = ctxFor(query);
      assert.deepStrictEqual(evaluate(q, c), expected, `evaluate ${q}`);
      assert.deepStrictEqual(compile(q)(c), expected, `compile ${q}`);
    }
  });
}
