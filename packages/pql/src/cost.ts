/**
 * The static cost model of PQL: the worst-case work of one evaluation, in the
 * units the evaluators charge to a WorkBudget (runtime/budget.ts): one unit per
 * item a loop visits — a binding's source, a filter, an item-context method
 * (`exists`, `filter`, `map`, `sum(expr)`, ...), a chain's events.
 *
 * Loops nested in loops multiply, siblings add. A source rooted at `xEvent`
 * has at most `eventsPerProfile` items (a projection through it, such as
 * `xEvent.productListItems`, at most `eventsPerProfile × itemsPerArray`); any
 * other array, or projection within one record (a profile or an event), at
 * most `itemsPerArray`. So `exists X from xEvent, Y from xEvent
 * : X.timestamp < Y.timestamp` costs E + E², three such bindings E + E² + E³.
 *
 * The model never under-estimates what the evaluators charge on a profile with
 * at most E events and arrays of at most `itemsPerArray` items (the property
 * tests check it against the interpreter and the compiled closures).
 */
import { children, type Binding, type Expr, type Node, type Query } from "./ast.js";
import { lookupBuiltin } from "./catalog.js";
import { diagnosticAt, type Diagnostic } from "./errors.js";
import { parse } from "./parser.js";

export interface CostLimits {
  /** The most experience events one profile is assumed to hold (E). */
  eventsPerProfile: number;
  /** The most items of any other array, or projection within one record (a profile's or an event's). */
  itemsPerArray: number;
}

export interface CostConstruct {
  /** The node's type: Quantifier, Select, AggregateOver, Filter, Method, Chain. */
  kind: string;
  /** Its source text, shortened to 120 characters (empty for trees built by code). */
  text: string;
  start?: number;
  end?: number;
  /** How many loops over events are nested in it, itself included (2 = E², 3 = E³). */
  eventDegree: number;
}

export interface CostEstimate {
  /** Worst-case units of one evaluation (may be Infinity for absurd nests; never NaN). */
  units: number;
  /** The deepest nesting of loops over events in the whole query. */
  eventDegree: number;
  /** The loop that costs the most (the outermost loop of the heaviest nest); null when there is none. */
  construct: CostConstruct | null;
}

interface Domain {
  /** The most items. */
  n: number;
  /** Rooted at xEvent (a projection through it multiplies by itemsPerArray). */
  events: boolean;
}

interface Cost {
  units: number;
  /** Nested loops over events inside (and including) this node. */
  degree: number;
}

const ZERO: Cost = { units: 0, degree: 0 };

/** The worst-case cost of one evaluation of `query` at `limits`. */
export function estimateCost(query: string | Query, limits: CostLimits): CostEstimate {
  const q = typeof query === "string" ? parse(query) : query;
  const m = new CostModel(q.source ?? (typeof query === "string" ? query : ""), limits);
  const c = m.cost(q.body, new Map(), 1);
  return { units: c.units, eventDegree: c.degree, construct: m.heaviest };
}

/**
 * The PQL_TOO_COSTLY diagnostic of a query whose worst case exceeds `maxUnits`,
 * naming the heaviest construct; null when it is within the bound.
 */
export function costDiagnostic(text: string, query: Query, limits: CostLimits & { maxUnits: number }): Diagnostic | null {
  const est = estimateCost(query, limits);
  if (est.units <= limits.maxUnits) return null;
  const c = est.construct;
  const what = c === null ? "The expression" : `'${c.text}'`;
  const nest = c !== null && c.eventDegree >= 2 ? ` nests ${c.eventDegree} loops over xEvent (E^${c.eventDegree}), so it` : "";
  const message =
    `${what}${nest} may need ${formatUnits(est.units)} units of work per profile at ${limits.eventsPerProfile.toLocaleString("en-US")} events per profile; ` +
    `the limit is ${formatUnits(limits.maxUnits)}. Combine the conditions into fewer bindings over xEvent (two are allowed), or split the definition`;
  return diagnosticAt(text, "error", "PQL_TOO_COSTLY", message, c?.start ?? 0, c?.end ?? text.length);
}

/** 1,234,567 below 10^15, else 1.2e+21 (and "unbounded" for Infinity). */
export function formatUnits(n: number): string {
  if (!Number.isFinite(n)) return "unbounded";
  return n < 1e15 ? Math.round(n).toLocaleString("en-US") : n.toExponential(1);
}

class CostModel {
  heaviest: CostConstruct | null = null;
  private heaviestUnits = -1;

  constructor(
    private readonly text: string,
    private readonly limits: CostLimits,
  ) {}

  /**
   * Units of one evaluation of `e`; `vars` holds the domains of let-bound
   * variables; `mult` is how often the enclosing loops evaluate `e` (to find
   * the heaviest construct). Recursion follows the tree depth, which the
   * parser caps.
   */
  cost(e: Expr, vars: Map<string, Domain | null>, mult: number): Cost {
    switch (e.type) {
      case "Filter": {
        const d = this.domain(e.object, vars);
        const obj = this.cost(e.object, vars, mult);
        const cond = this.cost(e.condition, vars, mult * d.n);
        return this.loop(e, mult, add(obj, loopOf(d, cond)));
      }
      case "Method": {
        const spec = lookupBuiltin(e.name, "method");
        if (spec?.itemArgs === undefined || spec.itemArgs.length === 0) return this.sum(e, vars, mult);
        const d = this.domain(e.receiver, vars);
        let total = this.cost(e.receiver, vars, mult);
        let perItem = ZERO;
        e.args.forEach((a, i) => {
          if (spec.itemArgs!.includes(i)) perItem = add(perItem, this.cost(a, vars, mult * d.n));
          else total = add(total, this.cost(a, vars, mult));
        });
        return this.loop(e, mult, add(total, loopOf(d, perItem)));
      }
      case "Chain": {
        const d = this.domain(e.source, vars);
        const src = this.cost(e.source, vars, mult);
        let perEvent = ZERO;
        for (const st of e.steps) {
          for (const x of [st.what, ...(st.where ? [st.where] : [])]) perEvent = add(perEvent, this.cost(x, vars, mult * d.n));
        }
        return this.loop(e, mult, add(src, loopOf(d, perEvent)));
      }
      case "Select":
      case "Quantifier":
        return this.loop(e, mult, this.bindings(e.bindings, vars, mult, null));
      case "AggregateOver":
        return this.loop(e, mult, this.bindings(e.bindings, vars, mult, e.value ?? null));
      case "Let": {
        const value = this.cost(e.value, vars, mult);
        const inner = new Map(vars).set(e.variable, this.domain(e.value, vars));
        return add(value, this.cost(e.body, inner, mult));
      }
      default:
        return this.sum(e, vars, mult);
    }
  }

  private sum(e: Node, vars: Map<string, Domain | null>, mult: number): Cost {
    let c = ZERO;
    for (const k of children(e)) c = add(c, this.cost(k, vars, mult));
    return c;
  }

  /**
   * Nested bindings: binding k's source and its condition run once per tuple
   * of the bindings before it; the aggregated value once per whole tuple.
   */
  private bindings(bs: Binding[], vars: Map<string, Domain | null>, mult: number, value: Expr | null): Cost {
    let scope = vars;
    let tuples = 1;
    let degree = 0;
    let total = ZERO;
    for (const b of bs) {
      const d = this.domain(b.source, scope);
      const src = this.cost(b.source, scope, mult * tuples);
      scope = new Map(scope).set(b.variable, null);
      const cond = b.condition ? this.cost(b.condition, scope, mult * tuples * d.n) : ZERO;
      const one = add(src, loopOf(d, cond));
      total = add(total, { units: times(tuples, one.units), degree: degree + one.degree });
      tuples *= d.n;
      if (d.events) degree++;
    }
    if (value !== null) {
      const v = this.cost(value, scope, mult * tuples);
      total = add(total, { units: times(tuples, v.units), degree: degree + v.degree });
    }
    return total;
  }

  /** Record a loop's total (its cost times how often it runs) to find the heaviest. */
  private loop(e: Expr, mult: number, c: Cost): Cost {
    const total = times(mult, c.units);
    if (total > this.heaviestUnits) {
      this.heaviestUnits = total;
      const raw = e.start !== undefined && e.end !== undefined ? this.text.slice(e.start, e.end).replace(/\s+/g, " ") : "";
      this.heaviest = {
        kind: e.type,
        text: raw.length > 120 ? `${raw.slice(0, 117)}...` : raw,
        ...(e.start !== undefined ? { start: e.start } : {}),
        ...(e.end !== undefined ? { end: e.end } : {}),
        eventDegree: c.degree,
      };
    }
    return c;
  }

  /** The most items `e` can hold when it is iterated. */
  private domain(e: Expr, vars: Map<string, Domain | null>): Domain {
    const { eventsPerProfile: E, itemsPerArray: A } = this.limits;
    switch (e.type) {
      case "XEvent":
        return { n: E, events: true };
      case "Filter":
        return this.domain(e.object, vars);
      case "Method": {
        // Methods that return (a subset of) their receiver's items.
        if (SUBSET_METHODS.has(e.name)) return this.domain(e.receiver, vars);
        return { n: A, events: false };
      }
      case "Member": {
        const d = this.domain(e.object, vars);
        // A field projected through events: each event may contribute an array.
        return d.events ? { n: d.n * A, events: true } : { n: A, events: false };
      }
      case "Var":
        return vars.get(e.name) ?? { n: A, events: false };
      case "List":
        return { n: e.elements.length, events: false };
      case "Select": {
        let n = 1;
        let events = false;
        for (const b of e.bindings) {
          const d = this.domain(b.source, vars);
          n *= d.n;
          events ||= d.events;
        }
        return { n, events };
      }
      case "Let":
        return this.domain(e.body, new Map(vars).set(e.variable, this.domain(e.value, vars)));
      case "Call":
        // if(c, a, b) is one of its branches.
        if (e.name === "if") return e.args.slice(1).map((x) => this.domain(x, vars)).reduce(larger, { n: A, events: false });
        return { n: A, events: false };
      default:
        return { n: A, events: false };
    }
  }
}

/** Methods whose result holds at most their receiver's items (or keys): a map of events is as long as the events. */
const SUBSET_METHODS: ReadonlySet<string> = new Set(["filter", "topN", "bottomN", "distinct", "intersection", "map", "groupBy"]);

function larger(a: Domain, b: Domain): Domain {
  return { n: Math.max(a.n, b.n), events: a.events || b.events };
}

/** A loop over `d` items running `body` per item: `d` units charged at its start, plus the bodies. */
function loopOf(d: Domain, body: Cost): Cost {
  return { units: d.n + times(d.n, body.units), degree: (d.events ? 1 : 0) + body.degree };
}

/** a × b where 0 × Infinity is 0 (nothing to repeat), never NaN. */
function times(a: number, b: number): number {
  return a === 0 || b === 0 ? 0 : a * b;
}

function add(a: Cost, b: Cost): Cost {
  return { units: a.units + b.units, degree: Math.max(a.degree, b.degree) };
}
