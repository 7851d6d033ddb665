/**
 * normalize: the canonical model among those that write the same PQL — the
 * one pqlToRules gives back. A UI can call it after each edit so that the
 * rules on screen are exactly those the PQL tab will read back. Ids are kept
 * (a merged rule keeps its first part's id). Expects a model validateModel
 * accepts. The rules, each mirroring how from-pql.ts reads the tree:
 * - empty groups are dropped (they write nothing);
 * - a group with one child is that child, unless the child is a compound
 *   (between, ignore year) after the first member of an `and` group, where
 *   the group is the parentheses that keep its terms apart;
 * - a first member that is an include group with its parent's combinator is
 *   spliced in (`(a and b) and c` is `a and b and c`); so is a root or
 *   exclude group's only member that is an include group;
 * - in `and` groups, adjacent terms that read as one compound are merged
 *   (`f >= 1`, `f <= 5` → between);
 * - one-member groups use `and`; exclude of one audience is "not in" it;
 * - `ignoreCase: false` is dropped; the relative form that is "in the
 *   last/next N units" becomes that operator; an empty WHERE is dropped.
 */
import { ruleExpr } from "./build.js";
import type { ConditionRule, Group, Rule, SequenceStep, VisualModel } from "./model.js";
import { COMPOUND_OPERATORS } from "./operators.js";
import { compoundOf } from "./recognize.js";

export function normalize(model: VisualModel): VisualModel {
  const copy = structuredClone(model);
  return { ...copy, root: normalizeRoot(copy.root, copy.params) };
}

function normalizeRoot(g: Group, params: string[]): Group {
  normalizeChildren(g, params);
  const only = g.children.length === 1 ? g.children[0]! : undefined;
  if (only?.kind === "group" && only.mode === "include") {
    g.combinator = only.combinator;
    g.children = only.children;
  }
  if (g.children.length <= 1) g.combinator = "and";
  return g;
}

/** A member of a group: a group may come back as its only child. */
function normalizeRule(r: Rule, params: string[]): Rule {
  switch (r.kind) {
    case "group":
      return normalizeGroup(r, params);
    case "condition":
      return normalizeCondition(r);
    case "event":
      return { ...r, filter: normalizeRoot(r.filter, params) };
    case "sequence":
      return { ...r, steps: r.steps.map((s) => normalizeStep(s, params)) };
    default:
      return r;
  }
}

function normalizeGroup(g: Group, params: string[]): Rule {
  normalizeChildren(g, params);
  if (g.mode === "exclude") {
    const only = g.children.length === 1 ? g.children[0]! : undefined;
    if (only?.kind === "segment" && only.member) return { ...only, member: false };
    if (only?.kind === "group" && only.mode === "include") {
      g.combinator = only.combinator;
      g.children = only.children;
    }
  }
  if (g.children.length <= 1) g.combinator = "and";
  return g;
}

function normalizeChildren(g: Group, params: string[]): void {
  const kids: Rule[] = [];
  for (const child of g.children) {
    let c = normalizeRule(child, params);
    // Lift one-member include groups, except a compound's parentheses after an `and` group's first member.
    while (c.kind === "group" && c.mode === "include" && c.children.length === 1) {
      const inner = c.children[0]!;
      if (isCompound(inner) && g.combinator === "and" && kids.length > 0) break;
      c = inner;
    }
    if (c.kind === "group" && c.children.length === 0) continue;
    if (kids.length === 0 && c.kind === "group" && c.mode === "include" && c.combinator === g.combinator) {
      kids.push(...c.children);
      continue;
    }
    kids.push(c);
  }
  g.children = g.combinator === "and" ? mergeCompounds(kids, params) : kids;
}

function isCompound(r: Rule): boolean {
  return r.kind === "condition" && COMPOUND_OPERATORS.has(r.operator);
}

/** Adjacent leaves of an `and` chain that read back as one compound condition. */
function mergeCompounds(kids: Rule[], params: string[]): Rule[] {
  const out: Rule[] = [];
  for (let i = 0; i < kids.length; i++) {
    const a = kids[i]!;
    const b = kids[i + 1];
    const merged = b && single(a) && single(b) ? compoundOf(ruleExpr(a as Exclude<Rule, Group>, params), ruleExpr(b as Exclude<Rule, Group>, params)) : undefined;
    if (merged) {
      out.push({ kind: "condition", id: a.id, ...merged });
      i++;
    } else {
      out.push(a);
    }
  }
  return out;
}

/** A leaf written as one term (not a group or a compound). */
function single(r: Rule): boolean {
  return r.kind !== "group" && !isCompound(r);
}

function normalizeCondition(c: ConditionRule): ConditionRule {
  const out: ConditionRule = { ...c };
  if (out.ignoreCase !== true) delete out.ignoreCase;
  const [offset, ref] = c.operands;
  if (c.operator === "relative" && offset?.kind === "offset" && ref?.kind === "time" && ref.word === "now") {
    if (offset.cmp === "<=" && offset.direction !== "from") {
      out.operator = offset.direction === "before" ? "inLast" : "inNext";
      out.operands = [{ kind: "duration", amount: offset.amount, unit: offset.unit }];
    }
  }
  return out;
}

function normalizeStep(s: SequenceStep, params: string[]): SequenceStep {
  const out: SequenceStep = { ...s, what: normalizeRoot(s.what, params) };
  if (s.when) {
    const c = normalizeCondition({ kind: "condition", id: "", field: "timestamp", ...s.when });
    out.when = { operator: c.operator, operands: c.operands };
  }
  if (s.where) {
    const where = normalizeRoot(s.where, params);
    if (where.children.length === 0) delete out.where;
    else out.where = where;
  }
  return out;
}
