/**
 * Evaluation traces: what the reference interpreter (evaluate.ts) records when
 * asked to explain a result. Every node evaluated in the query's own context
 * becomes a TraceNode with its value; what a node evaluates once per item (a
 * filter's condition, a quantifier's or chain's steps, a lambda) is not traced
 * node by node — the node that iterates records how many items it tested, how
 * many held and the first ones that did. The trace is a by-product of the one
 * evaluation, so its root value is the result.
 */
import type { Expr } from "./ast.js";
import { formatExpr } from "./format.js";
import type { OccursBounds } from "./runtime/time.js";

/** Items kept per iterating node. */
export const TRACE_MAX_ITEMS = 20;
/** Longest node text kept (longer ones end with "…"). */
export const TRACE_MAX_TEXT = 240;

export interface TraceNode {
  /** The AST node type, with the operator, function or method name where there is one (`Binary:and`, `Method:count`). */
  kind: string;
  /** The node as PQL text. */
  text: string;
  value: unknown;
  children: TraceNode[];
  /** For nodes that test items (filters, exists, quantifiers, select, aggregates, chain). */
  items?: { tested: number; held: number; first: unknown[] };
  /** For `occurs` (and chain steps' WHEN): the time bounds the instant was tested against. */
  bounds?: OccursBounds;
}

function kindOf(e: Expr): string {
  switch (e.type) {
    case "Binary":
      return `Binary:${e.op}`;
    case "Method":
    case "Call":
      return `${e.type}:${e.name}`;
    case "Quantifier":
      return `Quantifier:${e.quantifier}`;
    case "AggregateOver":
      return `AggregateOver:${e.fn}`;
    default:
      return e.type;
  }
}

function textOf(e: Expr): string {
  const t = formatExpr(e);
  return t.length > TRACE_MAX_TEXT ? `${t.slice(0, TRACE_MAX_TEXT - 1)}…` : t;
}

export class Tracer {
  readonly root: TraceNode = { kind: "Query", text: "", value: null, children: [] };
  private readonly stack: TraceNode[] = [this.root];
  /** > 0 while evaluating for one item: nodes there are summarized by the iterating node, not traced. */
  private inner = 0;

  get active(): boolean {
    return this.inner === 0;
  }

  /** The node being evaluated (the one an item test or bounds belong to). */
  get current(): TraceNode {
    return this.stack[this.stack.length - 1]!;
  }

  traced<T>(e: Expr, run: () => T): T {
    const node: TraceNode = { kind: kindOf(e), text: textOf(e), value: null, children: [] };
    this.current.children.push(node);
    this.stack.push(node);
    try {
      const v = run();
      node.value = v === undefined ? null : v;
      return v;
    } finally {
      this.stack.pop();
    }
  }

  /** Runs one item's evaluation without tracing its nodes. */
  untraced<T>(run: () => T): T {
    this.inner++;
    try {
      return run();
    } finally {
      this.inner--;
    }
  }

  /** Counts an item tested by `owner` (taken before the item's evaluation: the iterating node). */
  item(owner: TraceNode, held: boolean, item: unknown): void {
    const s = (owner.items ??= { tested: 0, held: 0, first: [] });
    s.tested++;
    if (!held) return;
    s.held++;
    if (s.first.length < TRACE_MAX_ITEMS) s.first.push(item);
  }
}
