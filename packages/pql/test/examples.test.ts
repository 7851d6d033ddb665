/**
 * The worked examples of pql.md §7 (the "Example" column of every table, the
 * §7.8 `over` form, §7.13 select and §7.14 chain/inSegment), verbatim, against
 * one fixture profile. Expected values follow from the reference's rules and
 * the fixture below (written for these examples); §8's examples are in
 * time.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluate } from "../src/evaluate.js";
import { compile } from "../src/compile.js";

const profile = {
  person: {
    isVip: true,
    gender: "male",
    age: 34,
    birthMonth: 12,
    birthYear: 1990,
    birthDate: "1990-12-01",
    loyaltyPoints: 1250,
    favoriteColors: ["teal", "orange"],
    visitedCities: ["Oslo", "Lima", "Paris"],
    name: { firstName: "Joanna" },
  },
  homeAddress: { countryCode: "CA", city: "Montreal" },
  workAddress: null,
  personalEmail: { address: "joanna.smith@example.org" },
  identityMap: { ECID: [{ id: "123" }] },
  orders: [
    { orderId: "o1", price: 5, storeId: "s1" },
    { orderId: "o2", price: 40, storeId: "s1" },
    { orderId: "o3", price: 120, storeId: "s2" },
    { orderId: "o4", price: 150, storeId: "s3" },
  ],
  _acme: { scores: [3, 9, 4], prefs: { email: "yes", sms: "no" } },
  segmentMembership: { ups: { "9a1c1b7e-0000-4000-8000-000000000001": { status: "realized" } } },
};

const events = [
  { eventType: "commerce.productListAdds", timestamp: "2024-12-05T09:00:00Z", productListItems: [{ SKU: "PS", name: "Photoshop" }] },
  { eventType: "commerce.purchases", timestamp: "2024-12-05T10:00:00Z", commerce: { order: { priceTotal: 80, currencyCode: "EUR" } } },
  { eventType: "commerce.purchases", timestamp: "2024-12-05T11:50:00Z", commerce: { order: { priceTotal: 40, currencyCode: "EUR" } } },
];

const ctx = { profile, events, now: "2024-12-05T12:00:00Z" };

const examples: [section: string, query: string, expected: unknown][] = [
  ["7.1", 'person.isVip = true and homeAddress.countryCode = "CA"', true],
  ["7.1", 'person.gender = "male" or person.age < 30', true],
  ["7.1", 'not (workAddress.countryCode = "US")', true],
  ["7.1", "!(person.isVip = true)", false],
  ["7.1", "if(person.isVip = true, 10, 0) > 5", true],
  ["7.2", "person.birthMonth = 12", true],
  ["7.2", 'homeAddress.countryCode != "FR"', true],
  ["7.2", "person.loyaltyPoints >= 1000", true],
  ["7.3", 'homeAddress.city in ["Oslo", "Lima"]', false],
  ["7.3", "person.birthMonth notIn [1, 2]", true],
  ["7.3", 'person.favoriteColors.intersects(["teal"])', true],
  ["7.3", 'person.visitedCities.intersection(["Oslo","Rome"]).count() = 1', true],
  ["7.3", "_acme.scores.subsetOf([3, 4, 9, 10])", true],
  ["7.3", 'person.visitedCities.supersetOf(["Lima"])', true],
  ["7.3", 'person.favoriteColors.includes("teal")', true],
  ["7.3", "orders.storeId.distinct().count() = 3", true],
  ["7.3", 'orders.groupBy(storeId).get("s1").count() = 2', true],
  ["7.3", "orders.filter(price > 50).count() = 2", true],
  ["7.3", "orders.map(price * 2).includes(240.0)", true],
  ["7.3", 'orders.topN(price, 1).head().orderId = "o4"', true],
  ["7.3", "orders.bottomN(price, 2).count() = 2", true],
  ["7.3", 'orders.head().orderId = "o1"', true],
  ["7.4", '_acme.prefs.get("email") = "yes"', true],
  ["7.4", 'identityMap.keys().includes("ECID")', true],
  ["7.4", '_acme.prefs.values().includes("no")', true],
  ["7.4", 'orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get("s1") = 2', true],
  ["7.5", 'homeAddress.city like "Mon%"', true],
  ["7.5", 'person.name.firstName.startsWith("jo", false)', true],
  ["7.5", 'personalEmail.address.doesNotStartWith("admin")', true],
  ["7.5", 'personalEmail.address.endsWith(".org")', true],
  ["7.5", 'personalEmail.address.doesNotEndWith(".edu")', true],
  ["7.5", 'personalEmail.address.contains("smith")', true],
  ["7.5", 'personalEmail.address.doesNotContain("test")', true],
  ["7.5", 'person.gender.equals("FEMALE", false)', false],
  ["7.5", 'person.gender.notEqualTo("male")', false],
  ["7.5", 'person.name.firstName.matches("(?i)^jo")', true],
  ["7.5", 'personalEmail.address.regexGroup("@(\\\\w+)", 1)', "example"],
  ["7.6", "workAddress.isNull()", true],
  ["7.6", "person.nickname.isNotNull()", false],
  ["7.7", "person.birthYear + 18 > 2005", true],
  ["7.7", "currentYear() - person.birthYear >= 30", true],
  ["7.7", "orders.count() * 2 = 8", true],
  ["7.7", "person.loyaltyPoints / 250 = 5", true],
  ["7.7", "person.age % 2 = 0", true],
  ["7.8", 'xEvent[eventType = "commerce.purchases"].count() >= 2', true],
  ["7.8", "orders.sum(price) > 200", true],
  ["7.8", "orders.average(price) > 50", true],
  ["7.8", "orders.min(price) < 10", true],
  ["7.8", "_acme.scores.max() = 9", true],
  ["7.8", '(sum E.commerce.order.priceTotal over E from xEvent where E.commerce.order.currencyCode = "EUR") > 100', true],
  ["7.9", "currentMonth() = 12", true],
  ["7.9", "person.birthDate.getMonth() = 12", true],
  ["7.9", "currentYear() - person.birthYear > 65", false],
  ["7.9", "person.birthDate.getYear() < 2000", true],
  ["7.9", "currentDayOfMonth() <= 7", true],
  ["7.9", "person.birthDate.getDayOfMonth() = 1", true],
  ["7.9", "person.birthDate occurs on date(1990, 5, 12)", false],
  ["7.9", "exists X from xEvent : X.timestamp occurs <= 30 minutes before now", true],
  ["7.9", "exists X from xEvent : X.timestamp occurs today", true],
  ["7.9", "exists X from xEvent : X.timestamp occurs yesterday", false],
  ["7.9", "exists X from xEvent : X.timestamp occurs this month", true],
  ["7.9", "exists X from xEvent : X.timestamp occurs between date(2024,1,1) and date(2024,3,31)", false],
  ["7.10", 'xEvent[productListItems[SKU = "PS"]].count()', 1],
  ["7.10", 'xEvent[productListItems[SKU = "ZZ" or ^eventType = "x"]].count()', 0],
  ["7.11", "exists O from orders : O.price > 100", true],
  ["7.11", "forall O from orders : O.price > 1", true],
  ["7.11", 'xEvent.exists(productListItems.exists(name.equals("photoshop", false)))', true],
  ["7.12", "let T = (orders.sum(price)) in (T > 100 and T < 500)", true],
  [
    "7.13",
    '(select A from xEvent where A.eventType = "commerce.productListAdds", B from xEvent where B.eventType = "commerce.purchases" and B.timestamp occurs <= 2 hours after A.timestamp).count()',
    1,
  ],
  ["7.14", 'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.productListAdds"), B: WHAT(eventType = "commerce.purchases") WHEN(< 24 hours before now)])', true],
  ["7.14", 'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.purchases", false)) WHEN(today) COUNT(2)])', true],
  ["7.14", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") COUNT(3)])', false],
  ["7.14", "not(chain(xEvent, timestamp, [A: WHAT(true) WHERE(commerce.order.priceTotal > 100)]))", true],
  ["7.14", 'inSegment("9a1c1b7e-0000-4000-8000-000000000001")', true],
];

for (const [section, query, expected] of examples) {
  test(`§${section} ${query}`, () => {
    assert.deepStrictEqual(evaluate(query, ctx), expected);
    assert.deepStrictEqual(compile(query)(ctx), expected);
  });
}
