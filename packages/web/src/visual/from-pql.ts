/**
 * pqlToRules: PQL (text or a parsed query) → the rule model, keeping every
 * sub-expression it cannot show as rules as a read-only block, and never
 * throwing: invalid PQL gives an error result a UI can show.
 *
 * `and`/`or` chains are flattened along their left spine (that is how the
 * parser nests `a and b and c`); a right operand that is itself a chain was
 * parenthesised and becomes a nested group. Every recognised rule is rebuilt
 * and compared with its sub-tree, and the whole model with the input at the
 * end; should that ever differ, the whole expression becomes one block.
 */
import type { Expr, Query } from "@segmentd/pql";
import { PqlError, astEqual, parse } from "@segmentd/pql";
import { compoundTerms, queryOf, ruleExpr } from "./build.js";
import { assignIds } from "./ids.js";
import type { ConditionRule, EventRule, Group, Rule, RuleContext, SequenceRule, SequenceStep, VisualModel } from "./model.js";
import { MAX_GROUP_DEPTH, MODEL_VERSION, countRules, emptyGroup, emptyModel } from "./model.js";
import { compoundOf, conditionOf, scalarOf, segmentIdOf, timeConditionOf } from "./recognize.js";
import { textOf } from "./validate.js";

export interface PqlToRulesOptions {
  /** The model shown before this edit: rules that read back the same keep their ids. */
  previous?: VisualModel;
}

export interface ConversionError {
  code: string;
  message: string;
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

export type PqlToRulesResult =
  | {
      ok: true;
      model: VisualModel;
      /** Rules shown as rules (conditions, events, sequences, memberships; groups not counted). */
      rules: number;
      /** Read-only PQL blocks; 0 means the expression is fully represented. */
      blocks: number;
    }
  | { ok: false; error: ConversionError };

export function pqlToRules(input: string | Query, options: PqlToRulesOptions = {}): PqlToRulesResult {
  let query: Query;
  if (typeof input === "string") {
    if (input.trim() === "") return { ok: true, model: withIds(emptyModel(), options), rules: 0, blocks: 0 };
    try {
      query = parse(input);
    } catch (e) {
      return { ok: false, error: errorOf(e) };
    }
  } else if (typeof input === "object" && input !== null && input.type === "Query") {
    query = input;
  } else {
    return { ok: false, error: plainError("VISUAL_BAD_INPUT", "Expected PQL text or a parsed query") };
  }
  try {
    return convert(query, options);
  } catch (e) {
    return { ok: false, error: e instanceof PqlError ? errorOf(e) : plainError("VISUAL_UNREPRESENTABLE", (e as Error).message) };
  }
}

/** The conversion without the final whole-model check's fallback (tests use it to see recognition bugs). */
export function readQuery(query: Query): { model: VisualModel; rules: number; blocks: number } {
  const reader = new Reader(query.params);
  const model: VisualModel = { version: MODEL_VERSION, params: [...query.params], root: reader.rootGroup(query.body, "profile", 1) };
  return { model, ...countRules(model) };
}

function convert(query: Query, options: PqlToRulesOptions): PqlToRulesResult {
  let read = readQuery(query);
  const built = queryOf(read.model);
  if (!built || !astEqual(built, query)) {
    const root = emptyGroup("");
    root.children.push(new Reader(query.params).block(query.body, "profile"));
    read = { model: { version: MODEL_VERSION, params: [...query.params], root }, rules: 0, blocks: 1 };
    const again = queryOf(read.model);
    if (!again || !astEqual(again, query)) throw new Error("The expression cannot be written back as PQL text");
  }
  return { ok: true, model: withIds(read.model, options), rules: read.rules, blocks: read.blocks };
}

function withIds(model: VisualModel, options: PqlToRulesOptions): VisualModel {
  assignIds(model, options.previous);
  return model;
}

class Reader {
  constructor(private readonly params: string[]) {}

  /** A root group (model root, event filter, step WHAT/WHERE): include, never lifted. */
  rootGroup(e: Expr, context: RuleContext, depth: number): Group {
    const g = emptyGroup("");
    if (depth > MAX_GROUP_DEPTH) {
      g.children.push(this.block(e, context));
    } else if (e.type === "Binary" && (e.op === "and" || e.op === "or")) {
      g.combinator = e.op;
      g.children = this.items(e, e.op, context, depth);
    } else {
      g.children = [this.rule(e, "and", context, depth)];
    }
    return g;
  }

  /** The members of a chain of `op`, left to right, with compound pairs of an `and` chain merged. */
  private items(e: Expr, op: "and" | "or", context: RuleContext, depth: number): Rule[] {
    const terms: Expr[] = [];
    let cur = e;
    while (cur.type === "Binary" && cur.op === op) {
      terms.push(cur.right);
      cur = cur.left;
    }
    terms.push(cur);
    terms.reverse();
    const out: Rule[] = [];
    for (let i = 0; i < terms.length; i++) {
      const pair = op === "and" && i + 1 < terms.length ? this.compound(terms[i]!, terms[i + 1]!) : undefined;
      if (pair) {
        out.push(pair);
        i++;
      } else {
        out.push(this.rule(terms[i]!, op, context, depth));
      }
    }
    return out;
  }

  /** One member of a group at `depth` whose combinator is `parentOp`. */
  private rule(e: Expr, parentOp: "and" | "or", context: RuleContext, depth: number): Rule {
    if (e.type === "Binary" && (e.op === "and" || e.op === "or")) {
      if (depth + 1 > MAX_GROUP_DEPTH) return this.block(e, context);
      const g = emptyGroup("");
      g.combinator = e.op;
      g.children = this.items(e, e.op, context, depth + 1);
      // A lone compound is its own parenthesised pair, except after an `and` (kept as a group there).
      if (g.children.length === 1 && parentOp !== "and") return g.children[0]!;
      return g;
    }
    if (e.type === "Not") {
      const id = context === "profile" ? segmentIdOf(e.operand) : undefined;
      if (id !== undefined) return this.checked({ kind: "segment", id: "", segmentId: id, member: false }, e) ?? this.block(e, context);
      if (depth + 1 > MAX_GROUP_DEPTH) return this.block(e, context);
      const inner = e.operand;
      const g: Group = { ...emptyGroup(""), mode: "exclude" };
      if (inner.type === "Binary" && (inner.op === "and" || inner.op === "or")) {
        g.combinator = inner.op;
        g.children = this.items(inner, inner.op, context, depth + 1);
        if (g.children.length === 1) g.combinator = "and";
      } else {
        g.children = [this.rule(inner, "and", context, depth + 1)];
      }
      return g;
    }
    return this.leaf(e, context, depth) ?? this.block(e, context);
  }

  private leaf(e: Expr, context: RuleContext, depth: number): Rule | undefined {
    const cond = conditionOf(e);
    if (cond) return this.checked({ kind: "condition", id: "", ...cond }, e);
    if (context !== "profile") return undefined;
    const segmentId = segmentIdOf(e);
    if (segmentId !== undefined) return this.checked({ kind: "segment", id: "", segmentId, member: true }, e);
    if (depth + 1 > MAX_GROUP_DEPTH) return undefined;
    if (e.type === "Binary") return this.event(e, depth);
    if (e.type === "Chain") return this.sequence(e, depth);
    return undefined;
  }

  /** `xEvent[filter].count() OP n` / `xEvent.count() OP n`. */
  private event(e: Expr & { type: "Binary" }, depth: number): Rule | undefined {
    const { left, right } = e;
    if (!["=", "!=", "<", "<=", ">", ">="].includes(e.op)) return undefined;
    const n = scalarOf(right);
    if (n?.kind !== "integer" || (n.value as number) < 0) return undefined;
    if (left.type !== "Method" || left.name !== "count" || left.args.length !== 0) return undefined;
    const events = left.receiver;
    let filter: Group;
    if (events.type === "XEvent") filter = emptyGroup("");
    else if (events.type === "Filter" && events.object.type === "XEvent") filter = this.rootGroup(events.condition, "event", depth + 1);
    else return undefined;
    const rule: EventRule = { kind: "event", id: "", filter, count: { op: e.op as EventRule["count"]["op"], value: n.value as number } };
    return this.checked(rule, e);
  }

  /** `chain(xEvent, ts, [steps])`; a step WHEN the builder cannot show makes it a block. */
  private sequence(e: Expr & { type: "Chain" }, depth: number): Rule | undefined {
    if (e.source.type !== "XEvent") return undefined;
    const steps: SequenceStep[] = [];
    for (const s of e.steps) {
      const isTrue = s.what.type === "Literal" && s.what.kind === "boolean" && s.what.value === true;
      const step: SequenceStep = { id: "", label: s.label, what: isTrue ? emptyGroup("") : this.rootGroup(s.what, "event", depth + 1) };
      if (s.when) {
        const when = timeConditionOf(s.when);
        if (!when) return undefined;
        step.when = when;
      }
      if (s.count !== undefined) step.count = s.count;
      if (s.where) step.where = this.rootGroup(s.where, "event", depth + 1);
      steps.push(step);
    }
    const rule: SequenceRule = { kind: "sequence", id: "", timestampField: e.timestampField, steps };
    return this.checked(rule, e);
  }

  private compound(a: Expr, b: Expr): ConditionRule | undefined {
    const cond = compoundOf(a, b);
    if (!cond) return undefined;
    const rule: ConditionRule = { kind: "condition", id: "", ...cond };
    const [x, y] = compoundTerms(rule);
    if (!astEqual(x, a) || !astEqual(y, b)) return undefined;
    return rule;
  }

  /** The rule if it rebuilds to exactly `e` (else undefined, and `e` becomes a block). */
  private checked<R extends Exclude<Rule, Group>>(rule: R, e: Expr): R | undefined {
    let rebuilt: Expr;
    try {
      rebuilt = ruleExpr(rule, this.params);
    } catch {
      return undefined;
    }
    return astEqual(rebuilt, e) ? rule : undefined;
  }

  block(e: Expr, context: RuleContext): Rule {
    const pql = textOf(e);
    if (pql === undefined) throw new Error("A sub-expression cannot be written as PQL text");
    return { kind: "pql", id: "", pql, context };
  }
}

function errorOf(e: unknown): ConversionError {
  if (e instanceof PqlError) {
    const d = e.toDiagnostic();
    return { code: d.code, message: d.message, line: d.line, column: d.column, endLine: d.endLine, endColumn: d.endColumn };
  }
  return plainError("VISUAL_INTERNAL", e instanceof Error ? e.message : String(e));
}

function plainError(code: string, message: string): ConversionError {
  return { code, message, line: 1, column: 1, endLine: 1, endColumn: 1 };
}
