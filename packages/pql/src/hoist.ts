/**
 * Loop-invariant conditions of a multi-binding enumeration (`exists A from …, B from … : c1 and
 * c2`): each conjunct of a binding's condition is tested at the shallowest binding whose
 * variables it reads, so `exists A, B : f(A) and g(B)` skips B's loop for every A that fails
 * f(A) instead of trying every pair. Only for enumerations that look for tuples whose conditions
 * hold (exists, select, aggregates): a tuple passes exactly when every conjunct is true, wherever
 * it is tested. A conjunct that reads the implicit item (a bare field, `^`) or a name bound
 * twice stays where it was written.
 */
import type { Binding, Expr } from "./ast.js";

/** The conjuncts to test at each binding level (the written condition's own ones keep their order). */
export function hoistedConditions(bindings: readonly Binding[]): Expr[][] {
  const levels: Expr[][] = bindings.map((b) => (b.condition === undefined ? [] : [b.condition]));
  const names = bindings.map((b) => b.variable);
  if (bindings.length < 2 || new Set(names).size !== names.length) return levels;
  const out: Expr[][] = bindings.map(() => []);
  for (let k = 0; k < bindings.length; k++) {
    const c = bindings[k]!.condition;
    if (c === undefined) continue;
    for (const conj of conjuncts(c)) {
      const reads = readsOf(conj);
      let at = k;
      if (!reads.implicit) {
        at = 0;
        for (let j = 0; j <= k; j++) if (reads.vars.has(names[j]!)) at = j;
      }
      out[at]!.push(conj);
    }
  }
  return out;
}

function conjuncts(e: Expr): Expr[] {
  if (e.type === "Binary" && e.op === "and") return [...conjuncts(e.left), ...conjuncts(e.right)];
  return [e];
}

/** Variable names read anywhere in the expression, and whether it reads the implicit item. */
function readsOf(e: unknown): { vars: Set<string>; implicit: boolean } {
  const r = { vars: new Set<string>(), implicit: false };
  const walk = (n: unknown): void => {
    if (Array.isArray(n)) {
      for (const x of n) walk(x);
      return;
    }
    if (n === null || typeof n !== "object") return;
    const node = n as { type?: unknown; name?: unknown };
    if (node.type === "Field" || node.type === "Up") r.implicit = true;
    else if (node.type === "Var" && typeof node.name === "string") r.vars.add(node.name);
    for (const v of Object.values(n)) if (v !== null && typeof v === "object") walk(v);
  };
  walk(e);
  return r;
}
