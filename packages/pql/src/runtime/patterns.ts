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

// Names whose direct property read could reach Object.prototype instead of data.
const PROTO_NAMES = new Set(Object.getOwnPropertyNames(Object.prototype));

/**
 * A field path rooted at the implicit context (`a.b.c`) as its names, or null.
 * Both evaluators read such paths directly; a path naming an Object.prototype
 * member is refused (null) so that it goes through the guarded runtime read.
 */
export function fieldPath(e: Expr): string[] | null {
  const names: string[] = [];
  let n: Expr = e;
  while (n.type === "Member") {
    names.push(n.name);
    n = n.object;
  }
  if (n.type !== "Field") return null;
  names.push(n.name);
  names.reverse();
  return names.some((x) => PROTO_NAMES.has(x)) ? null : names;
}
