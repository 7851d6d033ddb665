/**
 * `chain(xEvent, timestamp, [steps])` over the events table: the same greedy
 * scan as the row evaluators (compile.ts `chain`), on the layout's event order.
 *
 * The row code keeps the events with a readable timestamp, sorts them by it and
 * walks them once: each step takes the next `COUNT(n)` events (default 1)
 * matching WHAT, WHEN and WHERE, later than the previous step's position. The
 * layout already holds each profile's events oldest first, and `eventTime` is
 * the timestamp as PQL reads it (NaN when unreadable: such rows are skipped
 * wherever the layout put them). Events with equal timestamps
 * may come in another order than the row code's stable sort; the result cannot
 * depend on it: a step's position is a time, and tied events are all before or
 * all after any position.
 *
 * Each step's condition is computed once per run as one byte per event.
 */
import type { Chain } from "../ast.js";
import { occursBounds, inBounds, type OccursBounds } from "../runtime/time.js";
import { andEvents, eventTimeCondition, planEventCondition, type EventNode } from "./event-condition.js";
import type { ProfileNode, RunContext } from "./nodes.js";

interface Step {
  what: EventNode;
  where: EventNode | null;
  need: number;
  when: ((t: number) => boolean) | null;
  /** Owners of this step's event buffers for the run (two distinct keys). */
  keys: [object, object];
}

export class ChainNode implements ProfileNode {
  readonly columnar = true;
  private constructor(private readonly steps: Step[]) {}

  /**
   * A one-step chain as an event condition and a count: the greedy walk of one step takes the
   * first `need` events with a readable timestamp matching WHAT, WHEN and WHERE, so the profile
   * qualifies exactly when at least `need` such events exist (an event count, which runs as one
   * fused loop). Null for several steps or parts not covered.
   */
  static single(e: Chain, now: number): { cond: EventNode; need: number } | null {
    if (e.source.type !== "XEvent" || e.timestampField !== "timestamp" || e.steps.length !== 1) return null;
    const st = e.steps[0]!;
    const what = planEventCondition(st.what, now);
    const where = st.where === undefined ? null : planEventCondition(st.where, now);
    if (what === null || (st.where !== undefined && where === null)) return null;
    let bounds: OccursBounds = { lowerInclusive: true, upperInclusive: true };
    if (st.when !== undefined) {
      const b = occursBounds(st.when, now);
      if (b === null) return null;
      bounds = b;
    }
    let cond = andEvents(what, eventTimeCondition(bounds));
    if (where !== null) cond = andEvents(cond, where);
    return { cond, need: st.count ?? 1 };
  }

  /** The plan of a chain, or null when a part is not covered (then the row path runs it). */
  static plan(e: Chain, now: number): ChainNode | null {
    if (e.source.type !== "XEvent" || e.timestampField !== "timestamp") return null;
    const steps: Step[] = [];
    for (const st of e.steps) {
      const what = planEventCondition(st.what, now);
      const where = st.where === undefined ? null : planEventCondition(st.where, now);
      if (what === null || (st.where !== undefined && where === null)) return null;
      let when: Step["when"] = null;
      if (st.when !== undefined) {
        const b = occursBounds(st.when, now);
        if (b === null) return null;
        when = (t) => inBounds(t, b);
      }
      steps.push({ what, where, need: st.count ?? 1, when, keys: [{}, {}] });
    }
    return new ChainNode(steps);
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const { eventStart, eventTime: time } = run.data;
    const n = run.size;
    const total = eventStart[n]!;
    // One byte per event and step: WHAT and WHERE (WHEN is tested on the time in the walk).
    const masks = this.steps.map((st) => {
      const buf = run.eventScratch(st.keys[0]);
      st.what.prepare(run)(0, total, buf);
      if (st.where !== null) {
        const tmp = run.eventScratch(st.keys[1]);
        st.where.prepare(run)(0, total, tmp);
        for (let r = 0; r < total; r++) buf[r]! &= tmp[r]!;
      }
      return buf;
    });
    for (let i = 0; i < n; i++) {
      if (cand !== null && cand[i] === 0) {
        out[i] = 0;
        continue;
      }
      const hi = eventStart[i + 1]!;
      const lo = eventStart[i]!;
      let r = lo;
      let pos = -Infinity;
      let ok = 1;
      for (let k = 0; k < this.steps.length; k++) {
        const st = this.steps[k]!;
        const mask = masks[k]!;
        let found = 0;
        // Not later than the previous step, or no readable timestamp (NaN): no part in the chain.
        while (r < hi && !(time[r]! > pos)) r++;
        for (; r < hi && found < st.need; r++) {
          const t = time[r]!;
          if (mask[r] === 0 || t !== t) continue;
          if (st.when !== null && !st.when(t)) continue;
          if (++found === st.need) pos = t;
        }
        if (found < st.need) {
          ok = 0;
          break;
        }
      }
      out[i] = ok;
    }
  }
}
