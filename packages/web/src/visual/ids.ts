/**
 * Ids for a model read from PQL. Without a previous model: "root", then r1,
 * r2, … in document order. With one (the model on screen before the user
 * edited the PQL tab), a node whose PQL is the same as a node of the
 * previous model takes that node's id, in document order, so a UI keeps its
 * keys, focus and selection across the edit; other nodes get ids the
 * previous model does not use.
 */
import { ruleExpr, groupExpr, timeTail } from "./build.js";
import type { Group, Rule, SequenceRule, SequenceStep, VisualModel } from "./model.js";
import { nodesOf } from "./model.js";
import { textOf } from "./validate.js";

type Slot = { node: { id: string }; key: () => string };

export function assignIds(model: VisualModel, previous?: VisualModel): void {
  let reuse = new Map<string, string[]>();
  let taken = new Set<string>();
  let rootId = "root";
  if (previous) {
    try {
      reuse = keyed(previous);
      taken = new Set(nodesOf(previous).map((n) => n.id));
      if (typeof previous.root.id === "string" && previous.root.id !== "") rootId = previous.root.id;
    } catch {
      // A previous model that cannot be written has no ids worth keeping.
      reuse = new Map();
      taken = new Set();
    }
  }
  const used = new Set<string>([rootId]);
  let counter = 0;
  model.root.id = rootId;
  for (const slot of slots(model)) {
    const queue = previous ? reuse.get(slot.key()) : undefined;
    let id: string | undefined;
    while (queue && queue.length > 0 && (id === undefined || used.has(id))) id = queue.shift();
    if (id === undefined || used.has(id)) {
      do id = `r${++counter}`;
      while (taken.has(id) || used.has(id));
    }
    slot.node.id = id;
    used.add(id);
  }
}

function keyed(model: VisualModel): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const slot of slots(model)) {
    const k = slot.key();
    const list = map.get(k);
    if (list) list.push(slot.node.id);
    else map.set(k, [slot.node.id]);
  }
  return map;
}

/** Every id-carrying node but the root, in document order, with its reuse key. */
function slots(model: VisualModel): Slot[] {
  const params = model.params;
  const out: Slot[] = [];
  const groupText = (g: Group) => {
    const e = groupExpr(g, params);
    return e ? (textOf(e) ?? "") : "";
  };
  const stack: { node: Rule | SequenceStep; rootGroup: boolean; seq?: SequenceRule }[] = [];
  const pushAll = (items: typeof stack) => {
    for (let i = items.length - 1; i >= 0; i--) stack.push(items[i]!);
  };
  pushAll(model.root.children.map((node) => ({ node, rootGroup: false })));
  while (stack.length > 0) {
    const { node, rootGroup, seq } = stack.pop()!;
    if (!("kind" in node)) {
      const step = node;
      out.push({ node: step, key: () => `step:${stepText(seq!, step, params)}` });
      pushAll([{ node: step.what, rootGroup: true }, ...(step.where ? [{ node: step.where, rootGroup: true }] : [])]);
      continue;
    }
    const rule = node;
    if (rule.kind === "group") {
      out.push({ node: rule, key: () => (rootGroup ? `root:${groupText(rule)}` : `group:${rule.mode}:${groupText(rule)}`) });
      pushAll(rule.children.map((c) => ({ node: c, rootGroup: false })));
      continue;
    }
    out.push({ node: rule, key: () => (rule.kind === "pql" ? `pql:${rule.context}:${rule.pql}` : `${rule.kind}:${textOf(ruleExpr(rule, params)) ?? ""}`) });
    if (rule.kind === "event") pushAll([{ node: rule.filter, rootGroup: true }]);
    if (rule.kind === "sequence") pushAll(rule.steps.map((s) => ({ node: s, rootGroup: false, seq: rule })));
  }
  return out;
}

function stepText(seq: SequenceRule, step: SequenceStep, params: string[]): string {
  if (step.when) timeTail(step.when, step.id);
  return textOf(ruleExpr({ ...seq, steps: [step] }, params)) ?? "";
}
