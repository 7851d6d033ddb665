/**
 * The visual audience builder's rule model (issue #29): plain data a UI
 * renders, and its exact two-way conversion with PQL. See model.ts.
 */
export * from "./model.js";
export * from "./operators.js";
export { rulesToPql, tryRulesToPql } from "./to-pql.js";
export type { RulesToPqlResult } from "./to-pql.js";
export { pqlToRules } from "./from-pql.js";
export type { ConversionError, PqlToRulesOptions, PqlToRulesResult } from "./from-pql.js";
export { normalize } from "./normalize.js";
export { validateModel } from "./validate.js";
export type { ModelProblem } from "./validate.js";
export { ModelError } from "./build.js";
