/**
 * Syntax errors people actually make, each with its exact code, message and
 * 1-based line/column (pql.md §2, §3; the (R) rejections of OQ-2/3/4/5/33).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { parse } from "../src/parser.js";
import { PqlError } from "../src/errors.js";

type Case = [name: string, source: string, code: string, line: number, column: number, message: string];

const CASES: Case[] = [
  ["missing closing quote", "name = \"abc", "PQL_UNTERMINATED_STRING", 1, 8, "Unterminated string literal"],
  ["'==' for equality", "a == 1", "PQL_DOUBLE_EQUALS", 1, 3, "'==' is not PQL; use '=' for equality"],
  ["unknown string escape", "a = \"x\\qy\"", "PQL_BAD_ESCAPE", 1, 7, "Unknown escape sequence '\\q' in string literal (write '\\\\' for a backslash)"],
  ["short unicode escape", "a = \"\\u12\"", "PQL_BAD_ESCAPE", 1, 6, "Invalid unicode escape: '\\u' needs four hex digits"],
  ["single-quoted string", "a = 'x'", "PQL_SINGLE_QUOTE", 1, 5, "Single-quoted strings are not PQL; use double quotes"],
  ["occurs without a time reference", "ts occurs before", "PQL_EXPECTED_TIME", 1, 17, "Expected a time reference (e.g. 'now', 'today', 'this month', 'date(2024, 1, 31)') after 'before' but found end of input"],
  ["occurs comparison without a unit", "ts occurs < 3 before now", "PQL_OCCURS_UNIT", 1, 15, "Expected a time unit (e.g. 'days', 'hours') after '< 3' but found 'before'"],
  ["occurs comparison without a number", "ts occurs < days before now", "PQL_OCCURS_AMOUNT", 1, 13, "Expected a number between '<' and 'days' (e.g. '< 3 days before now')"],
  ["occurs number without a comparison", "ts occurs 3 days before now", "PQL_OCCURS_COMPARISON", 1, 11, "Missing comparison before '3 days' (e.g. '<= 3 days before now')"],
  ["occurs unit alone", "ts occurs days before now", "PQL_OCCURS_AMOUNT", 1, 11, "A time unit needs a comparison and a number: e.g. '< 3 days before now'"],
  ["occurs without a direction", "ts occurs < 3 days", "PQL_OCCURS_DIRECTION", 1, 19, "Expected 'before', 'after' or 'from' after '3 days' but found end of input"],
  ["occurs with a negative amount", "ts occurs < -3 days before now", "PQL_OCCURS_AMOUNT", 1, 13, "Expected a whole number after '<' in occurs but found '-'"],
  ["occurs with a fractional amount", "ts occurs < 2.5 days before now", "PQL_OCCURS_AMOUNT", 1, 13, "Expected a whole number after '<' in occurs but found '2.5'"],
  ["unknown time unit after a number", "ts occurs < 3 fortnights before now", "PQL_OCCURS_UNIT", 1, 15, "Expected a time unit (e.g. 'days', 'hours') after '< 3' but found 'fortnights'"],
  ["'last' with a number", "ts occurs last 2 weeks", "PQL_BAD_PERIOD", 1, 16, "'last' takes a time unit without a number (e.g. 'last week'); for a span write e.g. '<= 2 weeks before now'"],
  ["between without 'and'", "ts occurs between date(2024, 1, 1)", "PQL_EXPECTED_AND", 1, 35, "Expected 'and' after 'between …' but found end of input"],
  ["unbalanced '('", "(a = 1", "PQL_EXPECTED_TOKEN", 1, 7, "Expected ')' to close the '(' at 1:1 but found end of input"],
  ["unbalanced ']'", "a = 1]", "PQL_UNBALANCED", 1, 6, "Unmatched ']': there is no opening bracket for it"],
  ["unbalanced ')'", "a = 1 )", "PQL_UNBALANCED", 1, 7, "Unmatched ')': there is no opening bracket for it"],
  ["'and' at the end", "a = 1 and", "PQL_EXPECTED_EXPRESSION", 1, 10, "Expected an expression after 'and' but found end of input"],
  ["'or' at the start", "or a = 1", "PQL_EXPECTED_EXPRESSION", 1, 1, "Expected an expression but found 'or'"],
  ["two operands with no operator", "a b", "PQL_UNEXPECTED_TOKEN", 1, 3, "Expected an operator or end of input but found 'b'"],
  ["trailing comma in a list", "x in [1, 2,]", "PQL_TRAILING_COMMA", 1, 11, "Trailing ',' in list literal"],
  ["trailing comma in arguments", "a.b(1,)", "PQL_TRAILING_COMMA", 1, 6, "Trailing ',' in the arguments of 'b'"],
  ["missing comma in arguments", "f(1 2)", "PQL_EXPECTED_TOKEN", 1, 5, "Expected ',' or ')' in the arguments of 'f' (opened at 1:2) but found '2'"],
  ["empty parentheses", "()", "PQL_EXPECTED_EXPRESSION", 1, 2, "Expected an expression inside '()' but found ')'"],
  ["'.' followed by a number", "a.5 = 1", "PQL_EXPECTED_NAME", 1, 3, "Expected a field or method name after '.' but found '5'"],
  ["select without from", "select X where X.a = 1", "PQL_EXPECTED_FROM", 1, 10, "Expected 'from' after the variable 'X' in select but found 'where'"],
  ["exists without from", "exists X : X.a = 1", "PQL_EXPECTED_FROM", 1, 10, "Expected 'from' after the variable 'X' in exists but found ':'"],
  ["let without in", "let X = 1 X > 0", "PQL_EXPECTED_IN", 1, 11, "Expected 'in' after the value of 'let X' but found 'X'"],
  ["let without a variable", "let = 1 in 2", "PQL_EXPECTED_VARIABLE", 1, 5, "Expected a variable name after 'let' but found '='"],
  ["chain step without WHAT", "chain(xEvent, timestamp, [A: WHEN(today)])", "PQL_EXPECTED_WHAT", 1, 30, "Expected 'WHAT(' after the step label 'A' but found 'WHEN'"],
  ["COUNT(0)", "chain(xEvent, timestamp, [A: WHAT(true) COUNT(0)])", "PQL_BAD_COUNT", 1, 47, "COUNT needs a positive whole number but found '0'"],
  ["chain with an empty step list", "chain(xEvent, timestamp, [])", "PQL_EMPTY_CHAIN", 1, 27, "A chain needs at least one step (e.g. [A: WHAT(true)])"],
  ["duplicate WHEN clause", "chain(xEvent, timestamp, [A: WHAT(true) WHEN(today) WHEN(now)])", "PQL_DUPLICATE_CLAUSE", 1, 53, "Step 'A' has more than one WHEN clause"],
  ["null literal", "a = null", "PQL_NULL_LITERAL", 1, 5, "'null' is not a PQL literal; use .isNull() or .isNotNull()"],
  ["line comment", "a = 1 // c", "PQL_COMMENT", 1, 7, "Comments are not supported in PQL ('//')"],
  ["block comment", "a = 1 /* c */", "PQL_COMMENT", 1, 7, "Comments are not supported in PQL ('/*')"],
  ["SQL comment", "a = 1 -- c", "PQL_COMMENT", 1, 7, "Comments are not supported in PQL ('--'); write '- -' with a space for a double minus"],
  ["hash comment", "# c\na", "PQL_COMMENT", 1, 1, "Comments are not supported in PQL ('#')"],
  ["chained comparison", "a < b < c", "PQL_CHAINED_COMPARISON", 1, 7, "Comparisons cannot be chained: found '<' after a comparison; combine them with 'and'"],
  ["$0", "$0 = 1", "PQL_BAD_PARAMETER", 1, 1, "Parameters are numbered from $1; found '$0'"],
  ["$ alone", "$ = 1", "PQL_BAD_PARAMETER", 1, 1, "Expected a parameter number after '$' (e.g. $1)"],
  ["unterminated object literal", "{\"a\": 1", "PQL_EXPECTED_TOKEN", 1, 8, "Expected ',' or '}' in the object opened at 1:1 but found end of input"],
  ["object key not a string", "{a: 1}", "PQL_OBJECT_KEY", 1, 2, "Object keys must be string literals (e.g. {\"count\": …}) but found 'a'"],
  ["lambda without body", "xs.map(x => )", "PQL_EXPECTED_EXPRESSION", 1, 13, "Expected the body of the lambda after '=>' but found ')'"],
  ["error on line 3", "a = 1 and\nb = 2 and\nc = = 3", "PQL_EXPECTED_EXPRESSION", 3, 5, "Expected an expression after '=' but found '='"],
  ["integer out of range", "a = 99999999999999999999", "PQL_NUMBER_RANGE", 1, 5, "Integer '99999999999999999999' is outside the supported range (at most 9007199254740991)"],
  ["exponent without digits", "a = 1e", "PQL_BAD_NUMBER", 1, 5, "Malformed number '1e': the exponent needs digits"],
  ["stray character", "a @ b", "PQL_UNEXPECTED_CHARACTER", 1, 3, "Unexpected character '@'"],
  ["'&&'", "a && b", "PQL_UNEXPECTED_CHARACTER", 1, 3, "'&&' is not PQL; use 'and'"],
  ["'not in'", "a not in [1]", "PQL_UNEXPECTED_TOKEN", 1, 3, "'not in' is not PQL; use 'notIn'"],
  ["empty filter", "a[]", "PQL_EXPECTED_EXPRESSION", 1, 3, "Expected a filter condition after '[' but found ']'"],
  ["unclosed filter", "xEvent[", "PQL_EXPECTED_EXPRESSION", 1, 8, "Expected an expression after '[' but found end of input"],
  ["binder inside arithmetic", "a = 1 + select X from b", "PQL_NEEDS_PARENTHESES", 1, 9, "'select' cannot appear here without parentheses: write (select …)"],
  ["sum…over without 'over'", "sum E.x E from a", "PQL_EXPECTED_OVER", 1, 9, "Expected 'over' after the value of 'sum' but found 'E'"],
  ["'^' without a name", "^", "PQL_EXPECTED_NAME", 1, 2, "Expected a field name after '^' but found end of input"],
  ["'not' alone", "not", "PQL_EXPECTED_EXPRESSION", 1, 4, "Expected an expression after 'not' but found end of input"],
  ["lambda outside an argument list", "(x) => (y) => y", "PQL_MISPLACED_LAMBDA", 1, 8, "A lambda is only allowed as a function or method argument"],
];

for (const [name, source, code, line, column, message] of CASES) {
  test(`syntax error: ${name}`, () => {
    assert.throws(
      () => parse(source),
      (err: unknown) => {
        assert.ok(err instanceof PqlError, `expected a PqlError, got ${String(err)}`);
        assert.deepEqual(
          { code: err.code, line: err.line, column: err.column, message: err.message },
          { code, line, column, message },
        );
        return true;
      },
    );
  });
}

test("at least 30 distinct mistakes are covered, with distinct messages", () => {
  assert.ok(CASES.length >= 30);
  assert.equal(new Set(CASES.map((c) => c.at(-1))).size, CASES.length);
});

test("errors carry an end position and convert to a diagnostic", () => {
  const err = (() => {
    try {
      parse('a = 1 and\n  b == 2');
    } catch (e) {
      return e as PqlError;
    }
    throw new Error("no error");
  })();
  assert.deepEqual(err.toDiagnostic(), {
    severity: "error",
    code: "PQL_DOUBLE_EQUALS",
    message: "'==' is not PQL; use '=' for equality",
    line: 2,
    column: 5,
    endLine: 2,
    endColumn: 7,
  });
  assert.equal(err.start, 14);
  assert.equal(err.end, 16);
});

test("a chain with more than six steps is left to check (the parser accepts it)", () => {
  const steps = Array.from({ length: 7 }, (_, i) => `S${i}: WHAT(eventType = "e${i}")`).join(", ");
  const q = parse(`chain(xEvent, timestamp, [${steps}])`);
  assert.equal(q.body.type === "Chain" && q.body.steps.length, 7);
});

test("'^' outside any filter is left to check (the parser accepts it)", () => {
  assert.deepEqual(parse("^eventType = 1").body.type, "Binary");
});
