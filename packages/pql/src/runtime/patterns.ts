/**
 * AST shapes both evaluators (the closure compiler and the code generator)
 * specialise, recognised in one place so that they cannot drift apart.
 */
import type { CmpOp, Expr, Filter } from "../ast.js";

/**
 * `A[cond].count() >= n` or `A[cond].count() > n` with an integer literal: the
 * count can stop at `need` matches instead of scanning every item.
 */
export function countAtLeast(op: CmpOp, left: Expr, right: Expr): { filter: Filter; need: number } | null {
  if (
    (op === ">=" || op === ">") &&
    left.type === "Method" &&
    left.name === "count" &&
    left.args.length === 0 &&
    left.receiver.type === "Filter" &&
    right.type === "Literal" &&
    right.kind === "integer"
  ) {
    return { filter: left.receiver, need: (right.value as number) + (op === ">" ? 1 : 0) };
  }
  return null;
}
