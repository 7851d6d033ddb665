/**
 * The cost model (cost.ts) and the work budget (runtime/budget.ts): the model's
 * figures for the expressions, its refusal through check(), the budget
 * stopping the interpreter and the compiled closures, and the property that the
 * model never under-estimates what the evaluators charge on data within its limits.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { check } from "../src/check.js";
import { compile } from "../src/compile.js";
import { costDiagnostic, estimateCost } from "../src/cost.js";
import { evaluate, traceEvaluation } from "../src/evaluate.js";
import { PqlError } from "../src/errors.js";
import { parse } from "../src/parser.js";
import { BudgetExceededError, WorkBudget } from "../src/runtime/budget.js";
import { queryArbitrary } from "./support/ast-arbitrary.js";

const THREE = `exists X from xEvent, Y from xEvent, Z from xEvent : X.timestamp < Y.timestamp and Y.timestamp < Z.timestamp and Z.eventType = "zz"`;
const NESTED = `exists X from xEvent : exists Y from xEvent : exists Z from xEvent : X.timestamp < Y.timestamp and Y.timestamp < Z.timestamp`;
const TWO = `exists X from xEvent, Y from xEvent : X.eventType = "a" and Y.eventType = "b" and X.timestamp < Y.timestamp`;

const events = (n: number) => Array.from({ length: n }, (_, i) => ({ eventType: i === n - 1 ? "b" : "a", timestamp: 1_700_000_000_000 + i * 1000 }));

test("bindings over xEvent multiply, siblings add: E + E² + E³ for three bindings, the same nested", () => {
  for (const E of [1, 7, 10, 1000]) {
    const lim = { eventsPerProfile: E, itemsPerArray: 50 };
    assert.equal(estimateCost(THREE, lim).units, E + E * E + E * E * E);
    assert.equal(estimateCost(NESTED, lim).units, E + E * E + E * E * E);
    assert.equal(estimateCost(TWO, lim).units, E + E * E);
    assert.equal(estimateCost(THREE, lim).eventDegree, 3);
    assert.equal(estimateCost(TWO, lim).eventDegree, 2);
  }
  // A filter over events is one loop; an item-context method inside it multiplies by the array bound.
  assert.deepEqual(estimateCost(`xEvent[eventType = "a"].count() > 1`, { eventsPerProfile: 100, itemsPerArray: 7 }).units, 100);
  assert.equal(estimateCost(`xEvent[productListItems.exists(SKU = "a")].count() > 1`, { eventsPerProfile: 100, itemsPerArray: 7 }).units, 100 + 100 * 7);
  // A projection through events holds up to E × A items.
  assert.equal(estimateCost(`exists P from xEvent.productListItems : P.SKU = "a"`, { eventsPerProfile: 100, itemsPerArray: 7 }).units, 700);
  assert.equal(estimateCost(`person.name = "x" and homeAddress.countryCode = "US"`, { eventsPerProfile: 100, itemsPerArray: 7 }).units, 0);
  // let-bound events keep their bound.
  assert.equal(estimateCost(`let evs = xEvent[eventType = "a"] in exists X from evs, Y from evs : X.timestamp < Y.timestamp`, { eventsPerProfile: 10, itemsPerArray: 3 }).units, 10 + 10 + 100);
});

test("the heaviest construct is the outermost loop of the heaviest nest, with its text and position", () => {
  const text = `person.age > 3 and xEvent[eventType = "x"].count() > 0 and ${NESTED}`;
  const est = estimateCost(text, { eventsPerProfile: 100, itemsPerArray: 10 });
  assert.equal(est.construct?.kind, "Quantifier");
  assert.equal(est.construct?.start, text.indexOf("exists X"));
  assert.equal(est.construct?.end, text.length);
  assert.equal(est.construct?.eventDegree, 3);
  assert.ok(est.construct?.text.startsWith("exists X from xEvent : exists Y from xEvent : exists Z"));
  assert.ok(est.construct!.text.length <= 120);
});

test("check refuses a query over the bound with PQL_TOO_COSTLY at the construct, and accepts E² under it", () => {
  const cost = { eventsPerProfile: 10_000, itemsPerArray: 10_000, maxUnits: 1_000_000_000 };
  const text = `person.age > 3 and ${THREE}`;
  const diags = check(text, { cost });
  assert.equal(diags.length, 1);
  const d = diags[0]!;
  assert.equal(d.code, "PQL_TOO_COSTLY");
  assert.equal(d.severity, "error");
  assert.deepEqual([d.line, d.column, d.endLine, d.endColumn], [1, 20, 1, text.length + 1]);
  assert.equal(
    d.message,
    `'exists X from xEvent, Y from xEvent, Z from xEvent : X.timestamp < Y.timestamp and Y.timestamp < Z.timestamp and Z.ev...' nests 3 loops over xEvent (E^3), so it may need 1,000,100,010,000 units of work per profile at 10,000 events per profile; the limit is 1,000,000,000. Combine the conditions into fewer bindings over xEvent (two are allowed), or split the definition`,
  );
  assert.deepEqual(check(TWO, { cost }), []);
  assert.deepEqual(check(NESTED, { cost }).map((x) => x.code), ["PQL_TOO_COSTLY"]);
  // Without the option nothing changes; other errors come first and alone.
  assert.deepEqual(check(THREE), []);
  assert.deepEqual(check(`${THREE} and nosuchfn(1)`, { cost }).map((x) => x.code), ["PQL_UNKNOWN_FUNCTION"]);
  assert.equal(costDiagnostic(TWO, parse(TWO), cost), null);
});

test("a budget stops the interpreter, the trace and the compiled closures; without one nothing changes", () => {
  const data = { profile: {}, events: events(60), now: 1_700_000_100_000 };
  const q = parse(THREE);
  const runs = [["interpreter", () => evaluate(q, data)], ["trace", () => traceEvaluation(q, data).value], ["closures", () => compile(q)(data)]] as const;
  for (const [name, run] of runs) {
    assert.equal(run(), false);
    const b = new WorkBudget({ unitsPerEvaluation: 5000 });
    assert.throws(() => b.run(run), (e: unknown) => e instanceof BudgetExceededError && e.limit === 5000 && e.spent > 5000 && e.spent <= 5000 + 60);
    assert.ok(b.spent <= 5060);
    assert.equal(b.evaluations, 1);
    // Enough units: the same answer. The interpreter spends what the model says at E = 60 (exists with
    // no match runs everything); the closures test `X.timestamp < Y.timestamp` before Z's loop
    // (hoist.ts), so only the 1,770 ordered pairs of 60 events enter it: 60 + 60² + 1,770 × 60.
    const enough = new WorkBudget({ unitsPerEvaluation: 1e9 });
    assert.equal(enough.run(run), false);
    const model = estimateCost(q, { eventsPerProfile: 60, itemsPerArray: 1 }).units;
    assert.equal(model, 60 + 60 * 60 + 60 * 60 * 60);
    assert.equal(enough.spent, name === "closures" ? 60 + 60 * 60 + 1770 * 60 : model, name);
  }
});

test("the closures test a conjunct at the shallowest binding it reads: independent bindings cost E + E², not E³", () => {
  // Only "b" (the latest event) passes Y's test, no event passes X's: X's loop alone decides.
  const two = compile(`exists X from xEvent, Y from xEvent : Y.eventType = "b" and X.eventType = "zz"`);
  const b = new WorkBudget({ unitsPerEvaluation: 1e9 });
  assert.equal(b.run(() => two({ profile: {}, events: events(300), now: 0 })), false);
  assert.equal(b.spent, 300);
  // A conjunct that reads the implicit item, or one of a name bound twice, stays where it was written.
  const implicit = compile(`exists X from xEvent, Y from xEvent : Y.eventType = "b" and eventType = "zz"`);
  const c = new WorkBudget({ unitsPerEvaluation: 1e9 });
  assert.equal(c.run(() => implicit({ profile: {}, events: events(30), now: 0 })), false);
  assert.equal(c.spent, 30 + 30 * 30);
  // The answers are the interpreter's (runtime.property.test.ts checks random trees).
  for (const text of [`exists X from xEvent, Y from xEvent : Y.eventType = "b" and X.eventType = "a"`, `select X from xEvent, Y from xEvent : X.timestamp > Y.timestamp and Y.eventType = "b"`,
    `sum X.timestamp over X from xEvent, Y from xEvent where Y.eventType = "b" and X.eventType = "a" and X.timestamp < 1700000002000`]) {
    const data = { profile: {}, events: events(5), now: 0 };
    assert.deepEqual(compile(text)(data), evaluate(parse(text), data), text);
  }
});

test("units are counted per evaluation (profile); the checkpoint sees each start and every checkEvery units", () => {
  // No pair matches (the only "b" is the latest event), so every pair is visited: 30 + 30² units per profile.
  const f = compile(`exists X from xEvent, Y from xEvent : X.timestamp > Y.timestamp and Y.eventType = "b"`);
  const phases: string[] = [];
  const b = new WorkBudget({ unitsPerEvaluation: 30 * 30 + 30, checkpoint: (p) => phases.push(p), checkEvery: 100 });
  b.run(() => {
    for (let i = 0; i < 3; i++) f({ profile: {}, events: events(30), now: 0 });
  });
  assert.equal(b.evaluations, 3);
  assert.equal(b.spent, 3 * (30 + 30 * 30));
  assert.equal(phases.filter((p) => p === "begin").length, 3);
  // A check at least every 100 units, give or take one charge (30 units here).
  const checks = phases.filter((p) => p === "check").length;
  assert.ok(checks >= Math.floor(b.spent / 130) && checks <= Math.floor(b.spent / 100), `${checks} checks`);
  // A checkpoint that throws (a deadline) stops the evaluation with its error.
  const stop = new WorkBudget({ unitsPerEvaluation: 1e9, checkpoint: (p) => { if (p === "check") throw new Error("deadline"); }, checkEvery: 50 });
  assert.throws(() => stop.run(() => f({ profile: {}, events: events(30), now: 0 })), /deadline/);
  assert.ok(stop.spent < 30 * 30);
});

/** Every JSON node of a value: an upper bound of any array or projection inside it. */
function nodes(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((s: number, x) => s + nodes(x), 0);
  if (v !== null && typeof v === "object") return 1 + Object.values(v).reduce((s: number, x) => s + nodes(x), 0);
  return 1;
}

const scalar = fc.oneof(fc.integer({ min: -5, max: 50 }), fc.constantFrom("a", "b", "2024-03-14", "2024-03-15T10:00:00Z"), fc.boolean(), fc.constant(null));
const item = fc.record(
  {
    age: scalar,
    eventType: fc.constantFrom("a", "b", "zz"),
    timestamp: fc.integer({ min: 1_700_000_000_000, max: 1_700_009_000_000 }),
    k: scalar,
    tags: fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 3 }),
  },
  { requiredKeys: [] },
);
const dataArb = fc.record({
  profile: fc.record({ age: scalar, items: fc.array(item, { maxLength: 4 }), tags: fc.array(scalar, { maxLength: 4 }), person: fc.record({ items: fc.array(item, { maxLength: 3 }) }) }, { requiredKeys: [] }),
  events: fc.array(item, { maxLength: 6 }),
});

/** The units `run` charges, under a budget of `limit` (which an under-estimate breaks). */
function spent(run: () => unknown, limit: number): number | null {
  const b = new WorkBudget({ unitsPerEvaluation: limit });
  try {
    b.run(run);
  } catch (e) {
    if (e instanceof PqlError) return null; // a query the runtime refuses costs nothing to compare
    if (e instanceof BudgetExceededError) assert.fail(`charged more than the estimate of ${limit}`);
    throw e;
  }
  return b.spent;
}

test("property: the model never under-estimates the units the interpreter and the compiled closures charge", () => {
  fc.assert(
    fc.property(queryArbitrary({ maxDepth: 4 }), dataArb, (q, data) => {
      const ctx = { profile: data.profile as Record<string, unknown>, events: data.events as Record<string, unknown>[], now: 1_700_000_000_000 };
      const limits = { eventsPerProfile: ctx.events.length, itemsPerArray: Math.max(nodes(ctx.profile), ...ctx.events.map(nodes)) };
      const est = estimateCost(q, limits).units;
      // The estimate is also the budget: an evaluation that would run past it stops there.
      for (const run of [() => evaluate(q, ctx), () => compile(q)(ctx)]) {
        const used = spent(run, est);
        if (used !== null) assert.ok(used <= est, `charged ${used} > estimated ${est}`);
      }
    }),
    { numRuns: 1500 },
  );
});

test("property: the model is monotone in the events per profile and the array bound", () => {
  fc.assert(
    fc.property(queryArbitrary({ maxDepth: 4 }), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 20 }), (q, e, a, more) => {
      const base = estimateCost(q, { eventsPerProfile: e, itemsPerArray: a }).units;
      assert.ok(estimateCost(q, { eventsPerProfile: e + more, itemsPerArray: a }).units >= base);
      assert.ok(estimateCost(q, { eventsPerProfile: e, itemsPerArray: a + more }).units >= base);
      assert.ok(!Number.isNaN(base));
    }),
    { numRuns: 1000 },
  );
});
