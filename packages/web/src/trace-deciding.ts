/**
 * Which nodes of an explanation's trace decide its result. From the root
 * down: a false `and` is decided by its false children, a true `or` by its
 * true children, a `not` by its child; a true `and` or a false `or` needs
 * every child (flipping any one flips it). The descent stops at any other
 * node — a comparison, `exists`, `chain`, … — which is a deciding node.
 *
 * Nodes are named by their path: child indexes from the root joined by "."
 * ("0.1"); the root is "". Values are read as PQL reads a boolean position
 * (toBoolean), on the JSON the server sent.
 */
import type { TraceNode } from "./api/types.js";

export interface Deciding {
  /** The nodes that decide the result. */
  deciding: Set<string>;
  /** Those nodes and every node above them: the branches to open. */
  path: Set<string>;
}

/** PQL's toBoolean on a traced value (explain.ts `shown` sends long arrays as {count, first}). */
export function truthy(v: unknown): boolean {
  if (v === true) return true;
  if (v === false || v === null || v === undefined) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o["count"] === "number" && Array.isArray(o["first"]) && Object.keys(o).length === 2) return o["count"] > 0;
  }
  return true;
}

export function childPath(parent: string, index: number): string {
  return parent === "" ? String(index) : `${parent}.${index}`;
}

/** The children whose values decide `node`, or undefined when `node` is itself a deciding node. */
function decidingChildren(node: TraceNode): number[] | undefined {
  const all = node.children.map((_, i) => i);
  const value = truthy(node.value);
  switch (node.kind) {
    case "Query":
      return all;
    case "Not":
      return all;
    case "Binary:and":
      return value ? all : all.filter((i) => !truthy(node.children[i]!.value));
    case "Binary:or":
      return value ? all.filter((i) => truthy(node.children[i]!.value)) : all;
    default:
      return undefined;
  }
}

export function decidingNodes(root: TraceNode): Deciding {
  const deciding = new Set<string>();
  const path = new Set<string>();
  const visit = (node: TraceNode, at: string) => {
    path.add(at);
    const next = decidingChildren(node);
    // A connective whose children were not traced (or disagree with it) is as far as the trace can say.
    if (next === undefined || next.length === 0) {
      if (at !== "") deciding.add(at);
      return;
    }
    for (const i of next) visit(node.children[i]!, childPath(at, i));
  };
  visit(root, "");
  return { deciding, path };
}
