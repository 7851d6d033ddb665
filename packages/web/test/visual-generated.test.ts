/**
 * Generated round trips for the visual builder (issue #29), where the PQL
 * package's random trees rarely reach: (1) trees made of the shapes the
 * builder writes and of near misses (the same shapes one detail off), nested
 * in and/or/not — always exact, and with no near miss never a block;
 * (2) models a UI could build — written, read back, equal to their normal
 * form, ids kept when the previous model is passed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { ChainStep, CmpOp, Expr, OccursTail, Query, TimeRef } from "@segmentd/pql";
import { TIME_UNITS, astEqual, format, parse } from "@segmentd/pql";
import { exprArbitrary } from "../../pql/test/support/ast-arbitrary.js";
import type { Group, Operand, Rule, SequenceStep, TimeCondition, VisualModel } from "../src/visual/index.js";
import { OPERATORS, normalize, pqlToRules, rulesToPql, validateModel } from "../src/visual/index.js";
import type { OperandKind, OperatorId } from "../src/visual/operators.js";
import { queryOf } from "../src/visual/build.js";
import { readQuery } from "../src/visual/from-pql.js";

type Gen = fc.GeneratorValue;
const CMP: CmpOp[] = ["=", "!=", "<", "<=", ">", ">="];
const FIELDS = ["age", "person.age", "homeAddress.countryCode", "person.birthDate", "a.b.c", "eventType", "timestamp", "tags", "_acme.x", "commerce.order.priceTotal"];
const pick = <T>(g: Gen, xs: readonly T[]): T => xs[g(fc.integer, { min: 0, max: xs.length - 1 })]!;
const chance = (g: Gen, p: number) => g(fc.integer, { min: 0, max: 999 }) < p * 1000;
const int = (g: Gen, min: number, max: number) => g(fc.integer, { min, max });

function path(name: string): Expr {
  const [first, ...rest] = name.split(".");
  return rest.reduce<Expr>((object, n) => ({ type: "Member", object, name: n }), { type: "Field", name: first! });
}
function lit(kind: "string" | "integer" | "double" | "boolean", value: string | number | boolean): Expr {
  return { type: "Literal", kind, value };
}
const bin = (op: string, left: Expr, right: Expr) => ({ type: "Binary", op, left, right }) as Expr;
const call = (name: string, args: Expr[] = []): Expr => ({ type: "Call", name, args });
const meth = (receiver: Expr, name: string, args: Expr[] = []): Expr => ({ type: "Method", receiver, name, args });

/** A leaf and whether the builder has a rule for it. */
type Leaf = { e: Expr; rep: boolean };

class TreeGen {
  constructor(private readonly g: Gen) {}

  scalar(kinds: ("string" | "integer" | "double" | "boolean")[] = ["string", "integer", "double", "boolean"]): Expr {
    const g = this.g;
    switch (pick(g, kinds)) {
      case "string":
        return lit("string", g(fc.string, { maxLength: 6 }));
      case "integer":
        return lit("integer", int(g, -1000, 1000));
      case "double":
        return lit("double", chance(g, 0.5) ? int(g, -400, 400) / 4 : g(fc.double, { noNaN: true, noDefaultInfinity: true }));
      default:
        return lit("boolean", chance(g, 0.5));
    }
  }

  timeRef(): { ref: TimeRef; rep: boolean } {
    const g = this.g;
    switch (int(g, 0, 4)) {
      case 0:
        return { ref: { type: "TimeWord", word: pick(g, ["now", "today", "yesterday", "tomorrow"] as const) }, rep: true };
      case 1:
        return { ref: { type: "RelPeriod", which: pick(g, ["this", "last", "next"] as const), unit: pick(g, TIME_UNITS) }, rep: true };
      case 2:
      case 3: {
        const month = chance(g, 0.9) ? int(g, 1, 12) : 13;
        return { ref: call("date", [lit("integer", int(g, 1900, 2100)), lit("integer", month), lit("integer", int(g, 1, 28))]), rep: month <= 12 };
      }
      default:
        return { ref: path(pick(g, FIELDS)), rep: false };
    }
  }

  tail(): { tail: OccursTail; rep: boolean } {
    const g = this.g;
    const a = this.timeRef();
    switch (int(g, 0, 3)) {
      case 0:
        return { tail: { kind: "on", ref: a.ref }, rep: a.rep };
      case 1: {
        const direction = pick(g, ["before", "after", "from"] as const);
        return { tail: { kind: "direction", direction, ref: a.ref }, rep: a.rep && direction !== "from" };
      }
      case 2: {
        const b = this.timeRef();
        return { tail: { kind: "between", from: a.ref, to: b.ref }, rep: a.rep && b.rep };
      }
      default: {
        const ref: TimeRef = chance(g, 0.5) ? { type: "TimeWord", word: "now" } : a.ref;
        const tail: OccursTail = { kind: "relative", op: pick(g, CMP), amount: int(g, 0, 500), unit: pick(g, TIME_UNITS), direction: pick(g, ["before", "after", "from"] as const), ref };
        return { tail, rep: ref.type === "TimeWord" || a.rep };
      }
    }
  }

  /** A condition on a field, as the builder writes it or one detail off. */
  condition(): Leaf {
    const g = this.g;
    const f = path(pick(g, FIELDS));
    switch (int(g, 0, 11)) {
      case 0: {
        const op = pick(g, CMP);
        const v = this.scalar();
        const isBool = v.type === "Literal" && v.kind === "boolean";
        return { e: bin(op, f, v), rep: !isBool || op === "=" || op === "!=" };
      }
      case 1:
        return chance(g, 0.85) ? { e: bin(pick(g, ["in", "notIn"]), f, { type: "List", elements: [this.scalar(), this.scalar()] }), rep: true } : { e: bin("in", f, path("other")), rep: false };
      case 2: {
        const name = pick(g, ["contains", "doesNotContain", "startsWith", "doesNotStartWith", "endsWith", "doesNotEndWith", "equals", "notEqualTo"]);
        const flag = int(g, 0, 2);
        const args = [lit("string", g(fc.string, { maxLength: 4 })), ...(flag === 0 ? [] : [lit("boolean", flag === 2)])];
        return { e: meth(f, name, args), rep: flag === 1 || (flag === 0 && name !== "equals" && name !== "notEqualTo") };
      }
      case 3:
        return chance(g, 0.8) ? { e: bin("like", f, lit("string", "a%")), rep: true } : { e: meth(f, "contains", [lit("integer", 1)]), rep: false };
      case 4: {
        const name = pick(g, ["includes", "intersects", "supersetOf", "subsetOf", "matches"]);
        const arg = name === "includes" ? this.scalar() : name === "matches" ? lit("string", "^a") : { type: "List" as const, elements: [this.scalar()] };
        return { e: meth(f, name, [arg]), rep: true };
      }
      case 5:
        return { e: meth(f, pick(g, ["isNull", "isNotNull"])), rep: true };
      case 6:
      case 7: {
        const t = this.tail();
        return { e: { type: "Occurs", subject: f, tail: t.tail }, rep: t.rep };
      }
      case 8: {
        const name = pick(g, FIELDS);
        const same = chance(g, 0.8);
        const lo = bin(">=", path(name), this.scalar(["integer", "double"]));
        return { e: bin("and", lo, bin("<=", path(same ? name : "zz"), this.scalar(["integer", "double"]))), rep: true };
      }
      case 9: {
        const name = pick(g, FIELDS);
        const m = bin("=", meth(path(name), "getMonth"), call("currentMonth"));
        return { e: bin("and", m, bin("=", meth(path(name), "getDayOfMonth"), call("currentDayOfMonth"))), rep: true };
      }
      case 10:
        return { e: bin(pick(g, CMP), this.scalar(), f), rep: false };
      default:
        return { e: g(exprArbitrary, { maxDepth: 2 }), rep: false };
    }
  }

  /** A profile-level leaf: conditions, events, sequences, memberships. */
  profileLeaf(depth: number): Leaf {
    const g = this.g;
    switch (int(g, 0, 5)) {
      case 0: {
        const seg = call("inSegment", [lit("string", g(fc.string, { maxLength: 8 }))]);
        return { e: chance(g, 0.5) ? seg : { type: "Not", operand: seg }, rep: true };
      }
      case 1: {
        const filter = chance(g, 0.2) ? undefined : this.tree(depth + 1, "event");
        const events: Expr = filter ? { type: "Filter", object: { type: "XEvent" }, condition: filter.e } : { type: "XEvent" };
        const double = chance(g, 0.1);
        const count = double ? lit("double", 1) : lit("integer", int(g, 0, 9));
        return { e: bin(pick(g, CMP), meth(events, "count"), count), rep: !double && (filter?.rep ?? true) };
      }
      case 2:
        return this.chain(depth);
      default:
        return this.condition();
    }
  }

  chain(depth: number): Leaf {
    const g = this.g;
    let rep = true;
    const steps: ChainStep[] = Array.from({ length: int(g, 1, 3) }, (_, i) => {
      const what = chance(g, 0.2) ? { e: lit("boolean", true), rep: true } : this.tree(depth + 1, "event");
      const step: ChainStep = { label: `S${i}`, what: what.e };
      rep &&= what.rep;
      if (chance(g, 0.6)) {
        const t = this.tail();
        step.when = t.tail;
        rep &&= t.rep;
      }
      if (chance(g, 0.3)) step.count = int(g, 1, 9);
      if (chance(g, 0.3)) {
        const where = this.tree(depth + 1, "event");
        step.where = where.e;
        rep &&= where.rep;
      }
      return step;
    });
    const xEvent = chance(g, 0.9);
    return { e: { type: "Chain", source: xEvent ? { type: "XEvent" } : path("orders"), timestampField: "timestamp", steps }, rep: rep && xEvent };
  }

  tree(depth: number, context: "profile" | "event"): Leaf {
    const g = this.g;
    if (depth >= 4 || chance(g, 0.35)) return context === "profile" ? this.profileLeaf(depth) : this.condition();
    if (chance(g, 0.2)) {
      const x = this.tree(depth + 1, context);
      return { e: { type: "Not", operand: x.e }, rep: x.rep };
    }
    const a = this.tree(depth + 1, context);
    const b = this.tree(depth + 1, context);
    return { e: bin(pick(g, ["and", "or"]), a.e, b.e), rep: a.rep && b.rep };
  }
}

const builderTrees = fc.gen().map((g) => {
  const t = new TreeGen(g).tree(0, "profile");
  return { q: { type: "Query", params: [], body: t.e } as Query, rep: t.rep };
});

describe("builder-shaped trees", () => {
  it("are read exactly, in canonical form, and wholly as rules when nothing is one detail off", () => {
    let full = 0;
    fc.assert(
      fc.property(builderTrees, ({ q, rep }) => {
        assert.ok(astEqual(parse(format(q)), q), "the generator builds trees that parse back");
        const r = pqlToRules(format(q));
        assert.ok(r.ok, "reads");
        assert.ok(astEqual(parse(rulesToPql(r.model)), q), `not exact: ${format(q)}`);
        const unchecked = queryOf(readQuery(q).model);
        assert.ok(unchecked && astEqual(unchecked, q), `needed the whole-expression fallback: ${format(q)}`);
        assert.deepEqual(normalize(r.model), r.model, "canonical form");
        if (rep) assert.equal(r.blocks, 0, `a block in ${format(q)}`);
        if (r.blocks === 0) full++;
      }),
      { numRuns: 1500 },
    );
    assert.ok(full > 300, `only ${full} fully represented`);
  });
});

// ------------------------------------------------------------------ UI models


class ModelGen {
  private n = 0;
  constructor(private readonly g: Gen) {}

  id(): string {
    return `m${++this.n}`;
  }

  operand(kind: OperandKind): Operand {
    const g = this.g;
    switch (kind) {
      case "string":
        return { kind, value: g(fc.string, { maxLength: 5 }) };
      case "integer":
        return { kind, value: int(g, -50, 50) };
      case "double":
        return { kind, value: int(g, -200, 200) / 8 };
      case "boolean":
        return { kind, value: chance(g, 0.5) };
      case "time":
        return { kind, word: pick(g, ["now", "today", "yesterday", "tomorrow"] as const) };
      case "period":
        return { kind, which: pick(g, ["this", "last", "next"] as const), unit: pick(g, TIME_UNITS) };
      case "date":
        return { kind, year: int(g, 1950, 2050), month: int(g, 1, 12), day: int(g, 1, 28) };
      case "duration":
        return { kind, amount: int(g, 0, 90), unit: pick(g, TIME_UNITS) };
      case "offset":
        return { kind, cmp: pick(g, CMP), amount: int(g, 0, 90), unit: pick(g, TIME_UNITS), direction: pick(g, ["before", "after", "from"] as const) };
    }
  }

  /** Operands that fit the operator, with the ignore-case option when it applies. */
  operands(operator: OperatorId): { operands: Operand[]; ignoreCase?: boolean } {
    const spec = OPERATORS[operator].operands;
    const g = this.g;
    const operands =
      "list" in spec
        ? Array.from({ length: int(g, 0, 3) }, () => this.operand(pick(g, spec.list)))
        : spec.fixed.map((kinds) => this.operand(pick(g, kinds)));
    if (OPERATORS[operator].caseOption && operands[0]?.kind === "string" && chance(g, 0.6)) return { operands, ignoreCase: chance(g, 0.6) };
    return { operands };
  }

  condition(): Rule {
    const g = this.g;
    // Half the time an ordering operator, so that ≥ and ≤ on one field meet and merge.
    const operator = chance(g, 0.3) ? pick(g, ["atLeast", "atMost"] as OperatorId[]) : pick(g, Object.keys(OPERATORS) as OperatorId[]);
    const field = chance(g, 0.5) ? "age" : pick(g, FIELDS);
    return { kind: "condition", id: this.id(), field, operator, ...this.operands(operator) };
  }

  when(): TimeCondition {
    const operator = pick(this.g, ["dateOn", "dateBefore", "dateAfter", "dateBetween", "inLast", "inNext", "relative"] as OperatorId[]);
    return { operator, operands: this.operands(operator).operands };
  }

  group(depth: number, context: "profile" | "event", root = false): Group {
    const g = this.g;
    const size = depth >= 3 ? int(g, 0, 2) : int(g, 0, 4);
    return {
      kind: "group",
      id: this.id(),
      mode: !root && chance(g, 0.3) ? "exclude" : "include",
      combinator: chance(g, 0.5) ? "and" : "or",
      children: Array.from({ length: size }, () => this.rule(depth + 1, context)),
    };
  }

  rule(depth: number, context: "profile" | "event"): Rule {
    const g = this.g;
    const k = int(g, 0, 9);
    if (k <= 1 && depth < 4) return this.group(depth, context);
    if (context === "event" || k <= 5) return this.condition();
    if (k === 6) return { kind: "segment", id: this.id(), segmentId: g(fc.string, { maxLength: 6 }), member: chance(g, 0.5) };
    if (k === 7) return { kind: "event", id: this.id(), filter: this.group(depth, "event", true), count: { op: pick(g, CMP), value: int(g, 0, 9) } };
    const steps: SequenceStep[] = Array.from({ length: int(g, 1, 3) }, (_, i) => {
      const s: SequenceStep = { id: this.id(), label: `C${i}`, what: this.group(depth, "event", true) };
      if (chance(g, 0.5)) s.when = this.when();
      if (chance(g, 0.3)) s.count = int(g, 1, 5);
      if (chance(g, 0.3)) s.where = this.group(depth, "event", true);
      return s;
    });
    return { kind: "sequence", id: this.id(), timestampField: "timestamp", steps };
  }
}

const uiModels = fc.gen().map((g): VisualModel => ({ version: 1, params: [], root: new ModelGen(g).group(0, "profile", true) }));

function noIds<T>(x: T): T {
  return JSON.parse(JSON.stringify(x, (k, v) => (k === "id" ? undefined : v))) as T;
}

describe("models a UI builds", () => {
  it("read back as their normal form, which writes the same PQL and keeps its ids", () => {
    fc.assert(
      fc.property(uiModels, (m) => {
        assert.deepEqual(validateModel(m), [], "the generator builds valid models");
        const text = rulesToPql(m);
        const back = pqlToRules(text);
        assert.ok(back.ok, `reads ${text}`);
        const n = normalize(m);
        assert.deepEqual(noIds(back.model), noIds(n), `read back differently: ${text}`);
        assert.equal(rulesToPql(n), text, "normalising keeps the PQL");
        assert.deepEqual(normalize(n), n, "normalising twice changes nothing");
        const kept = pqlToRules(text, { previous: n });
        assert.deepEqual(kept.ok && kept.model, n, "ids survive the trip");
      }),
      { numRuns: 1000 },
    );
  });
});
