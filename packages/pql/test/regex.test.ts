/**
 * Java-syntax regexes (pql.md §7.5, OQ-17): translation, rejection of Java-only
 * and non-linear constructs, find semantics, and the guarantee that hostile
 * patterns and subjects finish quickly (segmentd runs patterns on a linear-time
 * Pike VM, never on a backtracking engine).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { MAX_SUBJECT, validateJavaRegex, type SafeRegex } from "../src/runtime/regex.js";
import { evaluate } from "../src/evaluate.js";
import { compile } from "../src/compile.js";
import { PqlError } from "../src/errors.js";

function ok(pattern: string): SafeRegex {
  const v = validateJavaRegex(pattern);
  if (!v.ok) assert.fail(`${pattern}: ${v.message}`);
  return v.regex;
}

function rejected(pattern: string): { code: string; message: string; offset: number } {
  const v = validateJavaRegex(pattern);
  if (v.ok) assert.fail(`${pattern} was accepted`);
  return v;
}

test("[LEG] find semantics: the pattern may match anywhere; anchors for whole strings", () => {
  assert.equal(ok("John").test("UpJohn"), true);
  assert.equal(ok("^John").test("UpJohn"), false);
  assert.equal(ok("John$").test("UpJohn"), true);
  assert.equal(ok("J.hn").test("Jahn"), true);
  assert.equal(ok("^J.*n$").test("Johnathan"), true);
  assert.equal(ok("^J.*n$").test("Johnny"), false);
  assert.equal(ok("(?i)john").test("JOHN"), true);
  assert.equal(ok("john").test("JOHN"), false);
});

test("leading inline flags become JavaScript flags", () => {
  assert.equal(ok("(?i)abc").jsFlags, "ui");
  assert.equal(ok("(?is)a.c").jsFlags, "uis");
  assert.equal(ok("(?i)(?m)^b").jsFlags, "uim");
  assert.equal(ok("(?s)a.c").test("a\nc"), true);
  assert.equal(ok("a.c").test("a\nc"), false);
  assert.equal(ok("(?m)^b$").test("a\nb\nc"), true);
  assert.equal(ok("^b$").test("a\nb\nc"), false);
});

test("translation to a JavaScript RegExp source", () => {
  assert.equal(ok("@(\\w+)").jsSource, "\\u{40}([A-Za-z0-9_]+)");
  assert.equal(ok("[^a-c]x?").jsSource, "[^\\u{61}-\\u{63}]\\u{78}?");
  assert.equal(ok("\\Qa.b\\E").jsSource, "\\u{61}\\u{2e}\\u{62}");
  assert.equal(ok("\\p{Lu}\\P{Alpha}").jsSource, "\\p{Lu}[^a-zA-Z]");
  // The translation means the same thing to JavaScript.
  const r = ok("^(\\d{3})-(\\d{4})$");
  assert.deepEqual(r.exec("555-1234"), ["555-1234", "555", "1234"]);
  assert.deepEqual([...new RegExp(r.jsSource, r.jsFlags).exec("555-1234")!], ["555-1234", "555", "1234"]);
});

test("Java escapes: \\Q…\\E quoting, escaped punctuation, \\x{…}, POSIX classes, \\p{IsLatin}", () => {
  assert.equal(ok("\\Q1+1\\E").test("1+1=2"), true);
  assert.equal(ok("\\Q1+1\\E").test("11"), false);
  assert.equal(ok("a\\-b\\@c").test("a-b@c"), true);
  assert.equal(ok("\\x{1F600}").test("smile 😀"), true);
  assert.equal(ok("^\\p{Lower}+$").test("abc"), true);
  assert.equal(ok("^\\p{Lower}+$").test("abç"), false, "POSIX classes are ASCII-only in Java");
  assert.equal(ok("\\p{IsGreek}").test("λ"), true);
  assert.equal(ok("^[\\w.]+@example\\.com$").test("john.smith@example.com"), true);
});

test("Java-only and non-linear constructs are rejected with a code, a message and an offset", () => {
  const cases: [string, string, RegExp, number][] = [
    ["a*+", "PQL_REGEX_UNSUPPORTED", /possessive/, 2],
    ["x(?>a|b)", "PQL_REGEX_UNSUPPORTED", /atomic/, 1],
    ["\\Aabc", "PQL_REGEX_UNSUPPORTED", /\\A is Java-only/, 0],
    ["abc\\Z", "PQL_REGEX_UNSUPPORTED", /\\Z is Java-only/, 3],
    ["abc\\z", "PQL_REGEX_UNSUPPORTED", /\\z is Java-only/, 3],
    ["\\p{javaLowerCase}", "PQL_REGEX_UNSUPPORTED", /Java-only/, 0],
    ["\\p{InGreek}", "PQL_REGEX_UNSUPPORTED", /Java-only/, 0],
    ["[a-z&&[^aeiou]]", "PQL_REGEX_UNSUPPORTED", /intersection/, 4],
    ["(a)\\1", "PQL_REGEX_UNSUPPORTED", /backreferences/, 3],
    ["(?<n>a)\\k<n>", "PQL_REGEX_UNSUPPORTED", /backreferences/, 7],
    ["a(?=b)", "PQL_REGEX_UNSUPPORTED", /lookaround/, 1],
    ["(?<!a)b", "PQL_REGEX_UNSUPPORTED", /lookaround/, 0],
    ["a(?i)b", "PQL_REGEX_UNSUPPORTED", /only at the very start/, 1],
    ["(?x)a b", "PQL_REGEX_UNSUPPORTED", /inline flag 'x'/, 2],
    ["(abc", "PQL_REGEX_INVALID", /unclosed group/, 0],
    ["abc)", "PQL_REGEX_INVALID", /unmatched '\)'/, 3],
    ["*a", "PQL_REGEX_INVALID", /nothing to repeat/, 0],
    ["[abc", "PQL_REGEX_INVALID", /unclosed character class/, 0],
    ["a{2,1}", "PQL_REGEX_INVALID", /smaller than its minimum/, 1],
    ["\\y", "PQL_REGEX_INVALID", /unknown escape \\y/, 0],
    ["(a{1000}){1000}", "PQL_REGEX_TOO_LARGE", /too large/, 0],
  ];
  for (const [pattern, code, message, offset] of cases) {
    const r = rejected(pattern);
    assert.equal(r.code, code, pattern);
    assert.match(r.message, message, pattern);
    assert.equal(r.offset, offset, pattern);
  }
});

test("an invalid regex literal in a query is a PqlError at the literal's position", () => {
  for (const run of [(q: string) => evaluate(q, { profile: {}, now: 0 }), (q: string) => compile(q)]) {
    assert.throws(
      () => run('name.matches("a*+")'),
      (e: unknown) =>
        e instanceof PqlError && e.code === "PQL_REGEX_UNSUPPORTED" && e.line === 1 && e.column === 14 && /possessive/.test(e.message),
    );
    assert.throws(() => run('name matches "(a)\\\\1"'), (e: unknown) => e instanceof PqlError && e.column === 14);
  }
});

test("a pattern coming from data is checked at run time: invalid → false, never an exception", () => {
  const ctx = { profile: { name: "aaa", good: "^a+$", bad: "(a)\\1", evil: "(a+)+$" }, now: 0 };
  for (const f of [evaluate, (q: string, c: typeof ctx) => compile(q)(c)]) {
    assert.equal(f("name.matches(good)", ctx), true);
    assert.equal(f("name.matches(bad)", ctx), false);
    assert.equal(f("name.matches(evil)", ctx), true);
    assert.equal(f("name.regexGroup(bad)", ctx), null);
  }
});

function timed(f: () => void): number {
  const t0 = performance.now();
  f();
  return performance.now() - t0;
}

test("catastrophic patterns finish within 100 ms on long subjects", () => {
  // Exponential on a backtracking engine at ~30 characters; linear here. Best of three
  // runs, so that a busy machine does not make the bound flaky.
  const subject = "a".repeat(3000) + "!";
  const patterns = ["(a+)+$", "(a|a)*b", "(a|aa)+$", "(.*a){20}$", ".*.*.*x", "^(\\w+\\s?)*$", "(a*)*b"];
  for (const p of patterns) {
    const r = ok(p);
    let best = Infinity;
    for (let i = 0; i < 3; i++) best = Math.min(best, timed(() => assert.equal(r.test(subject), false, p)));
    assert.ok(best < 100, `${p} took ${best.toFixed(1)} ms`);
  }
});

test("the same hostile pattern through matches() in a query, from a literal and from data", () => {
  const profile = { s: "a".repeat(5000) + "!", p: "(a+)+$" };
  const ms = timed(() => {
    assert.equal(evaluate('s.matches("(a+)+$")', { profile, now: 0 }), false);
    assert.equal(compile("s matches p")({ profile, now: 0 }), false);
  });
  assert.ok(ms < 300, `took ${ms.toFixed(1)} ms`);
});

test("subjects longer than MAX_SUBJECT are not searched (false / null), in constant time", () => {
  const long = "x".repeat(MAX_SUBJECT + 1);
  assert.equal(ok("x").test(long), false);
  assert.equal(ok("(x)").exec(long), null);
  assert.equal(ok("x").test("x".repeat(MAX_SUBJECT)), true);
});

test("like never backtracks exponentially and matches whole strings with % and _", () => {
  const ctx = { profile: { s: "a".repeat(20000) + "b", city: "Montréal" }, now: 0 };
  const ms = timed(() => assert.equal(evaluate('s like "%a%a%a%a%a%a%c"', ctx), false));
  assert.ok(ms < 500, `like took ${ms.toFixed(1)} ms`);
  assert.equal(evaluate('city like "Montr_al"', ctx), true, "_ is one character");
  assert.equal(evaluate('city like "Mont"', ctx), false, "whole string");
  assert.equal(evaluate('city like "%réal"', ctx), true);
  assert.equal(evaluate('city like "%.%"', ctx), false, "no other metacharacters");
});

/**
 * Random small patterns over a tiny alphabet, compared with JavaScript's own
 * engine on short strings. Quantifiers apply only to bodies that cannot match
 * the empty string: there, backtracking engines add an "empty iteration" rule
 * that a Thompson-style VM does not reproduce (documented in docs/pql.md).
 */
interface Gen {
  src: string;
  nullable: boolean;
}
const atom: fc.Arbitrary<Gen> = fc.constantFrom("a", "b", ".", "[ab]", "[^a]", "\\w", "c").map((src) => ({ src, nullable: false }));
const pattern: fc.Arbitrary<string> = (
  fc.letrec<{ node: Gen }>((tie) => ({
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      atom,
      fc.tuple(tie("node"), tie("node")).map(([x, y]) => ({ src: x.src + y.src, nullable: x.nullable && y.nullable })),
      fc.tuple(tie("node"), tie("node")).map(([x, y]) => ({ src: `(?:${x.src}|${y.src})`, nullable: x.nullable || y.nullable })),
      fc
        .tuple(tie("node"), fc.constantFrom("*", "+", "?", "{1,2}", "*?", "+?"))
        .filter(([x]) => !x.nullable)
        .map(([x, q]) => ({ src: `(?:${x.src})${q}`, nullable: q !== "+" && q !== "+?" && q !== "{1,2}" })),
      tie("node").map((x) => ({ src: `(${x.src})`, nullable: x.nullable })),
    ),
  })).node
).map((g) => g.src);

test("property: the VM finds the same leftmost match as JavaScript's RegExp", () => {
  fc.assert(
    fc.property(pattern, fc.boolean(), fc.boolean(), fc.stringMatching(/^[abc]{0,10}$/), (p, start, end, s) => {
      const src = `${start ? "^" : ""}${p}${end ? "$" : ""}`;
      const r = ok(src);
      const native = new RegExp(src, "u").exec(s);
      const mine = r.exec(s);
      assert.equal(mine === null, native === null, `${src} on ${s}`);
      assert.equal(r.test(s), native !== null, `test() of ${src} on ${s}`);
      if (mine !== null && native !== null) assert.equal(mine[0], native[0], `${src} on ${s}`);
    }),
    { numRuns: 1500 },
  );
});
