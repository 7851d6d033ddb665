/**
 * Edits of the rule tree that the canvas, drag-and-drop and the keyboard
 * share: find a node, insert, remove and move rules between groups. Each edit
 * returns a new model (the input is never changed) or undefined when the move
 * is not possible, so a button can be disabled by asking first.
 *
 * Rules move only between groups of the same context: a profile rule never
 * lands in an event filter (it would read event fields) and a filter
 * condition never leaves its event. Root groups (the model's root, an event's
 * filter, a step's WHAT/WHERE) stay where they are.
 */
import type { Group, Rule, RuleContext, SequenceStep, VisualModel } from "../../visual/index.js";
import { MAX_GROUP_DEPTH } from "../../visual/index.js";

export interface Place {
  node: Rule;
  /** The group holding the node; undefined for root groups. */
  parent: Group | undefined;
  index: number;
  context: RuleContext;
  /** Group levels from the model's root (the root is 1), as validateModel counts them. */
  depth: number;
}

type Visit = { node: Rule; parent: Group | undefined; index: number; context: RuleContext; depth: number };

/** Every rule and group of the model in document order, with where it sits. */
export function places(model: VisualModel): Place[] {
  const out: Place[] = [];
  const stack: Visit[] = [{ node: model.root, parent: undefined, index: 0, context: "profile", depth: 1 }];
  while (stack.length > 0) {
    const v = stack.pop()!;
    out.push(v);
    const kids: Visit[] = [];
    const n = v.node;
    if (n.kind === "group") n.children.forEach((c, i) => kids.push({ node: c, parent: n, index: i, context: v.context, depth: v.depth + 1 }));
    if (n.kind === "event") kids.push({ node: n.filter, parent: undefined, index: 0, context: "event", depth: v.depth + 1 });
    if (n.kind === "sequence") {
      for (const s of n.steps) for (const g of stepGroups(s)) kids.push({ node: g, parent: undefined, index: 0, context: "event", depth: v.depth + 1 });
    }
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!);
  }
  return out;
}

function stepGroups(s: SequenceStep): Group[] {
  return s.where ? [s.what, s.where] : [s.what];
}

export function locate(model: VisualModel, id: string): Place | undefined {
  return places(model).find((p) => p.node.id === id);
}

/** Whether a rule of this kind means something in a group of this context. */
export function fits(rule: Rule, context: RuleContext): boolean {
  if (rule.kind === "pql") return rule.context === context;
  if (context === "event") return rule.kind === "group" || rule.kind === "condition";
  return true;
}

/** Levels of groups a node adds below its place (a leaf 0, a group 1 + its deepest child). */
function height(rule: Rule): number {
  if (rule.kind === "group") return 1 + Math.max(0, ...rule.children.map(height));
  if (rule.kind === "event") return 1 + height(rule.filter);
  if (rule.kind === "sequence") return 1 + Math.max(0, ...rule.steps.flatMap(stepGroups).map(height));
  return 0;
}

function contains(outer: Rule, id: string): boolean {
  const stack: Rule[] = [outer];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (n.id === id) return true;
    if (n.kind === "group") stack.push(...n.children);
    if (n.kind === "event") stack.push(n.filter);
    if (n.kind === "sequence") stack.push(...n.steps.flatMap(stepGroups));
  }
  return false;
}

/** A copy of the model and, in it, the group with this id. */
function copyWith(model: VisualModel, groupId: string): { copy: VisualModel; group: Group; place: Place } | undefined {
  const copy = structuredClone(model);
  const place = locate(copy, groupId);
  if (!place || place.node.kind !== "group") return undefined;
  return { copy, group: place.node, place };
}

/** The model with `rule` inserted into the group at `index` (default: at its end). */
export function insertRule(model: VisualModel, groupId: string, rule: Rule, index?: number): VisualModel | undefined {
  const at = copyWith(model, groupId);
  if (!at || !fits(rule, at.place.context) || at.place.depth + height(rule) > MAX_GROUP_DEPTH) return undefined;
  const i = index === undefined ? at.group.children.length : Math.max(0, Math.min(index, at.group.children.length));
  at.group.children.splice(i, 0, structuredClone(rule));
  return at.copy;
}

export function removeRule(model: VisualModel, id: string): VisualModel | undefined {
  const copy = structuredClone(model);
  const place = locate(copy, id);
  if (!place?.parent) return undefined;
  place.parent.children.splice(place.index, 1);
  return copy;
}

/**
 * The model with the rule moved into a group, before the child now at `index`
 * of that group (its index as shown, before the move); undefined if the rule
 * would not fit there or would end up inside itself.
 */
export function moveRule(model: VisualModel, id: string, groupId: string, index: number): VisualModel | undefined {
  const from = locate(model, id);
  const to = locate(model, groupId);
  if (!from?.parent || !to || to.node.kind !== "group") return undefined;
  if (from.context !== to.context || !fits(from.node, to.context) || contains(from.node, groupId)) return undefined;
  if (to.depth + height(from.node) > MAX_GROUP_DEPTH) return undefined;
  let at = Math.max(0, Math.min(index, to.node.children.length));
  if (from.parent.id === groupId) {
    if (at === from.index || at === from.index + 1) return undefined;
    if (at > from.index) at--;
  }
  const copy = removeRule(model, id)!;
  return insertRule(copy, groupId, from.node, at);
}

export type MoveKind = "up" | "down" | "into" | "out";

/**
 * The keyboard's moves: up/down within the group; into the group just above
 * (to its end) or, failing that, just below (to its start); out of a nested
 * group, to just after it. Siblings in `hidden` (shown elsewhere, such as an
 * event's type) are stepped over, so every move changes what is seen.
 */
export function moveBy(model: VisualModel, id: string, kind: MoveKind, hidden: ReadonlySet<string> = new Set()): VisualModel | undefined {
  const p = locate(model, id);
  if (!p?.parent) return undefined;
  const siblings = p.parent.children;
  const neighbour = (step: -1 | 1): number | undefined => {
    for (let j = p.index + step; j >= 0 && j < siblings.length; j += step) if (!hidden.has(siblings[j]!.id)) return j;
    return undefined;
  };
  const prev = neighbour(-1);
  const next = neighbour(1);
  switch (kind) {
    case "up":
      return prev === undefined ? undefined : moveRule(model, id, p.parent.id, prev);
    case "down":
      return next === undefined ? undefined : moveRule(model, id, p.parent.id, next + 1);
    case "into": {
      const above = prev === undefined ? undefined : siblings[prev];
      if (above?.kind === "group") return moveRule(model, id, above.id, above.children.length);
      const below = next === undefined ? undefined : siblings[next];
      return below?.kind === "group" ? moveRule(model, id, below.id, 0) : undefined;
    }
    case "out": {
      const outer = locate(model, p.parent.id);
      return outer?.parent ? moveRule(model, id, outer.parent.id, outer.index + 1) : undefined;
    }
  }
}

/** Nested groups are numbered in document order (the root and root groups are not): "Group 1", "Group 2". */
export function groupNumbers(model: VisualModel): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of places(model)) if (p.node.kind === "group" && p.parent) out.set(p.node.id, out.size + 1);
  return out;
}

/** A group in words: "the top level", "group 2", "the event's conditions". */
export function groupName(model: VisualModel, groupId: string): string {
  const p = locate(model, groupId);
  if (!p || p.node.kind !== "group") return "the top level";
  if (p.parent) return `group ${groupNumbers(model).get(groupId)}`;
  return p.context === "event" ? "the event's conditions" : "the top level";
}

/** Where a node is, in words, for the screen-reader announcement after a move. */
export function describePlace(model: VisualModel, id: string): string {
  const p = locate(model, id);
  if (!p?.parent) return "";
  return `position ${p.index + 1} of ${p.parent.children.length} in ${groupName(model, p.parent.id)}`;
}

/** The innermost profile-context group at or above a group (palette items for profiles go there). */
export function profileGroupFor(model: VisualModel, groupId: string): string {
  const all = places(model);
  let id: string | undefined = groupId;
  while (id !== undefined) {
    const p = all.find((x) => x.node.id === id);
    if (!p) break;
    if (p.node.kind === "group" && p.context === "profile") return p.node.id;
    id = p.parent?.id ?? ownerOf(all, p.node.id);
  }
  return model.root.id;
}

/** The event or sequence rule whose filter/step group this is. */
function ownerOf(all: Place[], groupId: string): string | undefined {
  for (const p of all) {
    const n = p.node;
    if (n.kind === "event" && n.filter.id === groupId) return n.id;
    if (n.kind === "sequence" && n.steps.some((s) => stepGroups(s).some((g) => g.id === groupId))) return n.id;
  }
  return undefined;
}

/** An id maker that never repeats an id of the model (nor one it made). */
export function idMaker(model: VisualModel, prefix = "v"): () => string {
  const used = new Set(places(model).map((p) => p.node.id));
  for (const p of places(model)) if (p.node.kind === "sequence") for (const s of p.node.steps) used.add(s.id);
  let n = 0;
  return () => {
    let id: string;
    do id = `${prefix}${++n}`;
    while (used.has(id));
    used.add(id);
    return id;
  };
}
