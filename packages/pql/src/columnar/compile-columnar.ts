/**
 * `compileColumnar`: the bulk back end of PQL, evaluating one definition over
 * every profile of a ColumnarData at once (issue #7: batch segmentation over
 * millions of profiles). Same results as `evaluate`/`compile` + `toBoolean`,
 * profile by profile: covered constructs run as column loops (plan.ts), the
 * rest through the row compiler on materialized rows of the profiles that
 * still need an answer.
 */
import type { Query } from "../ast.js";
import { compile } from "../compile.js";
import { prepareQuery, resolveNow } from "../runtime/prepare.js";
import type { ColumnarPredicate } from "./layout.js";
import { RunContext } from "./nodes.js";
import { planBool } from "./plan.js";

export interface ColumnarQuery {
  /** Sets out[i] = 1 for each qualifying profile i, 0 for the others. Always exact. */
  run: ColumnarPredicate;
  /** True when no part of the query needs the per-profile row path by design. */
  columnar: boolean;
  /** Why `columnar` is false. */
  reason?: string;
}

export interface ColumnarOptions {
  /** The evaluation instant (epoch ms, Date or ISO string), as for evaluate/compile. */
  now: number | Date | string;
  /**
   * Generate fused loops with `new Function` (default true). False keeps to
   * the node-by-node loops: for hosts that forbid code generation, and so that
   * the tests check both.
   */
  codegen?: boolean;
}

export function compileColumnar(query: string | Query, options: ColumnarOptions): ColumnarQuery {
  const q = prepareQuery(query);
  // The row compiler also rejects what it cannot run: fail here, before any data, like compile().
  compile(q);
  const now = resolveNow(options.now);
  const plan = planBool(q.body, now, q.params);
  const codegen = options.codegen !== false;
  const run: ColumnarPredicate = (data, out) => {
    const ctx = new RunContext(data, now, codegen);
    try {
      plan.eval(ctx, null, out);
    } finally {
      ctx.release();
    }
  };
  return plan.columnar ? { run, columnar: true } : { run, columnar: false, reason: plan.reason ?? "not covered" };
}
