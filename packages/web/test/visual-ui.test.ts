/**
 * The visual builder's decisions that need no browser: moving rules between
 * groups (keyboard and drag share them), where a palette item lands, the
 * rules a new item or a new operator starts with, the event editor's reading
 * of type and window, the estimate request and its latest-only scheduling.
 * Results are checked through the PQL the model writes where that is the
 * clearest statement of what happened.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { BuilderEstimates, BuilderField } from "../src/api/types.js";
import { planEstimate, planKey } from "../src/pages/visual/estimate-plan.js";
import { eventTypeOf, filterWindow, shownElsewhere, windowOf } from "../src/pages/visual/event-parts.js";
import type { CanvasEnv } from "../src/pages/visual/env.js";
import { latestOnly, type Timers } from "../src/pages/visual/latest-only.js";
import { conditionOn, eventRuleFor, freeLabel, operandsFor, sequenceRuleFor, stepLabel, valueTypeOfField } from "../src/pages/visual/new-rules.js";
import { parseNumber } from "../src/pages/visual/operand-inputs.js";
import { addItem, firstControlId, matchesQuery } from "../src/pages/visual/palette-items.js";
import { countText } from "../src/pages/visual/rule-counts.js";
import { describePlace, groupName, idMaker, insertRule, locate, moveBy, moveRule, removeRule } from "../src/pages/visual/tree.js";
import type { Group, Rule, VisualModel } from "../src/visual/index.js";
import { MAX_GROUP_DEPTH, emptyModel, pqlToRules, rulesToPql } from "../src/visual/index.js";

function model(pql: string): VisualModel {
  const r = pqlToRules(pql);
  assert.ok(r.ok, pql);
  return r.model;
}

function pql(m: VisualModel | undefined): string {
  assert.ok(m, "the edit is possible");
  return rulesToPql(m);
}

/** The id of the top-level rule (or the nested group's rule) whose PQL alone is `text`. */
function idOf(m: VisualModel, text: string, group: Group = m.root): string {
  for (const c of group.children) {
    if (rulesToPql({ ...m, root: { ...m.root, children: [c] } }) === text) return c.id;
    if (c.kind === "group") {
      const inner = idOf(m, text, c);
      if (inner) return inner;
    }
  }
  return "";
}

const field = (path: string, type: BuilderField["type"], items?: BuilderField["type"]): BuilderField => ({ path, type, ...(items ? { items } : {}), count: 1, examples: [] });

describe("moving rules", () => {
  const m = model("a = 1 and (b = 2 or c = 3) and d = 4");
  const a = idOf(m, "a = 1");
  const d = idOf(m, "d = 4");
  const b = idOf(m, "b = 2");
  const group = m.root.children[1]!.id;

  it("up and down within the group, and not past its ends", () => {
    assert.equal(pql(moveBy(m, d, "up")), "a = 1 and d = 4 and (b = 2 or c = 3)");
    assert.equal(pql(moveBy(m, a, "down")), "(b = 2 or c = 3) and a = 1 and d = 4");
    assert.equal(moveBy(m, a, "up"), undefined);
    assert.equal(moveBy(m, d, "down"), undefined);
  });

  it("into the group above (to its end), else the group below (to its start); out to just after its group", () => {
    assert.equal(pql(moveBy(m, d, "into")), "a = 1 and (b = 2 or c = 3 or d = 4)");
    assert.equal(pql(moveBy(m, a, "into")), "(a = 1 or b = 2 or c = 3) and d = 4");
    assert.equal(pql(moveBy(m, b, "out")), "a = 1 and c = 3 and b = 2 and d = 4");
    assert.equal(moveBy(m, a, "out"), undefined, "the top level has no outside");
    assert.equal(moveBy(m, b, "into"), undefined, "no group next to it");
  });

  it("steps over siblings shown elsewhere (an event's type and window)", () => {
    const e = model('xEvent[eventType = "x" and timestamp occurs <= 2 hours before now and price > 3 and qty = 1].count() >= 1');
    const filter = (e.root.children[0] as Extract<Rule, { kind: "event" }>).filter;
    const hidden = shownElsewhere(filter, true);
    assert.equal(hidden.size, 2);
    const price = filter.children[2]!.id;
    assert.equal(moveBy(e, price, "up", hidden), undefined, "nothing visible above it");
    const qty = filter.children[3]!.id;
    assert.equal(pql(moveBy(e, qty, "up", hidden)), 'xEvent[eventType = "x" and timestamp occurs <= 2 hours before now and qty = 1 and price > 3].count() >= 1');
  });

  it("a move keeps the rule in its context and never puts a group inside itself", () => {
    const e = model('country = "US" and xEvent[eventType = "x" and price > 3].count() >= 1');
    const country = e.root.children[0]!.id;
    const filter = (e.root.children[1] as Extract<Rule, { kind: "event" }>).filter;
    assert.equal(moveRule(e, country, filter.id, 0), undefined, "a profile condition does not go into an event filter");
    assert.equal(moveRule(e, filter.children[1]!.id, e.root.id, 0), undefined, "an event condition does not leave its event");
    assert.equal(moveRule(m, group, group, 0), undefined);
    assert.equal(moveRule(m, a, m.root.id, 1), undefined, "dropping a rule where it is changes nothing");
    assert.equal(pql(moveRule(m, a, m.root.id, 3)), "(b = 2 or c = 3) and d = 4 and a = 1");
  });

  it("removes rules but not root groups; refuses groups deeper than the model allows", () => {
    assert.equal(pql(removeRule(m, group)), "a = 1 and d = 4");
    assert.equal(removeRule(m, m.root.id), undefined);
    let deep = emptyModel();
    let at = deep.root.id;
    const newId = idMaker(deep);
    for (let depth = 2; depth <= MAX_GROUP_DEPTH; depth++) {
      const g: Group = { kind: "group", id: newId(), mode: "include", combinator: "and", children: [] };
      deep = insertRule(deep, at, g)!;
      at = g.id;
    }
    assert.equal(insertRule(deep, at, { kind: "group", id: newId(), mode: "include", combinator: "and", children: [] }), undefined);
    assert.ok(insertRule(deep, at, { kind: "condition", id: newId(), field: "a", operator: "exists", operands: [] }));
  });

  it("says where a rule is, for the announcement after a move", () => {
    const moved = moveBy(m, d, "into")!;
    assert.equal(describePlace(moved, d), "position 3 of 3 in group 1");
    assert.equal(describePlace(m, a), "position 1 of 3 in the top level");
    assert.equal(groupName(m, group), "group 1");
  });

  it("makes ids the model does not use, never twice", () => {
    const make = idMaker(m, "r");
    const ids = [make(), make(), make()];
    assert.equal(new Set(ids).size, 3);
    for (const id of ids) assert.equal(locate(m, id), undefined);
  });
});

describe("palette items", () => {
  const types = ["commerce.purchases", "web.pageViews"];

  it("an attribute becomes a condition of its type; an event type an event count", () => {
    const start = emptyModel();
    const age = addItem(start, { kind: "attribute", field: field("person.age", "integer") }, start.root.id, undefined, types)!;
    assert.equal(pql(age.model), "person.age = 0");
    assert.equal(firstControlId(age.rule), `${age.rule.id}-op`);
    const ev = addItem(age.model, { kind: "eventType", eventType: "commerce.purchases" }, start.root.id, 0, types)!;
    assert.equal(pql(ev.model), 'xEvent[eventType = "commerce.purchases"].count() >= 1 and person.age = 0');
  });

  it("an event field is a filter inside an event, and an event with that filter elsewhere", () => {
    const e = model('xEvent[eventType = "commerce.purchases"].count() >= 1');
    const filter = (e.root.children[0] as Extract<Rule, { kind: "event" }>).filter;
    const price = field("commerce.order.priceTotal", "number");
    const inside = addItem(e, { kind: "eventField", eventType: "commerce.purchases", field: price }, filter.id, undefined, types)!;
    assert.equal(pql(inside.model), 'xEvent[eventType = "commerce.purchases" and commerce.order.priceTotal = 0].count() >= 1');
    const outside = addItem(e, { kind: "eventField", eventType: "web.pageViews", field: field("web.name", "string") }, e.root.id, undefined, types)!;
    assert.equal(pql(outside.model), 'xEvent[eventType = "commerce.purchases"].count() >= 1 and xEvent[eventType = "web.pageViews" and web.name = ""].count() >= 1');
  });

  it("profile-only items dropped on an event's conditions go to the group holding the event", () => {
    const e = model('a = 1 and (b = 2 or xEvent[eventType = "x"].count() >= 1)');
    const inner = e.root.children[1] as Group;
    const filter = (inner.children[1] as Extract<Rule, { kind: "event" }>).filter;
    const added = addItem(e, { kind: "audience", id: "seg-1", name: "Buyers" }, filter.id, 0, types)!;
    assert.equal(added.groupId, inner.id);
    assert.equal(pql(added.model), 'a = 1 and (b = 2 or xEvent[eventType = "x"].count() >= 1 or inSegment("seg-1"))');
  });

  it("a sequence starts with the two most frequent event types; an exclude group writes not (…)", () => {
    const start = emptyModel();
    const seq = addItem(start, { kind: "sequence" }, start.root.id, undefined, types)!;
    assert.equal(pql(seq.model), 'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases"), B: WHAT(eventType = "web.pageViews")])');
    const ex = addItem(seq.model, { kind: "group", mode: "exclude" }, start.root.id, undefined, types)!;
    const withAudience = addItem(ex.model, { kind: "audience", id: "s", name: "S" }, ex.rule.id, undefined, types)!;
    assert.match(pql(withAudience.model), / and not inSegment\("s"\)$/);
  });

  it("search matches every word, in any case", () => {
    assert.equal(matchesQuery("commerce.order.priceTotal", "ORDER price"), true);
    assert.equal(matchesQuery("commerce.order.priceTotal", "order tax"), false);
    assert.equal(matchesQuery("anything", "  "), true);
  });
});

describe("new rules and operators", () => {
  it("maps the palette's types to the operators' value types", () => {
    assert.deepEqual((["string", "integer", "number", "boolean", "date", "date-time", "array", "object"] as const).map(valueTypeOfField),
      ["text", "number", "number", "boolean", "date", "date", "array", "text"]);
    assert.equal(rulesToPql({ ...emptyModel(), root: { ...emptyModel().root, children: [conditionOn("c", "birthDate", "date")] } }), "birthDate occurs <= 7 days before now");
    assert.equal(rulesToPql({ ...emptyModel(), root: { ...emptyModel().root, children: [conditionOn("c", "tags", "array", "integer")] } }), "tags.includes(0)");
  });

  it("keeps the typed value when the operator changes, where it still fits", () => {
    const typed = [{ kind: "string" as const, value: "gold" }];
    assert.deepEqual(operandsFor("contains", "text", typed), typed);
    assert.deepEqual(operandsFor("in", "text", typed), typed);
    assert.deepEqual(operandsFor("between", "number", [{ kind: "integer", value: 5 }]), [{ kind: "integer", value: 5 }, { kind: "integer", value: 5 }]);
    assert.deepEqual(operandsFor("exists", "text", typed), []);
    assert.deepEqual(operandsFor("inLast", "date", []), [{ kind: "duration", amount: 7, unit: "day" }]);
    const now = new Date(Date.UTC(2024, 1, 29, 12));
    assert.deepEqual(operandsFor("dateBefore", "date", [], now), [{ kind: "date", year: 2024, month: 2, day: 29 }]);
    assert.deepEqual(operandsFor("relative", "date", [], now)[1], { kind: "time", word: "now" });
  });

  it("labels steps A, B, … and never reuses one", () => {
    assert.deepEqual([0, 1, 25, 26].map(stepLabel), ["A", "B", "Z", "C26"]);
    let n = 0;
    const seq = sequenceRuleFor(() => `s${++n}`, ["x"]);
    seq.steps[0]!.label = "B";
    assert.equal(freeLabel(seq), "C");
  });

  it("reads numbers as PQL does: whole numbers are integers unless written with a point", () => {
    assert.deepEqual(parseNumber(" 42 "), { kind: "integer", value: 42 });
    assert.deepEqual(parseNumber("-2.5"), { kind: "double", value: -2.5 });
    assert.deepEqual(parseNumber("3."), { kind: "double", value: 3 });
    for (const bad of ["", "1.2.3", "abc", "1e400", "99999999999999999999"]) assert.equal(parseNumber(bad), undefined, bad);
  });
});

describe("event type and window", () => {
  let n = 0;
  const env = { newId: () => `w${++n}` } as unknown as CanvasEnv;

  it("reads the type and the window of an `and` filter, not of an `or` one", () => {
    const and = model('xEvent[eventType = "x" and timestamp occurs <= 2 hours before now].count() >= 1');
    const f = (and.root.children[0] as Extract<Rule, { kind: "event" }>).filter;
    assert.equal(eventTypeOf(f)?.operands[0]?.kind, "string");
    assert.equal(windowOf(f)?.operator, "inLast");
    const or = model('xEvent[eventType = "x" or timestamp occurs <= 2 hours before now].count() >= 1');
    const g = (or.root.children[0] as Extract<Rule, { kind: "event" }>).filter;
    assert.equal(eventTypeOf(g), undefined);
    assert.equal(windowOf(g), undefined);
  });

  it("adds a window after the type, and beside an `or` filter by grouping it first", () => {
    const e = eventRuleFor(() => `e${++n}`, "x");
    const m: VisualModel = { ...emptyModel(), root: { ...emptyModel().root, children: [e] } };
    filterWindow(e.filter, env).set({ operator: "inLast", operands: [{ kind: "duration", amount: 30, unit: "day" }] });
    assert.equal(rulesToPql(m), 'xEvent[eventType = "x" and timestamp occurs <= 30 days before now].count() >= 1');
    filterWindow(e.filter, env).set(undefined);
    assert.equal(rulesToPql(m), 'xEvent[eventType = "x"].count() >= 1');
    const or = model('xEvent[a = 1 or b = 2].count() >= 1');
    const f = (or.root.children[0] as Extract<Rule, { kind: "event" }>).filter;
    filterWindow(f, env).set({ operator: "inLast", operands: [{ kind: "duration", amount: 2, unit: "hour" }] });
    assert.equal(rulesToPql(or), "xEvent[timestamp occurs <= 2 hours before now and (a = 1 or b = 2)].count() >= 1");
  });
});

describe("the estimate request", () => {
  it("asks for the whole expression and each top-level rule once", () => {
    const m = model("a = 1 and (b = 2 or c = 3)");
    const whole = rulesToPql(m);
    const plan = planEstimate(whole, m);
    assert.deepEqual(plan.expressions, [whole, "a = 1", "b = 2 or c = 3"]);
    assert.deepEqual([...plan.rules.values()], [1, 2]);
    const single = model("a = 1");
    assert.deepEqual(planEstimate("a = 1", single).expressions, ["a = 1"], "a lone rule is the whole expression");
    assert.deepEqual([...planEstimate("a = 1", single).rules.values()], [0]);
    assert.deepEqual(planEstimate("a = 1", undefined).expressions, ["a = 1"], "no rules shown: the whole only");
  });

  it("names rules it leaves out: empty groups, incomplete rules, and those past the 20-expression limit", () => {
    const m = model(Array.from({ length: 22 }, (_, i) => `f${i} = ${i}`).join(" and "));
    const plan = planEstimate(rulesToPql(m), m);
    assert.equal(plan.expressions.length, 20);
    assert.deepEqual([...plan.uncounted.values()], ["limit", "limit", "limit"]);
    const withEmpty = model("a = 1");
    withEmpty.root.children.push({ kind: "group", id: "g", mode: "include", combinator: "and", children: [] });
    withEmpty.root.children.push({ kind: "condition", id: "bad", field: "b", operator: "between", operands: [] });
    const p = planEstimate("a = 1", withEmpty);
    assert.deepEqual([p.uncounted.get("g"), p.uncounted.get("bad")], ["empty", "invalid"]);
    assert.notEqual(planKey(p, "none"), planKey(p, "pdg"), "the identity graph is part of the question");
  });

  it("words a rule's count for the card and for screen readers", () => {
    const c = countText({ estimate: { estimatedSize: 1234, standardError: 1, estimatedSizeRange: { low: 1200, high: 1270 }, profilesReadSoFar: 1, profilesMatchedSoFar: 1 }, stale: false });
    assert.match(c.text, /^≈ 1.234$/);
    assert.match(c.label, /^About 1.234 profiles match this rule alone \(95% interval 1.200 to 1.270\)$/);
    assert.equal(countText({ state: "limit" }).text, "not counted");
  });
});

describe("latest-only scheduling", () => {
  function fakeTimers() {
    let now = 0;
    const pending: { at: number; fn: () => void; id: number }[] = [];
    let next = 0;
    const timers: Timers = {
      set: (fn, ms) => {
        pending.push({ at: now + ms, fn, id: ++next });
        return next;
      },
      clear: (h) => {
        const i = pending.findIndex((p) => p.id === h);
        if (i >= 0) pending.splice(i, 1);
      },
    };
    const advance = (ms: number) => {
      now += ms;
      for (let p = pending.find((x) => x.at <= now); p; p = pending.find((x) => x.at <= now)) {
        pending.splice(pending.indexOf(p), 1);
        p.fn();
      }
    };
    return { timers, advance };
  }

  it("debounces, runs one job at a time, and then only the newest input", async () => {
    const { timers, advance } = fakeTimers();
    const started: string[] = [];
    const finished: string[] = [];
    const resolvers: (() => void)[] = [];
    const runner = latestOnly<string, BuilderEstimates | string>({
      delayMs: 300,
      timers,
      run: (input) => {
        started.push(input);
        return new Promise((res) => resolvers.push(() => res(input)));
      },
      done: (input, r) => finished.push(`${input}:${r.ok}`),
    });
    runner.push("a");
    advance(200);
    runner.push("ab");
    advance(200);
    assert.deepEqual(started, [], "still typing");
    advance(100);
    assert.deepEqual(started, ["ab"]);
    runner.push("abc");
    runner.push("abcd");
    advance(1000);
    assert.deepEqual(started, ["ab"], "one request in flight at most");
    assert.equal(runner.busy(), true);
    resolvers.shift()!();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, ["ab", "abcd"], "then the newest input only");
    resolvers.shift()!();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(finished, ["ab:true", "abcd:true"]);
    assert.equal(runner.busy(), false);
    runner.push("x");
    runner.cancel();
    advance(1000);
    assert.deepEqual(started, ["ab", "abcd"], "a cancelled input never runs");
  });
});
