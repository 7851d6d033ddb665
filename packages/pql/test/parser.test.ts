import { test } from "node:test";
import assert from "node:assert/strict";
import { parse, MAX_NESTING } from "../src/parser.js";
import { astEqual, stripPositions, type Expr } from "../src/ast.js";

const body = (src: string): Expr => stripPositions(parse(src).body);
const F = (name: string): Expr => ({ type: "Field", name });
const V = (name: string): Expr => ({ type: "Var", name });
const I = (value: number): Expr => ({ type: "Literal", kind: "integer", value });
const S = (value: string): Expr => ({ type: "Literal", kind: "string", value });
const B = (op: string, left: Expr, right: Expr): Expr => ({ type: "Binary", op, left, right }) as Expr;
const M = (object: Expr, name: string): Expr => ({ type: "Member", object, name });
/** Same tree, positions ignored. */
const same = (a: string, b: string) => assert.ok(astEqual(parse(a), parse(b)), `${a}  ≢  ${b}`);

// ------------------------------------------------------------------ literals

test("literals: strings, integers, doubles, booleans, lists, objects", () => {
  assert.deepEqual(body('"x"'), S("x"));
  assert.deepEqual(body("412"), I(412));
  assert.deepEqual(body("3.5"), { type: "Literal", kind: "double", value: 3.5 });
  assert.deepEqual(body(".45"), { type: "Literal", kind: "double", value: 0.45 });
  assert.deepEqual(body("2.02E-12"), { type: "Literal", kind: "double", value: 2.02e-12 });
  assert.deepEqual(body("5.0"), { type: "Literal", kind: "double", value: 5 });
  assert.deepEqual(body("TRUE"), { type: "Literal", kind: "boolean", value: true });
  assert.deepEqual(body("false"), { type: "Literal", kind: "boolean", value: false });
  assert.deepEqual(body("[]"), { type: "List", elements: [] });
  assert.deepEqual(body('[1, "a"]'), { type: "List", elements: [I(1), S("a")] });
  assert.deepEqual(body('{"count": 1, "v": x}'), {
    type: "Object",
    entries: [
      { key: "count", value: I(1) },
      { key: "v", value: F("x") },
    ],
  });
  assert.deepEqual(body("{}"), { type: "Object", entries: [] });
});

test("unary minus folds into a number literal, otherwise negates", () => {
  assert.deepEqual(body("-201"), I(-201));
  assert.deepEqual(body("-51.24"), { type: "Literal", kind: "double", value: -51.24 });
  assert.deepEqual(body("- 5"), I(-5));
  assert.deepEqual(body("-x"), { type: "Negate", operand: F("x") });
  assert.deepEqual(body("-(5)"), { type: "Negate", operand: I(5) });
  assert.deepEqual(body("- -5"), { type: "Negate", operand: I(-5) });
  assert.deepEqual(body("3 - -5"), B("-", I(3), I(-5)));
  // Postfix binds tighter than unary minus, so the literal is not folded here.
  assert.deepEqual(body("-5.count()"), {
    type: "Negate",
    operand: { type: "Method", receiver: I(5), name: "count", args: [] },
  });
});

test("parameters, xEvent, time words and relative periods", () => {
  assert.deepEqual(body("$2"), { type: "Param", index: 2 });
  assert.deepEqual(body("XEVENT"), { type: "XEvent" });
  assert.deepEqual(body("Today"), { type: "TimeWord", word: "today" });
  assert.deepEqual(body("last Months"), { type: "RelPeriod", which: "last", unit: "month" });
  assert.deepEqual(body("this millenium"), { type: "RelPeriod", which: "this", unit: "millennium" });
});

// ---------------------------------------------------------------- postfix

test("field paths, method calls with canonical names, global calls", () => {
  assert.deepEqual(body("person.name.firstName"), M(M(F("person"), "name"), "firstName"));
  assert.deepEqual(body('a.STARTSWITH("x", false)'), {
    type: "Method",
    receiver: F("a"),
    name: "startsWith",
    args: [S("x"), { type: "Literal", kind: "boolean", value: false }],
  });
  assert.deepEqual(body("orders.Count()"), { type: "Method", receiver: F("orders"), name: "count", args: [] });
  assert.deepEqual(body("orders.myFunc()"), { type: "Method", receiver: F("orders"), name: "myFunc", args: [] });
  assert.deepEqual(body("CurrentMonth()"), { type: "Call", name: "currentMonth", args: [] });
  assert.deepEqual(body('inSegment("s1")'), { type: "Call", name: "inSegment", args: [S("s1")] });
  assert.deepEqual(body("IF(a, 1, 2)"), { type: "Call", name: "if", args: [F("a"), I(1), I(2)] });
});

test("keywords are field and method names after a dot", () => {
  assert.deepEqual(body("address.last"), M(F("address"), "last"));
  assert.deepEqual(body("a.from.select.and"), M(M(M(F("a"), "from"), "select"), "and"));
  assert.deepEqual(body("a.not()"), { type: "Method", receiver: F("a"), name: "not", args: [] });
});

test("keywords that are common field names are fields where unambiguous", () => {
  assert.deepEqual(body("last = 1"), B("=", F("last"), I(1)));
  assert.deepEqual(body("date = 1"), B("=", F("date"), I(1)));
  assert.deepEqual(body("from.x"), M(F("from"), "x"));
  assert.deepEqual(body("max > 3"), B(">", F("max"), I(3)));
  assert.deepEqual(body("count"), F("count"));
  assert.deepEqual(body("next + 1"), B("+", F("next"), I(1)));
});

test("'[' after an operand is a filter; elsewhere a list", () => {
  assert.deepEqual(body('xEvent[eventType = "a"]'), {
    type: "Filter",
    object: { type: "XEvent" },
    condition: B("=", F("eventType"), S("a")),
  });
  assert.deepEqual(body("x in [1, 2]"), B("in", F("x"), { type: "List", elements: [I(1), I(2)] }));
  assert.deepEqual(body("a.b[c].d"), M({ type: "Filter", object: M(F("a"), "b"), condition: F("c") }, "d"));
});

test("up references: ^name, ^^.name, and paths after them", () => {
  assert.deepEqual(body("^eventType"), { type: "Up", levels: 1, name: "eventType" });
  assert.deepEqual(body("^^.person.gender"), M({ type: "Up", levels: 2, name: "person" }, "gender"));
  assert.deepEqual(body("^ ^ ^x"), { type: "Up", levels: 3, name: "x" });
});

// ------------------------------------------------------------- precedence

test("and binds tighter than or; both left-associative", () => {
  same("a or b and c", "a or (b and c)");
  same("a and b or c", "(a and b) or c");
  same("a or b or c", "(a or b) or c");
  assert.deepEqual(body("a and b and c"), B("and", B("and", F("a"), F("b")), F("c")));
});

test("not sits below comparisons and above and; ! is the same operator", () => {
  same("not a = 1", "not (a = 1)");
  same("!a = 1", "not (a = 1)");
  same("NOT(a) AND b", "(not a) and b");
  same("not a and b", "(not a) and b");
  same("not not a", "not (not a)");
  assert.deepEqual(body("!x"), { type: "Not", operand: F("x") });
});

test("arithmetic precedence under comparisons", () => {
  same("x + 1 = 2 * y", "(x + 1) = (2 * y)");
  same("a - b - c", "(a - b) - c");
  same("a + b * c % d", "a + ((b * c) % d)");
  same("-a * b", "(-a) * b");
  same("-a.b", "-(a.b)");
  same("a / b / c", "(a / b) / c");
});

test("in, notIn, like and infix matches are relations", () => {
  assert.deepEqual(body("a NOTIN [1]"), B("notIn", F("a"), { type: "List", elements: [I(1)] }));
  assert.deepEqual(body('city like "Mon%"'), B("like", F("city"), S("Mon%")));
  assert.deepEqual(body('n matches "^J"'), B("matches", F("n"), S("^J")));
  same("a + 1 in b and c", "((a + 1) in b) and c");
});

// ------------------------------------------------------------------ occurs

test("occurs: relative, direction, between and on tails", () => {
  assert.deepEqual(body("t occurs <= 3 days before now"), {
    type: "Occurs",
    subject: F("t"),
    tail: { kind: "relative", op: "<=", amount: 3, unit: "day", direction: "before", ref: { type: "TimeWord", word: "now" } },
  });
  assert.deepEqual(body("t OCCURS = 1 Hour AFTER x.ts").type, "Occurs");
  assert.deepEqual((body("t occurs > 0 milleniums from today") as { tail: unknown }).tail, {
    kind: "relative",
    op: ">",
    amount: 0,
    unit: "millennium",
    direction: "from",
    ref: { type: "TimeWord", word: "today" },
  });
  assert.deepEqual((body("t occurs before today") as { tail: unknown }).tail, {
    kind: "direction",
    direction: "before",
    ref: { type: "TimeWord", word: "today" },
  });
  assert.deepEqual((body("t occurs between date(2024, 1, 1) and today") as { tail: unknown }).tail, {
    kind: "between",
    from: { type: "Call", name: "date", args: [I(2024), I(1), I(1)] },
    to: { type: "TimeWord", word: "today" },
  });
  assert.deepEqual((body("t occurs this month") as { tail: unknown }).tail, {
    kind: "on",
    ref: { type: "RelPeriod", which: "this", unit: "month" },
  });
  same("t occurs on date(2017, 10, 1)", "t occurs date(2017, 10, 1)");
  same("t occurs on yesterday", "t occurs yesterday");
});

test("the first 'and' after between belongs to between", () => {
  same(
    "t occurs between date(2024,1,1) and date(2024,1,31) and a = 1",
    "(t occurs between date(2024,1,1) and date(2024,1,31)) and a = 1",
  );
});

test("occurs subjects are additive expressions and tails end at a postfix reference", () => {
  same("a.b occurs before x.y.z or c", "(a.b occurs before x.y.z) or c");
});

// ----------------------------------------------------------------- binders

test("select with several bindings: variables bound to the right, fields elsewhere", () => {
  assert.deepEqual(body('select A from xEvent where A.t = "x", B from A.items : B = A.k and k'), {
    type: "Select",
    bindings: [
      { variable: "A", source: { type: "XEvent" }, condition: B("=", M(V("A"), "t"), S("x")) },
      { variable: "B", source: M(V("A"), "items"), condition: B("and", B("=", V("B"), M(V("A"), "k")), F("k")) },
    ],
  });
});

test("a variable is not visible in its own source nor left of its binding", () => {
  assert.deepEqual(body("exists X from X.items : X"), {
    type: "Quantifier",
    quantifier: "exists",
    bindings: [{ variable: "X", source: M(F("X"), "items"), condition: V("X") }],
  });
  // …and not after the binder's closing parenthesis.
  assert.deepEqual((body("(forall X from a : X) and X") as { right: Expr }).right, F("X"));
});

test("a variable used left of its binding is refused with its position and its declaration's", () => {
  const refused = (src: string, at: [number, number, number], declared: string, name: string) =>
    assert.throws(
      () => parse(src),
      (e: unknown) => {
        const err = e as { code?: string; message: string; line: number; column: number; endColumn: number };
        assert.equal(err.code, "PQL_VARIABLE_BEFORE_DECLARATION", src);
        assert.equal(
          err.message,
          `The variable '${name}' is used before its declaration at ${declared}: a binding can use only its own variable and those of the bindings to its left`,
          src,
        );
        assert.deepEqual([err.line, err.column, err.endColumn], at, src);
        return true;
      },
    );
  refused("select X from xEvent where Y.a = 1, Y from xEvent", [1, 28, 29], "1:37", "Y");
  refused("exists A from xEvent : A.timestamp < B.timestamp, B from xEvent", [1, 38, 39], "1:51", "B");
  refused("exists A from B.items, B from xEvent", [1, 15, 16], "1:24", "B");
  // The leftmost use, in a nested filter, and the nearest declaration to its right.
  refused("select A from xEvent where A.x[C > 1] or B.y, B from xEvent, C from xEvent : B", [1, 32, 33], "1:62", "C");
  refused("sum A.price over A from xEvent where A.t < B.t,\n  B from xEvent", [1, 44, 45], "2:3", "B");
  // To the right, or bound outside the binder, the same names are variables.
  assert.doesNotThrow(() => parse("exists A from xEvent, B from xEvent : A.timestamp < B.timestamp"));
  assert.doesNotThrow(() => parse("exists B from xEvent : (exists A from xEvent : A.t < B.t, B from A.items)"));
  // Inside `sum VALUE over B from …` the value's binders see B though it is declared to the right;
  // a real forward use there is still refused, once the aggregate's variables are known.
  assert.doesNotThrow(() => parse("sum (exists A from B.items, B from xEvent : A) over B from xEvent"));
  refused("sum (exists A from C.items, C from xEvent : A) over B from xEvent", [1, 20, 21], "1:29", "C");
  // …also when the aggregate's own bindings hold a `sum … over` of their own (it ends first).
  assert.doesNotThrow(() => parse("sum (sum 1 over A from b where Y, Y from c) over Y from d, Z from (sum age over Q from f)"));
  refused("sum (sum 1 over A from b where W, W from c) over Y from d, Z from (sum age over Q from f)", [1, 32, 33], "1:35", "W");
  refused("sum (sum (exists A from C.x, C from B : A) over D from D.y) over B from z", [1, 25, 26], "1:30", "C");
});

test("a scope of many names resolves as a short one does (the parser counts names past 16)", () => {
  // 40 bindings, each reading the previous variable: the later ones are resolved by the count map.
  const n = 40;
  const src = Array.from({ length: n }, (_, i) => (i === 0 ? "X0 from a" : `X${i} from X${i - 1}.b`)).join(", ");
  const sel = body(`select ${src} where X0 = Y and f(X0 => X0, (X5, Z) => X5 = Z) and X39 = X3`) as {
    bindings: { variable: string; source: Expr; condition?: Expr }[];
  };
  assert.equal(sel.bindings.length, n);
  for (let i = 1; i < n; i++) assert.deepEqual(sel.bindings[i]!.source, M(V(`X${i - 1}`), "b"), `X${i}`);
  const L = (params: string[], b: Expr): Expr => ({ type: "Lambda", params, body: b }) as Expr;
  assert.deepEqual(
    sel.bindings[n - 1]!.condition,
    B(
      "and",
      B(
        "and",
        B("=", V("X0"), F("Y")),
        { type: "Call", name: "f", args: [L(["X0"], V("X0")), L(["X5", "Z"], B("=", V("X5"), V("Z")))] } as Expr,
      ),
      // Shadowed by a lambda parameter and then back: still the binding's variable.
      B("=", V("X39"), V("X3")),
    ),
  );
  // After the binder, and in the next parse after one that failed deep in such a scope: fields again.
  assert.deepEqual((body(`(select ${src}) and X0 and Z`) as { left: { right: Expr }; right: Expr }).left.right, F("X0"));
  assert.throws(() => parse(`select ${src} where X0 = )`), { code: "PQL_EXPECTED_EXPRESSION" });
  assert.deepEqual(body("X0 = X39"), B("=", F("X0"), F("X39")));
});

test("exists/forall use ':' or 'where'; conditions are optional", () => {
  same("exists X from a : X > 1", "exists X from a where X > 1");
  assert.deepEqual(body("FORALL O from orders"), {
    type: "Quantifier",
    quantifier: "forall",
    bindings: [{ variable: "O", source: F("orders") }],
  });
});

test("binders extend to the right and take depth-0 commas as new bindings", () => {
  same("a and select X from b where c and d", "a and (select X from b where (c and d))");
  same("not exists X from b : c or d", "not (exists X from b : (c or d))");
  const sel = body("select X from a where f(1, 2), Y from b") as { bindings: unknown[] };
  assert.equal(sel.bindings.length, 2);
});

test("let: the value is additive, the next top-level 'in' separates the body", () => {
  assert.deepEqual(body("let T = a + 1 in T in [1]"), {
    type: "Let",
    variable: "T",
    value: B("+", F("a"), I(1)),
    body: B("in", V("T"), { type: "List", elements: [I(1)] }),
  });
  same("let T = (orders.sum(price)) in (T > 100 and T < 500)", "let T = orders.sum(price) in T > 100 and T < 500");
  assert.deepEqual(body("let T = (x in y) in T").type, "Let");
});

test("sum/average/min/max operator forms, with and without a value", () => {
  assert.deepEqual(body("sum E.price over E from xEvent where E.k = 1"), {
    type: "AggregateOver",
    fn: "sum",
    value: M(V("E"), "price"),
    bindings: [{ variable: "E", source: { type: "XEvent" }, condition: B("=", M(V("E"), "k"), I(1)) }],
  });
  assert.deepEqual(body("AVERAGE X from nums where X > 0"), {
    type: "AggregateOver",
    fn: "average",
    bindings: [{ variable: "X", source: F("nums"), condition: B(">", V("X"), I(0)) }],
  });
  // A field named like the binding variable inside the value is the variable.
  assert.deepEqual((body("max E[k = E.v].count() over E from a") as { value: Expr }).value, {
    type: "Method",
    receiver: { type: "Filter", object: V("E"), condition: B("=", F("k"), M(V("E"), "v")) },
    name: "count",
    args: [],
  });
});

test("lambdas as arguments, and the query's lambda head", () => {
  assert.deepEqual(body("m.map((K, G) => mapEntry(K, G.count()))"), {
    type: "Method",
    receiver: F("m"),
    name: "map",
    args: [
      {
        type: "Lambda",
        params: ["K", "G"],
        body: { type: "Call", name: "mapEntry", args: [V("K"), { type: "Method", receiver: V("G"), name: "count", args: [] }] },
      },
    ],
  });
  assert.deepEqual(body("xs.map(x => x + 1, 2)"), {
    type: "Method",
    receiver: F("xs"),
    name: "map",
    args: [{ type: "Lambda", params: ["x"], body: B("+", V("x"), I(1)) }, I(2)],
  });
  const q = parse("(p, q) => p.a = q");
  assert.deepEqual(q.params, ["p", "q"]);
  assert.deepEqual(stripPositions(q.body), B("=", M(V("p"), "a"), V("q")));
  assert.deepEqual(parse("p => p").params, ["p"]);
  // Parenthesised expressions are not lambdas without the arrow.
  assert.deepEqual(body("(a)"), F("a"));
});

// ------------------------------------------------------------------- chain

test("chain with every clause, any clause order after WHAT, any case", () => {
  const c = body(
    'CHAIN(xEvent, timestamp, [A: WHAT(eventType = "x") WHERE(k = 1) count(5) When(< 8 days before now), B: WHAT(true)])',
  );
  assert.deepEqual(c, {
    type: "Chain",
    source: { type: "XEvent" },
    timestampField: "timestamp",
    steps: [
      {
        label: "A",
        what: B("=", F("eventType"), S("x")),
        where: B("=", F("k"), I(1)),
        count: 5,
        when: { kind: "relative", op: "<", amount: 8, unit: "day", direction: "before", ref: { type: "TimeWord", word: "now" } },
      },
      { label: "B", what: { type: "Literal", kind: "boolean", value: true } },
    ],
  });
  same("not(chain(xEvent, timestamp, [C0: WHAT(true) WHEN(today)]))", "not chain(xEvent, timestamp, [C0: WHAT(true) WHEN(today)])");
});

// ---------------------------------------------------------------- positions

test("nodes carry start/end offsets; the query keeps its source", () => {
  const src = 'person.age >= 21 and xEvent[k = "a"].count() > 0';
  const q = parse(src);
  assert.equal(q.source, src);
  assert.equal(q.start, 0);
  assert.equal(q.end, src.length);
  const and = q.body as Extract<Expr, { type: "Binary" }>;
  assert.deepEqual([and.start, and.end], [0, src.length]);
  const ge = and.left as Extract<Expr, { type: "Binary" }>;
  assert.equal(src.slice(ge.start, ge.end), "person.age >= 21");
  assert.equal(src.slice(ge.left.start, ge.left.end), "person.age");
  const gt = and.right as Extract<Expr, { type: "Binary" }>;
  const count = gt.left as Extract<Expr, { type: "Method" }>;
  assert.equal(src.slice(count.start, count.end), 'xEvent[k = "a"].count()');
  assert.equal(src.slice(count.receiver.start, count.receiver.end), 'xEvent[k = "a"]');
  const neg = parse("  -5 ").body;
  assert.deepEqual([neg.start, neg.end], [2, 4]);
  const occ = parse("t occurs <= 3 days before now").body as Extract<Expr, { type: "Occurs" }>;
  assert.deepEqual([occ.tail.start, occ.tail.end], [9, 29]);
});

test("every node of a parsed query has positions inside the source", () => {
  const src = "select X from xEvent where X.a occurs between date(2024,1,1) and today, Y from X.b : Y > -1";
  const q = parse(src);
  const stack: unknown[] = [q];
  let n = 0;
  while (stack.length) {
    const node = stack.pop();
    if (Array.isArray(node)) stack.push(...node);
    else if (node && typeof node === "object") {
      const o = node as Record<string, unknown>;
      if (typeof o.type === "string") {
        n++;
        assert.ok(typeof o.start === "number" && typeof o.end === "number", `${o.type} has positions`);
        assert.ok((o.start as number) <= (o.end as number) && (o.end as number) <= src.length);
      }
      for (const [k, v] of Object.entries(o)) if (k !== "source" || typeof v !== "string") stack.push(v);
    }
  }
  assert.ok(n > 15);
});

// ---------------------------------------------------------------- hostile

test(`nesting deeper than ${MAX_NESTING} levels is refused with PQL_TOO_DEEP`, () => {
  const deep: Record<string, string> = {
    parentheses: "(".repeat(10_000) + "a" + ")".repeat(10_000),
    not: "not ".repeat(10_000) + "a",
    bang: "!".repeat(10_000) + "a",
    minus: "- ".repeat(10_000) + "a",
    lists: "[".repeat(10_000) + "]".repeat(10_000),
    objects: '{"a": '.repeat(10_000) + "1" + "}".repeat(10_000),
    methods: "a" + ".b()".repeat(10_000),
    members: "a" + ".b".repeat(10_000),
    filters: "a" + "[b]".repeat(10_000),
    "nested filters": "a[".repeat(10_000) + "b" + "]".repeat(10_000),
    calls: "f(".repeat(10_000) + ")".repeat(10_000),
    lets: "let x = 1 in ".repeat(10_000) + "x",
    selects: "select X from ".repeat(10_000) + "a",
  };
  for (const [kind, src] of Object.entries(deep)) {
    assert.throws(
      () => parse(src),
      (e: unknown) =>
        (e as { code?: string }).code === "PQL_TOO_DEEP" &&
        /^Expression nesting exceeds the limit of 200 levels at 1:\d+$/.test((e as Error).message),
      kind,
    );
  }
});

test("nesting up to the limit is accepted", () => {
  const n = MAX_NESTING - 1;
  assert.equal(parse("(".repeat(n) + "a" + ")".repeat(n)).body.type, "Field");
});

// Linear, not merely fast: a quadratic parser would take minutes here. The speed itself
// (parses/s) is measured by bench/pql.ts, not by a timed unit test on a shared machine.
test("a 1 MB disjunction of 50,000 comparisons parses in linear time", () => {
  const src = Array.from({ length: 50_000 }, (_, i) => `person.field${i} = "value${i}"`).join(" or ");
  assert.ok(src.length > 1_000_000);
  const t0 = performance.now();
  const q = parse(src);
  const ms = performance.now() - t0;
  assert.ok(ms < 10_000, `took ${ms} ms`);
  let depth = 0;
  for (let e: Expr = q.body; e.type === "Binary" && e.op === "or"; e = e.left) depth++;
  assert.equal(depth, 49_999);
});

// Each condition names the outermost variable 4 times: searching the scope for it would cost 10⁵ comparisons each.
test("50,000 bindings in one select parse in linear time", () => {
  const binding = (i: number) => `X${i} from X${i - 1}.b where X0 = ${i} or X0 = X0 or X0 = X${i}`;
  const src = "select X0 from a, " + Array.from({ length: 49_999 }, (_, i) => binding(i + 1)).join(", ");
  const t0 = performance.now();
  const sel = parse(src).body as { bindings: { source: Expr }[] };
  const ms = performance.now() - t0;
  assert.ok(ms < 10_000, `took ${ms} ms`);
  assert.equal(sel.bindings.length, 50_000);
  assert.deepEqual(stripPositions(sel.bindings[49_999]!.source), M(V("X49998"), "b"));
});

test("astEqual compares binding and chain sources; only the query's source text is ignored", () => {
  assert.ok(astEqual(parse("a = 1"), parse(" a  =  1 ")));
  assert.ok(!astEqual(parse("select X from a"), parse("select X from b")));
  assert.ok(!astEqual(parse("chain(a, ts, [A: WHAT(true)])"), parse("chain(b, ts, [A: WHAT(true)])")));
  assert.deepEqual(stripPositions(parse("exists X from a")).body, {
    type: "Quantifier",
    quantifier: "exists",
    bindings: [{ variable: "X", source: F("a") }],
  });
});

test("astEqual and stripPositions walk a 50,000-deep spine without recursion", () => {
  const q = parse(Array.from({ length: 50_000 }, (_, i) => `f${i}`).join(" or "));
  const copy = stripPositions(q);
  assert.ok(astEqual(copy, q));
  assert.equal(copy.source, undefined);
  assert.ok(!astEqual(copy, parse(Array.from({ length: 50_000 }, (_, i) => `f${i === 7 ? "x" : i}`).join(" or "))));
});
