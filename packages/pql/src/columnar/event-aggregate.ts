/**
 * Event aggregates: count / sum / average / min / max of the events a profile
 * owns (rows [eventStart[i], eventStart[i + 1])) that satisfy an event
 * condition (event-condition.ts), compared with a literal — the shapes behind
 * `xEvent[…].count() >= n`, `xEvent[…]`, `exists X from xEvent : …`,
 * `forall …`, `(select …).count()` and `xEvent[…].sum(f) > x`.
 *
 * Normally condition and reduction run as one generated loop (kernel.ts); a
 * stepwise version (a byte per event, then the reduction) serves where code
 * generation is unavailable. Only the candidates' event ranges are read.
 */
import type { CmpOp } from "../ast.js";
import { coerceLiteral, compareValues } from "../runtime/values.js";
import type { EventNode } from "./event-condition.js";
import { generateKernel, KernelBuilder } from "./kernel.js";
import type { ProfileNode, RunContext } from "./nodes.js";
import type { Filler } from "./kernel.js";

/** What is computed per profile from its selected events. */
export type Measure =
  | { kind: "count"; test: (n: number) => boolean }
  | { kind: "sum" | "average" | "min" | "max"; path: string[]; test: (x: number | null) => boolean };

/** `result OP literal` (or flipped) for a numeric result, by compareValues with the literal coerced as PQL does. */
export function numericTest(op: CmpOp, lit: unknown, flipped: boolean): (x: number | null) => boolean {
  const c = coerceLiteral(lit, 0);
  if (typeof c === "number" && !Number.isNaN(c)) {
    const o: CmpOp = flipped ? ({ "=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=" } as const)[op] : op;
    switch (o) {
      case "=":
        return (x) => x === c;
      case "!=":
        return (x) => x !== null && x !== c;
      case "<":
        return (x) => x !== null && x < c;
      case "<=":
        return (x) => x !== null && x <= c;
      case ">":
        return (x) => x !== null && x > c;
      case ">=":
        return (x) => x !== null && x >= c;
    }
  }
  return (x) => (x === null ? false : flipped ? compareValues(op, c, x) : compareValues(op, x, c));
}

/**
 * A profile-level aggregate of the selected events (`cond` null: all of them).
 * Events are read only in the candidates' ranges, run by run.
 */
export class EventAggregateNode implements ProfileNode {
  readonly columnar = true;
  constructor(
    private readonly cond: EventNode | null,
    private readonly measure: Measure,
    /** The row path of the whole aggregate, for data the loops below do not read (a sum over a non-number column). */
    private readonly fallback: ProfileNode,
  ) {}

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const m = this.measure;
    if (m.kind !== "count") {
      const col = run.data.events.column(m.path.join("."));
      // Strings (min/max fall back to them when there are no numbers) or mixed values: the row path.
      if (col !== undefined && col.kind !== "number") {
        this.fallback.eval(run, cand, out);
        return;
      }
    }
    if (!this.fused(run, cand, out)) this.stepwise(run, cand, out);
  }

  /** Calls fill over every event range the profiles in `cand` own (all events when cand is null). */
  private static overRanges(run: RunContext, cand: Uint8Array | null, fill: Filler, buf: Uint8Array): void {
    const { eventStart } = run.data;
    const n = run.size;
    if (cand === null) {
      fill(0, eventStart[n]!, buf);
      return;
    }
    // Contiguous runs of candidates: one fill per run.
    for (let i = 0; i < n; ) {
      if (cand[i] === 0) {
        i++;
        continue;
      }
      let j = i + 1;
      while (j < n && cand[j] === 1) j++;
      fill(eventStart[i]!, eventStart[j]!, buf);
      i = j;
    }
  }

  /** One generated loop over the events: condition and reduction fused (kernel.ts). */
  private fused(run: RunContext, cand: Uint8Array | null, out: Uint8Array): boolean {
    if (!run.codegen) return false;
    const k = new KernelBuilder();
    const cond = this.cond === null ? "1" : this.cond.kernel(run, k);
    const m = this.measure;
    let body: string;
    if (m.kind === "count") {
      body = `let c = 0;
    for (let r = S[i]; r < hi; r++) c += ${cond};
    out[i] = test(c) ? 1 : 0;`;
    } else {
      const col = run.data.events.column(m.path.join("."));
      const vals = col?.kind === "number" ? col.values : new Float64Array(run.data.eventStart[run.size]!).fill(NaN);
      const better = m.kind === "min" ? "v < best" : "v > best";
      const result = m.kind === "sum" ? "sum" : m.kind === "average" ? "(k === 0 ? null : sum / k)" : "(k === 0 ? null : best)";
      body = `let sum = 0, k = 0, best = NaN;
    for (let r = S[i]; r < hi; r++) {
      if (${cond} === 0) continue;
      const v = ${k.ext(vals)}[r];
      if (v !== v) continue;
      sum += v;
      k++;
      // First value, then strictly better (ties keep the first, as aggregate() does).
      if (k === 1 || ${better}) best = v;
    }
    out[i] = test(${result}) ? 1 : 0;`;
    }
    const f = generateKernel<(S: Uint32Array, n: number, cand: Uint8Array | null, out: Uint8Array, test: (x: number | null) => boolean) => void>(
      k,
      "S, n, cand, out, test",
      `for (let i = 0; i < n; i++) {
    if (cand !== null && cand[i] === 0) {
      out[i] = 0;
      continue;
    }
    const hi = S[i + 1];
    ${body}
  }`,
    );
    if (f === null) return false;
    for (const p of k.prefills) EventAggregateNode.overRanges(run, cand, p.fill, p.buf);
    f(run.data.eventStart, run.size, cand, out, m.test as (x: number | null) => boolean);
    return true;
  }

  /** The same without generated code: one pass per node, then the reduction. */
  private stepwise(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const { eventStart } = run.data;
    const n = run.size;
    let sel: Uint8Array | null = null;
    if (this.cond !== null) {
      sel = run.eventScratch(this);
      EventAggregateNode.overRanges(run, cand, this.cond.prepare(run), sel);
    }
    const m = this.measure;
    if (m.kind === "count") {
      const test = m.test;
      for (let i = 0; i < n; i++) {
        if (cand !== null && cand[i] === 0) {
          out[i] = 0;
          continue;
        }
        const lo = eventStart[i]!;
        const hi = eventStart[i + 1]!;
        let c = 0;
        if (sel === null) c = hi - lo;
        else for (let r = lo; r < hi; r++) c += sel[r]!;
        out[i] = test(c) ? 1 : 0;
      }
      return;
    }
    const col = run.data.events.column(m.path.join("."));
    // No column: no event has a value (sum 0, the others null). Arrays on the way
    // project to arrays, which every aggregate skips like nulls.
    const vals = col?.kind === "number" ? col.values : null;
    const test = m.test;
    for (let i = 0; i < n; i++) {
      if (cand !== null && cand[i] === 0) {
        out[i] = 0;
        continue;
      }
      const lo = eventStart[i]!;
      const hi = eventStart[i + 1]!;
      let sum = 0;
      let k = 0;
      let best = NaN;
      if (vals !== null) {
        for (let r = lo; r < hi; r++) {
          if (sel !== null && sel[r] === 0) continue;
          const v = vals[r]!;
          if (v !== v) continue;
          sum += v;
          k++;
          // First value, then strictly better (ties keep the first, as aggregate() does).
          if (k === 1 || (m.kind === "min" ? v < best : v > best)) best = v;
        }
      }
      const x = m.kind === "sum" ? sum : k === 0 ? null : m.kind === "average" ? sum / k : best;
      out[i] = test(x) ? 1 : 0;
    }
  }
}
