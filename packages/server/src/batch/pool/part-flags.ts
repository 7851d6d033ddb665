/**
 * Entry flags of a snapshot's parts for one expression: through the evaluation pool when there is
 * one, in process otherwise (pool size 0). Previews, builder estimates, edit impact and jobs all
 * evaluate through it, so both paths give the same flags (test/batch/evaluation-pool.test.ts).
 */
import type { Query } from "@segmentd/pql";
import type { EvaluationBudget } from "../../services/evaluation-budget.js";
import type { Column } from "../columnar/layout.js";
import { compileDefinition, type ColumnarCompiled } from "../columnar/predicate.js";
import type { Snapshot } from "../columnar/snapshot.js";
import type { EvaluationPool } from "./evaluation-pool.js";

/** Per part of `snap` (in `parts()` order): one flag per entry row, or null for an empty part. */
export async function partFlags(
  pool: EvaluationPool | null,
  snap: Snapshot,
  query: Query,
  now: number,
  overrides: ReadonlyArray<ReadonlyMap<string, Column>>,
  budget: EvaluationBudget,
  /** In process: the predicate already compiled for `query` and `now` (jobs keep theirs). */
  precompiled?: ColumnarCompiled,
): Promise<Array<Uint8Array | null>> {
  const parts = snap.parts();
  if (pool !== null) return Promise.all(parts.map(({ part }, k) => (part.rows === 0 ? null : pool.run(part, query, now, overrides[k] ?? new Map(), budget))));
  const compiled = precompiled ?? compileDefinition(query, now);
  return budget.run(() =>
    parts.map(({ part }, k) => {
      if (part.rows === 0) return null;
      const out = new Uint8Array(part.rows);
      compiled.run(part.data(overrides[k]), out);
      return out;
    }),
  );
}
