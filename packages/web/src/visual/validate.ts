/**
 * Checks a model (typically one a UI edited, or one read back from storage)
 * before it is written as PQL: shape, unique ids, operands that fit their
 * operator, rules only where they mean something (no event rule inside an
 * event filter), bounded depth, and that every leaf reads back as itself
 * (a field named like a keyword would not). Iterative, so a hostile
 * 100,000-deep JSON model is refused rather than overflowing the stack.
 */
import type { Expr } from "@segmentd/pql";
import { astEqual, format } from "@segmentd/pql";
import { blockExpr, ruleExpr, timeTail } from "./build.js";
import type { Group, Rule, RuleContext, SequenceStep, VisualModel } from "./model.js";
import { MAX_GROUP_DEPTH, MODEL_VERSION } from "./model.js";
import { TIME_OPERATORS, operandProblem } from "./operators.js";

export interface ModelProblem {
  /** The node the problem is about, when there is one. */
  ruleId?: string;
  message: string;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);

type Item = { node: unknown; context: RuleContext; depth: number; rootGroup: boolean };

/** Every problem of the model (empty when it can be written as PQL). */
export function validateModel(model: VisualModel): ModelProblem[] {
  const problems: ModelProblem[] = [];
  if (!isObject(model)) return [{ message: "The model must be an object" }];
  if (model.version !== MODEL_VERSION) problems.push({ message: `Unsupported model version ${String(model.version)}` });
  if (!Array.isArray(model.params) || !model.params.every((p) => typeof p === "string" && IDENT.test(p))) {
    problems.push({ message: "params must be a list of names" });
    return problems;
  }
  const ids = new Set<string>();
  const leaves: Rule[] = [];
  const stack: Item[] = [{ node: model.root, context: "profile", depth: 1, rootGroup: true }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    const before = problems.length;
    const kids = visit(item, ids, problems);
    if (problems.length > before) continue;
    if (kids === "leaf") leaves.push(item.node as Rule);
    else if ((item.node as Rule).kind === "sequence") leaves.push(item.node as Rule);
    if (kids !== "leaf") for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!);
  }
  if (problems.length > 0) return problems;
  // Sequences last: a bad condition inside one is reported once, on the condition.
  for (const pass of [false, true]) {
    for (const leaf of leaves) {
      if ((leaf.kind === "sequence") !== pass) continue;
      const message = leafProblem(leaf, model.params);
      if (message) problems.push({ ruleId: leaf.id, message });
    }
    if (problems.length > 0) break;
  }
  return problems;
}

/** Checks one node; returns its children to check, or "leaf" for rules checked by reading back. */
function visit(item: Item, ids: Set<string>, problems: ModelProblem[]): Item[] | "leaf" {
  const { node, context, depth } = item;
  const fail = (message: string, ruleId?: string): Item[] => {
    problems.push(ruleId === undefined ? { message } : { ruleId, message });
    return [];
  };
  if (!isObject(node)) return fail("Expected a rule object");
  const id = node.id;
  if (typeof id !== "string" || id === "") return fail("Every rule needs a non-empty string id");
  if (ids.has(id)) return fail(`The id "${id}" is used twice`, id);
  ids.add(id);
  if (item.rootGroup && node.kind !== "group") return fail("Expected a group", id);
  switch (node.kind) {
    case "group": {
      const g = node as unknown as Group;
      if (depth > MAX_GROUP_DEPTH) return fail(`Groups are nested deeper than ${MAX_GROUP_DEPTH} levels`, id);
      if (g.mode !== "include" && g.mode !== "exclude") return fail('mode must be "include" or "exclude"', id);
      if (item.rootGroup && g.mode !== "include") return fail("This group is always an include group", id);
      if (g.combinator !== "and" && g.combinator !== "or") return fail('combinator must be "and" or "or"', id);
      if (!Array.isArray(g.children)) return fail("children must be a list", id);
      return g.children.map((c) => ({ node: c, context, depth: depth + 1, rootGroup: false }));
    }
    case "condition":
      if (typeof node.field !== "string" || !PATH.test(node.field)) return fail(`"${String(node.field)}" is not a field path`, id);
      return "leaf";
    case "pql":
      if (typeof node.pql !== "string") return fail("A PQL block needs its text", id);
      if (node.context !== context) return fail(`This PQL block was written for the ${String(node.context)}, not the ${context}`, id);
      return "leaf";
    case "segment":
      if (context !== "profile") return fail("Audience membership cannot be tested on an event", id);
      if (typeof node.segmentId !== "string" || typeof node.member !== "boolean") return fail("A segment rule needs segmentId and member", id);
      return "leaf";
    case "event": {
      if (context !== "profile") return fail("An event rule cannot be nested in an event condition", id);
      const count = node.count as { op?: unknown; value?: unknown } | undefined;
      if (!isObject(count) || !CMP.has(count.op as string) || !isWhole(count.value, 0)) {
        return fail("The count needs a comparison and a whole number ≥ 0", id);
      }
      return [{ node: node.filter, context: "event", depth: depth + 1, rootGroup: true }];
    }
    case "sequence":
      return visitSequence(node, id, context, depth, ids, fail);
    default:
      return fail(`Unknown rule kind "${String(node.kind)}"`, id);
  }
}

function visitSequence(
  node: Record<string, unknown>,
  id: string,
  context: RuleContext,
  depth: number,
  ids: Set<string>,
  fail: (m: string, id?: string) => Item[],
): Item[] {
  if (context !== "profile") return fail("A sequence cannot be nested in an event condition", id);
  if (typeof node.timestampField !== "string" || !IDENT.test(node.timestampField)) return fail("timestampField must be a field name", id);
  if (!Array.isArray(node.steps) || node.steps.length === 0) return fail("A sequence needs at least one step", id);
  const kids: Item[] = [];
  for (const s of node.steps as SequenceStep[]) {
    if (!isObject(s) || typeof s.id !== "string" || s.id === "") return fail("Every step needs a non-empty string id", id);
    if (ids.has(s.id)) return fail(`The id "${s.id}" is used twice`, s.id);
    ids.add(s.id);
    if (typeof s.label !== "string" || !IDENT.test(s.label)) return fail("A step label must be a name such as A or C0", s.id);
    if (s.count !== undefined && !isWhole(s.count, 1)) return fail("A step's count must be a whole number ≥ 1", s.id);
    if (s.when !== undefined) {
      if (!isObject(s.when) || !TIME_OPERATORS.has(s.when.operator)) return fail("A step's time must use a date operator", s.id);
      const bad = operandProblem(s.when);
      if (bad) return fail(bad, s.id);
    }
    kids.push({ node: s.what, context: "event", depth: depth + 1, rootGroup: true });
    if (s.where !== undefined) kids.push({ node: s.where, context: "event", depth: depth + 1, rootGroup: true });
  }
  return kids;
}

/** Why a leaf rule would not read back as itself, if it would not. */
function leafProblem(rule: Rule, params: string[]): string | undefined {
  if (rule.kind === "condition") {
    const bad = operandProblem(rule);
    if (bad) return bad;
  }
  if (rule.kind === "group" || rule.kind === "event") return undefined;
  let e: Expr;
  try {
    if (rule.kind === "sequence") {
      for (const s of rule.steps) if (s.when) timeTail(s.when, s.id);
    }
    e = ruleExpr(rule, params);
  } catch (err) {
    return (err as Error).message;
  }
  const text = textOf(e);
  if (text === undefined) return "It cannot be written as PQL";
  let back: Expr;
  try {
    back = blockExpr(text, params);
  } catch {
    return `It writes ${text}, which does not parse`;
  }
  if (!astEqual(back, e)) {
    return rule.kind === "condition" ? `The field "${rule.field}" cannot be written as a plain path` : `It writes ${text}, which reads back differently`;
  }
  return undefined;
}

/** Canonical text of an expression (format of a head-less query), or undefined if unwritable. */
export function textOf(e: Expr): string | undefined {
  try {
    return format({ type: "Query", params: [], body: e });
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> & { [k: string]: unknown } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isWhole(n: unknown, min: number): boolean {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= min;
}
