/**
 * @segmentd/pql — the Profile Query Language: parse, check, format, pql/json,
 * evaluate, compile and classify. Pure functions, no I/O, no clock of its own.
 */
export * from "./ast.js";
export { BUILTINS, lookupBuiltin, canonicalName, KEYWORDS } from "./catalog.js";
export type { BuiltinSpec, PqlType } from "./catalog.js";
export { PqlError, positionAt, diagnosticAt } from "./errors.js";
export type { Diagnostic, Position } from "./errors.js";
export { parse } from "./parser.js";
export { format, TIME_UNIT_PLURALS } from "./format.js";
export { toPqlJson, fromPqlJson } from "./pqljson.js";
export type { PqlJsonNode } from "./pqljson.js";
export { check } from "./check.js";
export { estimateCost, costDiagnostic, formatUnits } from "./cost.js";
export type { CostEstimate, CostConstruct, CostLimits } from "./cost.js";
export { WorkBudget, BudgetExceededError } from "./runtime/budget.js";
export type { CheckOptions, XdmFieldType } from "./check.js";
export { evaluate, evaluatePredicate, traceEvaluation } from "./evaluate.js";
export type { TraceNode } from "./trace.js";
export type { EvalContext } from "./evaluate.js";
export { compile, compilePredicate } from "./compile.js";
export type { CompiledQuery } from "./compile.js";
export { toBoolean, DateInterval } from "./runtime/values.js";
export {
  resolveTimeRef,
  occursBounds,
  boundsFromSpans,
  inBounds,
  addUnits,
  periodStart,
  relativePeriod,
  spanOfValue,
} from "./runtime/time.js";
export type { OccursBounds, TimeSpan } from "./runtime/time.js";
export { parseTimestamp } from "./runtime/timestamp.js";
export { validateJavaRegex, MAX_SUBJECT as REGEX_MAX_SUBJECT, MAX_PATTERN as REGEX_MAX_PATTERN, MAX_STEPS as REGEX_MAX_STEPS } from "./runtime/regex.js";
export { LIKE_MAX_PATTERN, LIKE_MAX_SUBJECT } from "./runtime/builtins.js";
export type { RegexValidation, RegexErrorCode, SafeRegex } from "./runtime/regex.js";
export { classify } from "./classify.js";
export type { Classification, ClassifyOptions, QueryType } from "./classify.js";
export { compileColumnar } from "./columnar/compile-columnar.js";
export type { ColumnarQuery, ColumnarOptions } from "./columnar/compile-columnar.js";
export type { Column, ColumnarTable, ColumnarData, ColumnarPredicate } from "./columnar/layout.js";
export { rowColumnarData } from "./columnar/row-data.js";
export type { RowInput } from "./columnar/row-data.js";
