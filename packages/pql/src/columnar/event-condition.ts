/**
 * Conditions on single events, computed as one byte per event row: a tree of
 * and/or/not over one-path leaves (value-leaf.ts: the row compiler's code per
 * distinct value) and `timestamp occurs …` windows. The window bounds come
 * from runtime/time.ts (`occursBounds`) and are tested against
 * `data.eventTime`, so the edges are the row evaluator's by construction.
 */
import type { Expr } from "../ast.js";
import { fieldPath } from "../runtime/patterns.js";
import { occursBounds, type OccursBounds } from "../runtime/time.js";
import type { KernelBuilder } from "./kernel.js";
import type { RunContext } from "./nodes.js";
import type { Filler } from "./kernel.js";
import { singlePath, ValueLeaf } from "./value-leaf.js";

/**
 * One byte per event row: `prepare` gives the loop over rows [lo, hi) for this
 * run's data; `kernel` the same as a JS expression of row `r` for fused loops.
 */
export interface EventNode {
  prepare(run: RunContext): Filler;
  kernel(run: RunContext, k: KernelBuilder): string;
}

class EventLeaf implements EventNode {
  constructor(private readonly leaf: ValueLeaf) {}
  prepare(run: RunContext): Filler {
    const table = run.data.events;
    const a = this.leaf.path === null ? undefined : run.pathAccess(table, this.leaf.path);
    // Called through the data object: a ColumnarData may be a class instance.
    return this.leaf.prepare(table, (r) => run.data.event(r), null, a);
  }
  kernel(run: RunContext, k: KernelBuilder): string {
    const a = this.leaf.path === null ? undefined : run.pathAccess(run.data.events, this.leaf.path);
    return this.leaf.kernel(a, k) ?? k.buffered(this.prepare(run), run.eventScratch(this));
  }
}

/** `timestamp occurs <tail>` with a tail fixed by `now`: a window test on eventTime. */
class EventTimeLeaf implements EventNode {
  constructor(private readonly b: OccursBounds) {}
  kernel(run: RunContext, k: KernelBuilder): string {
    const b = this.b;
    if (b.empty) return "0";
    const t = `${k.ext(run.data.eventTime)}[r]`;
    // A missing timestamp (NaN) fails every bound; with no bound at all it must be tested.
    const tests = [`${t} === ${t}`];
    if (b.lower !== undefined) tests.push(`${t} ${b.lowerInclusive ? ">=" : ">"} ${k.lit(b.lower)}`);
    if (b.upper !== undefined) tests.push(`${t} ${b.upperInclusive ? "<=" : "<"} ${k.lit(b.upper)}`);
    if (b.exclude !== undefined) tests.push(`!(${t} >= ${k.lit(b.exclude.start)} && ${t} < ${k.lit(b.exclude.end)})`);
    if (tests.length > 1) tests.shift();
    return `(${tests.join(" && ")} ? 1 : 0)`;
  }
  prepare(run: RunContext): Filler {
    const t = run.data.eventTime;
    const b = this.b;
    if (b.empty) return (lo, hi, out) => void out.fill(0, lo, hi);
    const lower = b.lower ?? -Infinity;
    const upper = b.upper ?? Infinity;
    const li = b.lowerInclusive || b.lower === undefined;
    const ui = b.upperInclusive || b.upper === undefined;
    const xs = b.exclude?.start ?? NaN;
    const xe = b.exclude?.end ?? NaN;
    if (li && !ui && b.exclude === undefined) {
      // The common closed-open window; NaN (no timestamp) fails both tests.
      return (lo, hi, out) => {
        for (let r = lo; r < hi; r++) {
          const v = t[r]!;
          out[r] = v >= lower && v < upper ? 1 : 0;
        }
      };
    }
    return (lo, hi, out) => {
      for (let r = lo; r < hi; r++) {
        const v = t[r]!;
        const inside = (li ? v >= lower : v > lower) && (ui ? v <= upper : v < upper) && !(v >= xs && v < xe);
        out[r] = inside ? 1 : 0;
      }
    };
  }
}

/**
 * An event's instant within fixed bounds (`{ lowerInclusive: true, upperInclusive: true }`, no
 * bound at all: the event has a readable timestamp).
 */
export function eventTimeCondition(b: OccursBounds): EventNode {
  return new EventTimeLeaf(b);
}

/** Both conditions (`a` null: every event). */
export function andEvents(a: EventNode | null, b: EventNode): EventNode {
  return a === null ? b : new EventCombine("and", [a, b]);
}

/** Events meeting all (`and`) or any (`or`) of the parts: one pass per part, combined bytewise. */
class EventCombine implements EventNode {
  constructor(
    private readonly op: "and" | "or",
    private readonly parts: EventNode[],
  ) {}
  kernel(run: RunContext, k: KernelBuilder): string {
    return `(${this.parts.map((p) => p.kernel(run, k)).join(this.op === "and" ? " & " : " | ")})`;
  }
  prepare(run: RunContext): Filler {
    const [first, ...rest] = this.parts.map((p) => p.prepare(run));
    const tmp = run.eventScratch(this);
    const and = this.op === "and";
    return (lo, hi, out) => {
      first!(lo, hi, out);
      for (const f of rest) {
        f(lo, hi, tmp);
        if (and) for (let r = lo; r < hi; r++) out[r]! &= tmp[r]!;
        else for (let r = lo; r < hi; r++) out[r]! |= tmp[r]!;
      }
    };
  }
}

class EventNot implements EventNode {
  constructor(private readonly inner: EventNode) {}
  kernel(run: RunContext, k: KernelBuilder): string {
    return `(1 - ${this.inner.kernel(run, k)})`;
  }
  prepare(run: RunContext): Filler {
    const f = this.inner.prepare(run);
    return (lo, hi, out) => {
      f(lo, hi, out);
      for (let r = lo; r < hi; r++) out[r] = 1 - out[r]!;
    };
  }
}

function flatten(e: Expr, op: "and" | "or", into: Expr[]): Expr[] {
  if (e.type === "Binary" && e.op === op) {
    flatten(e.left, op, into);
    flatten(e.right, op, into);
  } else into.push(e);
  return into;
}

/** A condition on one event (item context: bare fields are the event's), or null when not covered. */
export function planEventCondition(e: Expr, now: number): EventNode | null {
  if (e.type === "Binary" && (e.op === "and" || e.op === "or")) {
    const parts = flatten(e, e.op, []).map((x) => planEventCondition(x, now));
    if (parts.some((p) => p === null)) return null;
    return new EventCombine(e.op, parts as EventNode[]);
  }
  if (e.type === "Not") {
    const inner = planEventCondition(e.operand, now);
    return inner === null ? null : new EventNot(inner);
  }
  if (e.type === "Occurs") {
    const p = fieldPath(e.subject);
    if (p !== null && p.length === 1 && p[0] === "timestamp") {
      const b = occursBounds(e.tail, now);
      if (b !== null) return new EventTimeLeaf(b);
    }
  }
  const path = singlePath(e);
  if (path === undefined) return null;
  return new EventLeaf(new ValueLeaf(e, path, now));
}
