/**
 * The profile attributes a PQL expression reads (explain's attribute provenance, #28): the
 * dotted paths from the profile root of its field references, resolved with the scoping the
 * evaluator and `check` use — a bare field names the innermost item (of a filter, an
 * item-context method argument, lambdas included, or a chain step), else the profile; `^name`
 * climbs item levels; `$1` and the query head's first parameter are the profile; binding and
 * let variables stand for what they are bound to. Event data (`xEvent` and its items) is not the
 * profile, and neither are lambda parameters.
 */
import { lookupBuiltin, type Binding, type Expr, type Query } from "@segmentd/pql";

/** A path from the profile root, or null: the value is not profile data. */
type Ref = readonly string[] | null;

interface Scope {
  /** The implicit contexts, innermost last; [0] is the profile. */
  levels: readonly Ref[];
  vars: ReadonlyMap<string, Ref>;
}

/** Methods whose result is (items of) their receiver: a field of it is a field of the receiver's items. */
const SAME_ITEMS = new Set(["filter", "topN", "bottomN", "distinct", "head"]);

/**
 * The paths read (each a list of field names), in source order, each once; a path that is the
 * prefix of another read path (`person` of `person.age`, an array of its filtered items' fields)
 * is left out.
 */
export function profileAttributePaths(query: Query): string[][] {
  const read: string[][] = [];
  const vars = new Map<string, Ref>();
  query.params.forEach((p, i) => vars.set(p, i === 0 ? [] : null));
  const record = (r: Ref): void => {
    if (r !== null && r.length > 0) read.push([...r]);
  };

  /** The ref of `e` when it denotes profile data; every path it reads as a value is recorded. */
  const visit = (e: Expr, s: Scope): Ref => {
    switch (e.type) {
      case "Field": {
        const base = s.levels[s.levels.length - 1]!;
        return base === null ? null : [...base, e.name];
      }
      case "Up": {
        const base = s.levels[s.levels.length - 1 - e.levels];
        return base === undefined || base === null ? null : [...base, e.name];
      }
      case "Param":
        return e.index === 1 ? [] : null;
      case "Var":
        return s.vars.get(e.name) ?? null;
      case "Member": {
        // A postfix chain may be long: walked down iteratively.
        const names: string[] = [];
        let cur: Expr = e;
        while (cur.type === "Member") {
          names.push(cur.name);
          cur = cur.object;
        }
        const base = visit(cur, s);
        return base === null ? null : [...base, ...names.reverse()];
      }
      case "Binary": {
        // And/or and arithmetic chains are left spines thousands deep: operands collected iteratively.
        const operands: Expr[] = [];
        let cur: Expr = e;
        while (cur.type === "Binary") {
          operands.push(cur.right);
          cur = cur.left;
        }
        operands.push(cur);
        for (let i = operands.length - 1; i >= 0; i--) record(visit(operands[i]!, s));
        return null;
      }
      case "Method": {
        const recv = visit(e.receiver, s);
        record(recv);
        const itemArgs = lookupBuiltin(e.name, "method")?.itemArgs ?? [];
        const item: Scope = { ...s, levels: [...s.levels, recv] };
        e.args.forEach((a, i) => {
          const each = itemArgs.includes(i);
          record(a.type === "Lambda" ? lambda(a, each ? item : s, each ? recv : null) : visit(a, each ? item : s));
        });
        return SAME_ITEMS.has(e.name) ? recv : null;
      }
      case "Filter": {
        const obj = visit(e.object, s);
        record(obj);
        record(visit(e.condition, { ...s, levels: [...s.levels, obj] }));
        return obj;
      }
      case "Lambda":
        // Not a method's item argument: never evaluated.
        return lambda(e, s, null);
      case "Let": {
        const value = visit(e.value, s);
        record(value);
        const inner = new Map(s.vars);
        inner.set(e.variable, value);
        record(visit(e.body, { ...s, vars: inner }));
        return null;
      }
      case "Chain": {
        const src = visit(e.source, s);
        record(src);
        const item: Scope = { ...s, levels: [...s.levels, src] };
        if (src !== null) record([...src, e.timestampField]);
        for (const step of e.steps) {
          record(visit(step.what, item));
          if (step.when) for (const t of tailRefs(step.when)) record(visit(t, s));
          if (step.where) record(visit(step.where, item));
        }
        return null;
      }
      case "Select":
      case "Quantifier":
        bindings(e.bindings, s);
        return null;
      case "AggregateOver": {
        const inner = bindings(e.bindings, s);
        if (e.value) record(visit(e.value, inner));
        return null;
      }
      case "Occurs":
        record(visit(e.subject, s));
        for (const t of tailRefs(e.tail)) record(visit(t, s));
        return null;
      case "List":
        for (const x of e.elements) record(visit(x, s));
        return null;
      case "Object":
        for (const x of e.entries) record(visit(x.value, s));
        return null;
      case "Call":
        for (const x of e.args) record(visit(x, s));
        return null;
      case "Negate":
      case "Not":
        record(visit(e.operand, s));
        return null;
      case "Literal":
      case "XEvent":
      case "TimeWord":
      case "RelPeriod":
        return null;
    }
  };

  /**
   * A lambda over `item`'s items: one parameter is the item; with two, one is a key or an index
   * and which one is not known here, so neither is taken for profile data.
   */
  const lambda = (l: Extract<Expr, { type: "Lambda" }>, s: Scope, item: Ref): Ref => {
    const inner = new Map(s.vars);
    l.params.forEach((p) => inner.set(p, l.params.length === 1 ? item : null));
    record(visit(l.body, { ...s, vars: inner }));
    return null;
  };

  /** Binds each variable to the items of its source, left to right; conditions see the bindings so far. */
  const bindings = (bs: readonly Binding[], s: Scope): Scope => {
    let scope = s;
    for (const b of bs) {
      const src = visit(b.source, scope);
      record(src);
      const inner = new Map(scope.vars);
      inner.set(b.variable, src);
      scope = { ...scope, vars: inner };
      if (b.condition) record(visit(b.condition, scope));
    }
    return scope;
  };

  record(visit(query.body, { levels: [[]], vars }));
  const unique = new Map(read.map((r) => [JSON.stringify(r), r]));
  // Linear in the paths' lengths: an expression may read thousands.
  const prefixes = new Set<string>();
  for (const r of unique.values()) for (let n = 1; n < r.length; n++) prefixes.add(JSON.stringify(r.slice(0, n)));
  return [...unique].filter(([k]) => !prefixes.has(k)).map(([, r]) => r);
}

function tailRefs(tail: Extract<Expr, { type: "Occurs" }>["tail"]): Expr[] {
  return tail.kind === "between" ? [tail.from, tail.to] : [tail.ref];
}
