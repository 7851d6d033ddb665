/**
 * Conditions of `select`/`exists`/`forall` bindings read their item through
 * the variable (`X.eventType`); filter conditions read it through bare fields
 * (`eventType`). Rewriting the first form into the second lets both share the
 * event condition planner.
 */
import type { Expr } from "../ast.js";

/**
 * `X.a.b` → `a.b` for the binding variable X of select/exists/forall, so the
 * condition reads like a filter condition. Undefined when the condition reads
 * anything but X's fields (a bare field there is the PROFILE's, §1).
 */
export function toItemForm(e: Expr, v: string): Expr | undefined {
  switch (e.type) {
    case "Var":
      return undefined;
    case "Field":
    case "Up":
    case "Param":
    case "XEvent":
      return undefined;
    case "Member": {
      if (e.object.type === "Var") return e.object.name === v ? { type: "Field", name: e.name } : undefined;
      const o = toItemForm(e.object, v);
      return o === undefined ? undefined : { type: "Member", object: o, name: e.name };
    }
    case "Literal":
    case "TimeWord":
    case "RelPeriod":
      return e;
    case "List": {
      const els = e.elements.map((x) => toItemForm(x, v));
      return els.includes(undefined) ? undefined : { type: "List", elements: els as Expr[] };
    }
    case "Method": {
      const r = toItemForm(e.receiver, v);
      const args = e.args.map((x) => toItemForm(x, v));
      return r === undefined || args.includes(undefined) ? undefined : { type: "Method", name: e.name, receiver: r, args: args as Expr[] };
    }
    case "Call": {
      const args = e.args.map((x) => toItemForm(x, v));
      return args.includes(undefined) ? undefined : { type: "Call", name: e.name, args: args as Expr[] };
    }
    case "Binary": {
      const l = toItemForm(e.left, v);
      const r = toItemForm(e.right, v);
      return l === undefined || r === undefined ? undefined : { type: "Binary", op: e.op, left: l, right: r };
    }
    case "Not":
    case "Negate": {
      const o = toItemForm(e.operand, v);
      return o === undefined ? undefined : { type: e.type, operand: o };
    }
    case "Occurs": {
      const s = toItemForm(e.subject, v);
      if (s === undefined) return undefined;
      const t = e.tail;
      const ref = (r: Expr) => toItemForm(r, v);
      switch (t.kind) {
        case "between": {
          const from = ref(t.from);
          const to = ref(t.to);
          return from === undefined || to === undefined ? undefined : { type: "Occurs", subject: s, tail: { ...t, from, to } };
        }
        default: {
          const r = ref(t.ref);
          return r === undefined ? undefined : { type: "Occurs", subject: s, tail: { ...t, ref: r } };
        }
      }
    }
    default:
      return undefined;
  }
}
