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
export { format } from "./format.js";
export { toPqlJson, fromPqlJson } from "./pqljson.js";
export type { PqlJsonNode } from "./pqljson.js";
export { check } from "./check.js";
export type { CheckOptions, XdmFieldType } from "./check.js";
export { evaluate } from "./evaluate.js";
export type { EvalContext } from "./evaluate.js";
export { compile } from "./compile.js";
export type { CompiledQuery } from "./compile.js";
export { classify } from "./classify.js";
export type { Classification, ClassifyOptions, QueryType } from "./classify.js";
