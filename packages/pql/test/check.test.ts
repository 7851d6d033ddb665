/**
 * check(): every semantic diagnostic kind with its exact code, message, severity
 * and position (issue #2 point 4), clean expressions that must stay clean, the
 * syntax-error pass-through, and hostile input.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { check, type CheckOptions } from "../src/check.js";
import { PqlError } from "../src/errors.js";
import { parse } from "../src/parser.js";

type Severity = "error" | "warning";

/**
 * The expected position of the `nth` occurrence of `part` in `text`: computed
 * from the text itself (1-based lines and columns, end exclusive).
 */
function span(text: string, part: string, nth = 1): { line: number; column: number; endLine: number; endColumn: number } {
  let at = -1;
  for (let i = 0; i < nth; i++) {
    at = text.indexOf(part, at + 1);
    assert.ok(at >= 0, `'${part}' (#${nth}) not in test text`);
  }
  const pos = (offset: number) => {
    const before = text.slice(0, offset).split("\n");
    return { line: before.length, column: before[before.length - 1]!.length + 1 };
  };
  const a = pos(at);
  const b = pos(at + part.length);
  return { line: a.line, column: a.column, endLine: b.line, endColumn: b.column };
}

function expectOne(text: string, severity: Severity, code: string, message: string, part: string, options?: CheckOptions, nth = 1): void {
  assert.deepEqual(check(text, options), [{ severity, code, message, ...span(text, part, nth) }]);
}

describe("check: syntax errors", () => {
  it("returns the parser's error as the only diagnostic", () => {
    const text = "person.age >";
    let expected: unknown;
    try {
      parse(text);
    } catch (e) {
      assert.ok(e instanceof PqlError);
      expected = e.toDiagnostic();
    }
    assert.ok(expected, "the text must be a syntax error");
    assert.deepEqual(check(text), [expected]);
  });

  it("never throws on 10,000-deep nesting and reports the parser's limit", () => {
    const text = "(".repeat(10_000) + "a" + ")".repeat(10_000);
    const d = check(text);
    assert.equal(d.length, 1);
    assert.equal(d[0]!.code, "PQL_TOO_DEEP");
  });

  it("checks a 20,000-term condition (thousands deep as a tree) without overflowing", () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `a${i} = ${i}`).join(" and ");
    assert.deepEqual(check(text), []);
    const withError = text + ' and "x" + 1 > 2';
    assert.deepEqual(
      check(withError).map((d) => d.code),
      ["PQL_OPERAND_TYPE"],
    );
  });

  it("checks a 20,000-term sum and a 1 MB string literal", () => {
    const sum = Array.from({ length: 20_000 }, (_, i) => String(i)).join(" + ") + " > 1";
    assert.deepEqual(check(sum), []);
    const big = `person.name = "${"a".repeat(1_000_000)}"`;
    assert.deepEqual(check(big), []);
  });
});

describe("check: names", () => {
  it("unknown method with a suggestion, underlining the name", () => {
    expectOne(
      'person.name.startWith("jo")',
      "error",
      "PQL_UNKNOWN_METHOD",
      "Unknown method 'startWith'; did you mean 'startsWith'?",
      "startWith",
    );
  });

  it("unknown method without a close name", () => {
    expectOne("orders.frobnicate() > 1", "error", "PQL_UNKNOWN_METHOD", "Unknown method 'frobnicate'", "frobnicate");
  });

  it("a function used as a method", () => {
    expectOne(
      'x.inSegment("a")',
      "error",
      "PQL_UNKNOWN_METHOD",
      "'inSegment' is a function, not a method: write inSegment(...)",
      "inSegment",
    );
  });

  it("unknown function with a suggestion", () => {
    expectOne('inSegmnt("abc")', "error", "PQL_UNKNOWN_FUNCTION", "Unknown function 'inSegmnt'; did you mean 'inSegment'?", "inSegmnt");
  });

  it("unknown function without a close name", () => {
    expectOne("yearsAgo(3) > 1", "error", "PQL_UNKNOWN_FUNCTION", "Unknown function 'yearsAgo'", "yearsAgo");
  });

  it("a method used as a function", () => {
    expectOne("count(orders) > 1", "error", "PQL_UNKNOWN_FUNCTION", "'count' is a method, not a function: write value.count(...)", "count");
  });

  it("'^' outside any filter", () => {
    expectOne("^eventType = 1", "error", "PQL_UNKNOWN_VARIABLE", "'^eventType' refers to an enclosing item, but it is not inside a filter", "^eventType");
  });

  it("'^^' climbing past the profile", () => {
    expectOne(
      'xEvent[^^gender = "f"].count() > 0',
      "error",
      "PQL_UNKNOWN_VARIABLE",
      "'^^gender' climbs 2 levels, but only 1 enclosing level is available",
      "^^gender",
    );
  });

  it("'^' and '^^' inside two filters are fine", () => {
    assert.deepEqual(check('xEvent[productListItems[SKU = "ZZ" or ^eventType = "x" or ^^.person.gender = "f"]]'), []);
  });
});

describe("check: arity and argument types", () => {
  it("wrong number of arguments to a function", () => {
    expectOne("date(2024, 1) = x", "error", "PQL_ARITY", "Function 'date' expects 3 arguments, but got 2", "date(2024, 1)");
  });

  it("wrong number of arguments to a method with optional arguments", () => {
    expectOne('name.startsWith("a", true, 3)', "error", "PQL_ARITY", "Method 'startsWith' expects 1 to 2 arguments, but got 3", 'name.startsWith("a", true, 3)');
  });

  it("no arguments where one is required", () => {
    expectOne("tags.includes()", "error", "PQL_ARITY", "Method 'includes' expects 1 argument, but got 0", "tags.includes()");
  });

  it("a string where date() needs an integer", () => {
    expectOne('x occurs on date("x", 1, 1)', "error", "PQL_ARGUMENT_TYPE", "Argument 1 of 'date' must be an integer, but this is a string", '"x"');
  });

  it("a number where a string predicate needs text", () => {
    expectOne("name.contains(5)", "error", "PQL_ARGUMENT_TYPE", "Argument 1 of 'contains' must be a string, but this is an integer", "5");
  });

  it("count() on a string literal", () => {
    expectOne('"abc".count() > 1', "error", "PQL_RECEIVER_TYPE", "Method 'count' needs an array or a map, but it is applied to a string", '"abc"');
  });

  it("getMonth() on a number", () => {
    expectOne("(5).getMonth() = 1", "error", "PQL_RECEIVER_TYPE", "Method 'getMonth' needs a date-time, but it is applied to an integer", "5");
  });

  it("a filter on a string literal", () => {
    expectOne('"abc"[x = 1]', "error", "PQL_RECEIVER_TYPE", "A filter [...] needs an array, but this is a string", '"abc"');
  });

  it("'from' over a string literal", () => {
    expectOne('exists X from "abc" : X = 1', "error", "PQL_SOURCE_TYPE", "'from' needs an array, but this is a string", '"abc"');
  });

  it("a chain over a number", () => {
    expectOne("chain(5, timestamp, [A: WHAT(true)])", "error", "PQL_SOURCE_TYPE", "A chain needs an array of events, but this is an integer", "5");
  });
});

describe("check: operators", () => {
  it('"a" + 1', () => {
    expectOne('"a" + 1 > 0', "error", "PQL_OPERAND_TYPE", "Operator '+' needs numbers, but the left operand is a string", '"a"');
  });

  it("a boolean on the right of '*'", () => {
    expectOne("score * true > 0", "error", "PQL_OPERAND_TYPE", "Operator '*' needs numbers, but the right operand is a boolean", "true");
  });

  it("unary minus on a string", () => {
    expectOne('-"a" < 1', "error", "PQL_OPERAND_TYPE", "Unary '-' needs a number, but the operand is a string", '"a"');
  });

  it("'in' with a string on the right", () => {
    expectOne('city in "Oslo"', "error", "PQL_OPERAND_TYPE", "'in' needs a list on the right, but this is a string", '"Oslo"');
  });

  it("'like' with a number", () => {
    expectOne('5 like "a%"', "error", "PQL_OPERAND_TYPE", "'like' needs text on both sides, but the left operand is an integer", "5");
  });

  it("string literal compared with '<' to a number literal", () => {
    expectOne('"a" < 1', "error", "PQL_INCOMPATIBLE_COMPARISON", 'Cannot compare a string "a" with an integer 1; the comparison is never true', '"a" < 1');
  });

  it("boolean literal ordered", () => {
    expectOne("flag > true", "error", "PQL_INCOMPATIBLE_COMPARISON", "'>' cannot order boolean values; it compares numbers", "flag > true");
  });

  it("ordering strings is a warning", () => {
    expectOne('name < "M"', "warning", "PQL_ORDERING_COMPARISON", "'<' on text compares alphabetically (case-sensitive); check that this is intended", 'name < "M"');
  });

  it("ordering a field against a numeric string is not a string comparison", () => {
    assert.deepEqual(check('age < "30"'), []);
  });

  it("a numeric string converts to the type of a computed value, but two literals never convert", () => {
    assert.deepEqual(check('orders.count() = "3"'), []);
    expectOne('orders.count() = "three"', "error", "PQL_INCOMPATIBLE_COMPARISON", 'Cannot compare an integer with a string "three"; the comparison is never true', 'orders.count() = "three"');
    expectOne('"5" = 5', "error", "PQL_INCOMPATIBLE_COMPARISON", 'Cannot compare a string "5" with an integer 5; the comparison is never true', '"5" = 5');
  });

  it("ordering times is a warning", () => {
    expectOne(
      "lastSeen >= now",
      "warning",
      "PQL_ORDERING_COMPARISON",
      "'>=' on dates compares instants; prefer 'occurs' (for example 'occurs before today') for time conditions",
      "lastSeen >= now",
    );
  });

  it("occurs on a string literal", () => {
    expectOne('"2024-01-01" occurs today', "error", "PQL_OCCURS_TYPE", "'occurs' needs a date or date-time, but this is a string", '"2024-01-01"');
  });

  it("a boolean as a time reference", () => {
    expectOne("seen occurs before true", "error", "PQL_OCCURS_TYPE", "A time reference must be a date or date-time, but this is a boolean", "true");
  });
});

describe("check: conditions", () => {
  it("a non-boolean WHAT", () => {
    expectOne(
      'chain(xEvent, timestamp, [A: WHAT("purchase")])',
      "error",
      "PQL_CONDITION_TYPE",
      "The WHAT condition must be true or false, but this is a string",
      '"purchase"',
    );
  });

  it("a non-boolean WHERE", () => {
    expectOne(
      "chain(xEvent, timestamp, [A: WHAT(true) WHERE(3)])",
      "error",
      "PQL_CONDITION_TYPE",
      "The WHERE condition must be true or false, but this is an integer",
      "3",
    );
  });

  it("a number as an operand of 'and'", () => {
    expectOne("vip and 5", "error", "PQL_CONDITION_TYPE", "The operand of 'and' must be true or false, but this is an integer", "5");
  });

  it("a string as a filter condition", () => {
    expectOne('xEvent["x"].count() > 0', "error", "PQL_CONDITION_TYPE", "A filter condition must be true or false, but this is a string", '"x"');
  });

  it("a number as the condition of filter()", () => {
    expectOne("orders.filter(1).count() > 0", "error", "PQL_CONDITION_TYPE", "The condition of 'filter' must be true or false, but this is an integer", "1");
  });

  it("fields in boolean positions are a documented idiom", () => {
    assert.deepEqual(check("homeAddress and homeAddress.countryISO"), []);
  });

  it("a non-boolean top level is a warning (OQ-28)", () => {
    expectOne(
      "orders.count()",
      "warning",
      "PQL_NON_BOOLEAN_RESULT",
      "A segment definition should be true or false, but this expression is an integer; it counts as true whenever it has a value",
      "orders.count()",
    );
  });

  it("a select at the top level is not a warning", () => {
    assert.deepEqual(check('select X from xEvent where X.eventType = "a"'), []);
  });
});

describe("check: guardrails", () => {
  it("a chain with 7 steps", () => {
    const steps = ["A", "B", "C", "D", "E", "F", "G"].map((l) => `${l}: WHAT(true)`).join(", ");
    const text = `chain(xEvent, timestamp, [${steps}])`;
    expectOne(text, "error", "PQL_CHAIN_TOO_LONG", "A chain can have at most 6 steps, but this one has 7", text);
  });

  it("a chain with 6 steps is fine", () => {
    const steps = ["A", "B", "C", "D", "E", "F"].map((l) => `${l}: WHAT(true)`).join(", ");
    assert.deepEqual(check(`chain(xEvent, timestamp, [${steps}])`), []);
  });

  it("four aggregation functions: a warning on the fourth", () => {
    expectOne(
      "a.count() + b.sum() + c.min() + d.max() > 1",
      "warning",
      "PQL_TOO_MANY_AGGREGATIONS",
      "The expression uses 4 aggregation functions; more than 3 slow evaluation down",
      "d.max()",
    );
  });

  it("three aggregation functions are fine", () => {
    assert.deepEqual(check("a.count() + b.sum() + c.min() > 1"), []);
  });

  it("inSegment with a field instead of an id", () => {
    expectOne("inSegment(segmentId)", "error", "PQL_INSEGMENT_ID", 'inSegment needs the audience id as a text literal, like inSegment("<id>")', "segmentId");
  });

  it("inSegment with an empty id", () => {
    expectOne('inSegment(" ")', "error", "PQL_INSEGMENT_ID", "inSegment needs a non-empty audience id", '" "');
  });

  it("date() with month 13", () => {
    expectOne("x occurs on date(2024, 13, 1)", "error", "PQL_DATE_RANGE", "Month 13 is out of range; months are 1 to 12", "13");
  });

  it("date() with 29 February in a non-leap year", () => {
    expectOne("x occurs on date(2023, 2, 29)", "error", "PQL_DATE_RANGE", "Day 29 is out of range in 2023-02; it must be 1 to 28", "29");
  });

  it("date() with 29 February in a leap year is fine", () => {
    assert.deepEqual(check("x occurs on date(2024, 2, 29)"), []);
  });

  it("date() with day 31 in April and an unknown year", () => {
    expectOne("x occurs on date(currentYear(), 4, 31)", "error", "PQL_DATE_RANGE", "Day 31 is out of range in month 4; it must be 1 to 30", "31");
  });

  it("date() with day 0", () => {
    expectOne("x occurs on date(y, m, 0)", "error", "PQL_DATE_RANGE", "Day 0 is out of range; it must be 1 to 31", "0");
  });

  it("topN with 0 items", () => {
    expectOne("orders.topN(price, 0).count() > 0", "error", "PQL_TOPN_COUNT", "topN needs a positive number of items, but got 0", "0");
  });

  it("bottomN with a negative count", () => {
    expectOne("orders.bottomN(price, -2).count() > 0", "error", "PQL_TOPN_COUNT", "bottomN needs a positive number of items, but got -2", "-2");
  });
});

describe("check: regular expressions", () => {
  // Invalid and Java-only syntax is decided by the runtime's validator (runtime/regex.ts), so that
  // check refuses exactly what evaluation cannot run; check adds the backtracking rule.
  const unsupported = "PQL_REGEX_UNSUPPORTED";
  it("possessive quantifier", () => {
    expectOne(
      'name.matches("a*+b")',
      "error",
      unsupported,
      "Invalid regular expression: possessive quantifiers (such as a*+) are Java-only and not supported",
      '"a*+b"',
    );
  });

  it("\\A anchor (infix matches)", () => {
    expectOne('name matches "\\\\Aabc"', "error", unsupported, "Invalid regular expression: \\A is Java-only and not supported; use ^ and $", '"\\\\Aabc"');
  });

  it("\\Z and \\z anchors in regexGroup and matches", () => {
    const text = 'email.regexGroup("(\\\\w+)\\\\Z", 1) = "x" and email.matches("a\\\\z")';
    assert.deepEqual(check(text), [
      { severity: "error", code: unsupported, message: "Invalid regular expression: \\Z is Java-only and not supported; use ^ and $", ...span(text, '"(\\\\w+)\\\\Z"') },
      { severity: "error", code: unsupported, message: "Invalid regular expression: \\z is Java-only and not supported; use ^ and $", ...span(text, '"a\\\\z"') },
    ]);
  });

  it("\\p{java...} classes", () => {
    expectOne(
      'name.matches("\\\\p{javaLowerCase}+")',
      "error",
      unsupported,
      "Invalid regular expression: \\p{javaLowerCase} is Java-only and not supported",
      '"\\\\p{javaLowerCase}+"',
    );
  });

  it("atomic groups", () => {
    expectOne('name.matches("(?>ab|a)c")', "error", unsupported, "Invalid regular expression: atomic groups (?>...) are Java-only and not supported", '"(?>ab|a)c"');
  });

  it("nested unbounded repetitions are refused as catastrophic", () => {
    const msg =
      "The pattern repeats a group that itself contains an unbounded repetition (like '(a+)+'); backtracking regex engines can take exponential time on it";
    expectOne('name.matches("^(a+)+$")', "error", "PQL_REGEX_CATASTROPHIC", msg, '"^(a+)+$"');
    expectOne('name.matches("(\\\\w+\\\\s?)*x")', "error", "PQL_REGEX_CATASTROPHIC", msg, '"(\\\\w+\\\\s?)*x"');
    expectOne('name.matches("((ab)*c)+")', "error", "PQL_REGEX_CATASTROPHIC", msg, '"((ab)*c)+"');
    expectOne('name.matches("(?:[a-z]{2,})*")', "error", "PQL_REGEX_CATASTROPHIC", msg, '"(?:[a-z]{2,})*"');
  });

  it("a pattern above the runtime's size limit", () => {
    expectOne('name.matches("x{99999}")', "error", "PQL_REGEX_TOO_LARGE", "Invalid regular expression: repetition count above 2000", '"x{99999}"');
  });

  it("lookaround, which the linear-time matcher cannot run", () => {
    expectOne(
      'name.matches("a(?=b)")',
      "error",
      unsupported,
      "Invalid regular expression: lookaround is not supported (segmentd matches regexes in linear time)",
      '"a(?=b)"',
    );
  });

  it("an unclosed group", () => {
    expectOne('name.matches("(ab")', "error", "PQL_REGEX_INVALID", "Invalid regular expression: unclosed group", '"(ab"');
  });

  it("a quantifier with nothing to repeat", () => {
    expectOne('name.matches("*a")', "error", "PQL_REGEX_INVALID", "Invalid regular expression: nothing to repeat", '"*a"');
  });

  it("ordinary Java patterns are fine, including bounded repetition of a repeated group", () => {
    for (const p of ["(?i)^jo", "^J.*n$", "@(\\\\w+)", "[a-z]+\\\\d{2,3}", "(ab){2,5}", "a+b+c*", "[(]x[)]", "\\\\p{Lu}", "(a|b)+", "x{3,}", "(a+){1,3}", "(a+)?", "[(a+)]+", "\\\\(a+\\\\)+"]) {
      assert.deepEqual(check(`name.matches("${p}")`), [], p);
    }
  });
});

describe("check: with a schema", () => {
  const schema: CheckOptions = {
    schema: {
      "person.name.firstName": "string",
      "person.birthDate": "date",
      "person.age": "integer",
      "person.vip": "boolean",
      "person.loyalty": "double",
      "homeAddress.countryCode": "string",
      orders: "array",
      "orders.price": "double",
      "orders.storeId": "string",
      prefs: "map",
      "xEvent.timestamp": "date-time",
      "xEvent.eventType": "string",
      "xEvent.productListItems": "array",
      "xEvent.productListItems.SKU": "string",
    },
  };

  it("unknown profile field with a suggestion", () => {
    expectOne('person.nmae.firstName = "x"', "error", "PQL_UNKNOWN_FIELD", "Unknown field 'nmae' in 'person'; did you mean 'name'?", "person.nmae", schema);
  });

  it("unknown root field", () => {
    expectOne("loyaltyTier = 1", "error", "PQL_UNKNOWN_FIELD", "Unknown field 'loyaltyTier' in the profile", "loyaltyTier", schema);
  });

  it("unknown event field inside a filter", () => {
    expectOne('xEvent[eventTyp = "a"].count() > 0', "error", "PQL_UNKNOWN_FIELD", "Unknown field 'eventTyp' in 'xEvent'; did you mean 'eventType'?", "eventTyp", schema);
  });

  it("unknown array item field through a binding variable", () => {
    expectOne("exists O from orders : O.prize > 3", "error", "PQL_UNKNOWN_FIELD", "Unknown field 'prize' in 'orders'; did you mean 'price'?", "O.prize", schema);
  });

  it("unknown nested item field reached with '^'", () => {
    expectOne(
      'xEvent[productListItems[SKU = "a" and ^eventTyp = "b"]].count() > 0',
      "error",
      "PQL_UNKNOWN_FIELD",
      "Unknown field 'eventTyp' in 'xEvent'; did you mean 'eventType'?",
      "^eventTyp",
      schema,
    );
  });

  it("map keys are not schema fields", () => {
    assert.deepEqual(check('prefs.email = "yes" and prefs.get("sms") = "no"', schema), []);
  });

  it("string field compared to a number literal", () => {
    expectOne(
      "homeAddress.countryCode = 5",
      "error",
      "PQL_INCOMPATIBLE_COMPARISON",
      "Cannot compare the string field 'homeAddress.countryCode' with an integer 5; the comparison is never true",
      "homeAddress.countryCode = 5",
      schema,
    );
  });

  it("integer field compared to a string that is not a number", () => {
    expectOne(
      'person.age = "old"',
      "error",
      "PQL_INCOMPATIBLE_COMPARISON",
      "Cannot compare the integer field 'person.age' with a string \"old\"; the comparison is never true",
      'person.age = "old"',
      schema,
    );
  });

  it("literal coercions that work (pql.md §6.5)", () => {
    assert.deepEqual(check('person.age = "30" and person.vip = "true" and person.loyalty > "2.5" and person.birthDate = "1990-05-12"', schema), []);
  });

  it("boolean field ordered with '>'", () => {
    expectOne("person.vip > 3", "error", "PQL_INCOMPATIBLE_COMPARISON", "'>' cannot order boolean values; it compares numbers", "person.vip > 3", schema);
  });

  it("occurs on a non-date field", () => {
    expectOne("person.age occurs today", "error", "PQL_OCCURS_TYPE", "'occurs' needs a date or date-time, but 'person.age' is an integer field", "person.age", schema);
  });

  it("'in' list with an element the field can never equal", () => {
    expectOne(
      'homeAddress.countryCode in ["US", 3]',
      "error",
      "PQL_INCOMPATIBLE_COMPARISON",
      "Cannot compare the string field 'homeAddress.countryCode' with an integer 3; the comparison is never true",
      "3",
      schema,
    );
  });

  it("projection through an array is an array", () => {
    expectOne(
      "orders.price + 1 > 2",
      "error",
      "PQL_OPERAND_TYPE",
      "Operator '+' needs numbers, but the left operand is an array",
      "orders.price",
      schema,
    );
  });

  it("a schema-valid definition is clean", () => {
    const text =
      'person.birthDate occurs <= 30 days before today and person.age >= 21 and orders.filter(price > 10).count() >= 2 ' +
      'and orders.head().storeId = "s1" and xEvent[eventType = "commerce.purchases" and timestamp occurs today and productListItems[SKU = "PS"]].count() > 0';
    assert.deepEqual(check(text, schema), []);
  });
});

describe("check: clean expressions and several problems at once", () => {
  it("documented expressions are clean", () => {
    const clean = [
      'person.birthYear >= 1980 and homeAddress.countryCode in ["CA", "US"]',
      'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.checkouts", false)) WHEN(today)])',
      "select A from xEvent where A.eventType = \"add\", B from xEvent where B.timestamp occurs <= 2 hours after A.timestamp",
      "(sum E.commerce.order.priceTotal over E from xEvent where E.commerce.order.currencyCode = \"EUR\") > 100",
      "let T = (orders.sum(price)) in (T > 100 and T < 500)",
      'orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get("s1") = 2',
      "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()",
      "if(person.isVip = true, 10, 0) > 5",
      '(p) => p.homeAddress.city = "Oslo" and $1.person.age > 3',
      'exists O from orders : O.price > 100 and forall I from O.items : I.qty > 0',
      'inSegment("4b1f0c3a-0000-4000-8000-000000000001") and not inSegment("b")',
      "person.orders.storeId.distinct().count() = 3",
      "X.timestamp occurs between date(2024, 1, 1) and date(2024, 3, 31) or xEventCount > 2",
    ];
    for (const text of clean) assert.deepEqual(check(text), [], text);
  });

  it("reports every problem, in source order, across lines", () => {
    const text = 'foo(1) = 2\n  and "a" < 1\n  and name.startWith("x")';
    assert.deepEqual(check(text), [
      { severity: "error", code: "PQL_UNKNOWN_FUNCTION", message: "Unknown function 'foo'", ...span(text, "foo") },
      {
        severity: "error",
        code: "PQL_INCOMPATIBLE_COMPARISON",
        message: 'Cannot compare a string "a" with an integer 1; the comparison is never true',
        ...span(text, '"a" < 1'),
      },
      { severity: "error", code: "PQL_UNKNOWN_METHOD", message: "Unknown method 'startWith'; did you mean 'startsWith'?", ...span(text, "startWith") },
    ]);
    assert.equal(check(text)[2]!.line, 3);
  });
});

describe("check: chains with a schema", () => {
  const schema: CheckOptions = { schema: { "xEvent.timestamp": "date-time", "xEvent.eventType": "string", "xEvent.count": "integer" } };

  it("an unknown timestamp field is reported once, on the chain", () => {
    const text = 'chain(xEvent, timestmp, [A: WHAT(eventType = "a") WHEN(today), B: WHAT(true) WHEN(today)])';
    expectOne(text, "error", "PQL_UNKNOWN_FIELD", "Unknown field 'timestmp' in 'xEvent'; did you mean 'timestamp'?", text, schema);
  });

  it("a chain ordered by a non-date field", () => {
    const text = "chain(xEvent, count, [A: WHAT(true)])";
    expectOne(text, "error", "PQL_OCCURS_TYPE", "A chain needs a date-time field for its order, but 'count' is an integer", text, schema);
  });

  it("a well-typed chain is clean", () => {
    assert.deepEqual(check('chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(< 2 hours before now) COUNT(2)])', schema), []);
  });
});
