/**
 * A corpus of realistic PQL expressions for the parse benchmark: hand-written
 * shapes (from the reference's examples and Segment Builder output) expanded
 * over a few field names and constants, giving a few hundred distinct queries.
 */
const countries = ["US", "CA", "FR", "DE"];
const eventTypes = ["commerce.purchases", "commerce.productListAdds", "web.webpagedetails.pageViews", "commerce.checkouts"];
const units = ["days", "hours", "weeks", "months"];

const shapes: ((i: number) => string)[] = [
  (i) => `homeAddress.countryCode = "${countries[i % 4]}"`,
  (i) => `person.age >= ${18 + i} and homeAddress.countryCode in ["${countries[i % 4]}", "${countries[(i + 1) % 4]}"]`,
  (i) => `xEvent[eventType = "${eventTypes[i % 4]}" and timestamp occurs <= ${i + 1} ${units[i % 4]} before now].count() >= ${1 + (i % 3)}`,
  (i) => `homeAddress.countryCode = "US" and person.age >= ${20 + i} and xEvent[eventType = "commerce.purchases" and timestamp occurs <= ${i + 7} days before now].count() >= 2`,
  (i) => `chain(xEvent, timestamp, [A: WHAT(eventType = "${eventTypes[i % 4]}") WHEN(< ${i + 1} hours before now), B: WHAT(eventType = "commerce.purchases") WHEN(< 24 hours before now)])`,
  (i) => `CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("${eventTypes[i % 4]}", false)) WHEN(today) COUNT(${i + 1})])`,
  (i) => `select X from xEvent where X.eventType = "${eventTypes[i % 4]}" and X.commerce.order.priceTotal > ${i * 10}`,
  (i) => `exists E from xEvent : E.productListItems.exists(SKU = "SKU-${i}") and E.timestamp occurs last month`,
  (i) => `forall O from orders : O.price > ${i}`,
  (i) => `person.name.firstName.startsWith("${String.fromCharCode(65 + i)}", false) or personalEmail.address.endsWith(".org")`,
  (i) => `personalEmail.address.matches("(?i)^[a-z]+${i}@example\\\\.com$")`,
  (i) => `personalEmail.address.regexGroup("@(\\\\w+)", 1) = "example${i}"`,
  (i) => `homeAddress.city like "Mon%${i}"`,
  (i) => `orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get("s${i}") = 2`,
  (i) => `orders.topN(price, ${i + 1}).head().orderId = "o${i}"`,
  (i) => `(sum E.commerce.order.priceTotal over E from xEvent where E.commerce.order.currencyCode = "EUR") > ${100 * (i + 1)}`,
  (i) => `let T = (orders.sum(price)) in (T > ${i * 50} and T < 500)`,
  (i) => `person.birthDate occurs between date(${1980 + i}, 1, 1) and date(${1990 + i}, 12, 31)`,
  (i) => `person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth() and person.age > ${i}`,
  (i) => `inSegment("${(i * 7919).toString(16).padStart(8, "0")}-1111-2222-3333-444455556666") and not (workAddress.countryCode = "US")`,
  (i) => `xEvent[productListItems[SKU = "ZZ${i}" or ^eventType = "commerce.purchases"]].count() > 0`,
  (i) => `if(person.isVip = true, ${i + 10}, 0) > 5 and _acme.scores.subsetOf([${i}, 4, 9, 10])`,
  (i) => `(P) => P.loyalty.points / ${250 + i} >= 5 and P.person.favoriteColors.intersects(["teal", "red"])`,
  (i) => `xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal) >= ${i * 25} and xEvent.timestamp.max() occurs this week`,
  (i) => `identityMap.keys().includes("ECID") and person.visitedCities.intersection(["Oslo", "Rome"]).count() = ${i % 3}`,
];

export const PQL_CORPUS: readonly string[] = shapes.flatMap((shape) => Array.from({ length: 10 }, (_, i) => shape(i)));
