/**
 * The columnar predicate of a definition: `compileColumnar` from
 * @segmentd/pql (typed-array loops where it can, its own row fallback where
 * it cannot; always equal to `evaluate`).
 */
import { compileColumnar, type Query } from "@segmentd/pql";
import type { ColumnarData } from "./layout.js";

export interface ColumnarCompiled {
  run: (data: ColumnarData, out: Uint8Array) => void;
  /** True when the predicate runs over columns only; false when part of it evaluates row objects. */
  columnar: boolean;
  /** Why not columnar. */
  reason?: string;
}

export function compileDefinition(query: Query, now: number): ColumnarCompiled {
  const c = compileColumnar(query, { now });
  return c.columnar ? { run: c.run, columnar: true } : { run: c.run, columnar: false, reason: c.reason ?? "not covered" };
}
