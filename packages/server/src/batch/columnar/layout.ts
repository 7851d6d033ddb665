/**
 * The columnar layout the batch engine builds (shapes owned by @segmentd/pql,
 * `packages/pql/src/columnar/layout.ts`).
 */
export type { Column, ColumnarData, ColumnarTable } from "@segmentd/pql";
