/**
 * Turning a submitted expression into what the service stores and decides on:
 * canonical text, `inSegment` references, diagnostics and the classification.
 * Shared by create, overwrite and the eligibility endpoint.
 */
import type { SandboxLimits } from "../platform/config.js";
import type { DefinitionRepository, TenantScope } from "../stores/types.js";
import { costLimits } from "./evaluation-budget.js";
import type { TenantContext } from "./tenancy.js";
import { ApiError, ErrorCodes, badRequest, type ErrorItem } from "./errors.js";
import {
  canonicalText,
  classifyQuery,
  inSegmentReferences,
  parsePql,
  pqlErrors,
  PqlError,
  PqlJsonError,
  queryFromPqlJson,
  type Classified,
  type Diagnostic,
  type Query,
} from "./pql.js";

export interface ExpressionInput {
  type: string;
  format: string;
  value: string;
}

export interface Analysis {
  expression: { type: "PQL"; format: "pql/text" | "pql/json"; value: string };
  text: string;
  query: Query;
  references: string[];
  classification: Classified;
}

/** How many referenced definitions (transitively) are loaded to classify one expression. */
const MAX_REFERENCE_GRAPH = 4000;

export function diagnosticItems(diags: Diagnostic[]): ErrorItem[] {
  return diags.map((d) => ({
    code: d.code,
    message: `line ${d.line}, column ${d.column}: ${d.message}`,
    line: d.line,
    column: d.column,
    endLine: d.endLine,
    endColumn: d.endColumn,
  }));
}

/** Validate the envelope and produce the PQL text; throws 400s with positions. */
export function expressionText(expr: ExpressionInput, maxBytes: number): { text: string; format: "pql/text" | "pql/json" } {
  if (expr.type.toUpperCase() !== "PQL") {
    throw badRequest(`expression.type must be "PQL" (got "${expr.type}")`);
  }
  if (expr.format !== "pql/text" && expr.format !== "pql/json") {
    throw badRequest(`expression.format must be "pql/text" or "pql/json" (got "${expr.format}")`);
  }
  const bytes = Buffer.byteLength(expr.value, "utf8");
  if (bytes > maxBytes) {
    throw new ApiError(400, ErrorCodes.limit, `expression.value is ${bytes} bytes; the limit is ${maxBytes} bytes`);
  }
  if (expr.value.trim() === "") throw badRequest("expression.value must not be empty", ErrorCodes.invalidPql);
  if (expr.format === "pql/text") return { text: expr.value, format: "pql/text" };
  try {
    return { text: canonicalText(queryFromPqlJson(expr.value)), format: "pql/json" };
  } catch (err) {
    if (err instanceof PqlJsonError || err instanceof PqlError) throw badRequest(err.message, ErrorCodes.invalidPql);
    throw err;
  }
}

/** What an expression is held to: its size and its worst-case cost per profile. */
export type ExpressionLimits = Pick<SandboxLimits, "expressionBytes" | "eventsPerProfile" | "evaluationCost">;

/**
 * Check and parse PQL text; every error diagnostic is reported with its position. With
 * `limits`, an expression whose worst case per profile exceeds them is refused (PQL_TOO_COSTLY).
 */
export function parseChecked(text: string, limits?: Pick<SandboxLimits, "eventsPerProfile" | "evaluationCost">): Query {
  const errors = pqlErrors(text, limits === undefined ? undefined : costLimits(limits));
  if (errors.length > 0) {
    // The cost refusal comes alone (only a valid expression is costed): its own title.
    const title = errors[0]!.code === "PQL_TOO_COSTLY" ? "The PQL expression is too costly to evaluate" : `The PQL expression is invalid (${errors.length} error${errors.length === 1 ? "" : "s"})`;
    throw new ApiError(400, ErrorCodes.invalidPql, title, diagnosticItems(errors));
  }
  try {
    return parsePql(text);
  } catch (err) {
    if (err instanceof PqlError) {
      throw new ApiError(400, ErrorCodes.invalidPql, "The PQL expression is invalid (1 error)", diagnosticItems([err.toDiagnostic()]));
    }
    throw err;
  }
}

/**
 * Load the definitions `references` name, and theirs, breadth first. A path
 * back to `selfId` is an inSegment cycle and is rejected.
 */
export async function loadReferenceGraph(
  repo: DefinitionRepository,
  scope: TenantScope,
  references: string[],
  selfId: string | undefined,
): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  const parent = new Map<string, string | undefined>(references.map((r) => [r, selfId]));
  let frontier = references.filter((r) => r !== selfId);
  if (selfId && references.includes(selfId)) {
    throw badRequest(`inSegment cycle: definition '${selfId}' references itself`, ErrorCodes.invalidPql);
  }
  while (frontier.length > 0 && texts.size < MAX_REFERENCE_GRAPH) {
    const found = await repo.getMany(scope, frontier);
    const next: string[] = [];
    for (const [id, rec] of found) {
      texts.set(id, rec.canonicalText);
      for (const ref of rec.references) {
        if (selfId !== undefined && ref === selfId) {
          const chain: string[] = [];
          for (let cur: string | undefined = id; cur !== undefined && cur !== selfId; cur = parent.get(cur)) chain.unshift(cur);
          const path = [selfId, ...chain, selfId];
          throw badRequest(`inSegment cycle: ${path.join(" -> ")}`, ErrorCodes.invalidPql);
        }
        if (!parent.has(ref)) {
          parent.set(ref, id);
          next.push(ref);
        }
      }
    }
    frontier = next;
  }
  return texts;
}

/**
 * Rewrites the paths of a parsed expression that stand for something stored (computed attributes:
 * computed/expand.ts), refusing what cannot be read; given to the engines by the composition root.
 */
export type QueryExpander = (ctx: Pick<TenantContext, "orgId" | "sandbox">, query: Query) => Promise<Query>;

export async function analyzeExpression(
  repo: DefinitionRepository,
  scope: TenantScope,
  expr: ExpressionInput,
  limits: ExpressionLimits,
  selfId?: string,
  expand?: (query: Query) => Promise<Query>,
): Promise<Analysis> {
  const { text, format } = expressionText(expr, limits.expressionBytes);
  const checked = parseChecked(text, limits);
  // Paths that stand for something stored (computed attributes) become what they stand for, so
  // the canonical text every engine compiles evaluates them itself.
  const query = expand === undefined ? checked : await expand(checked);
  // What the engines will run is held to the same checks and cost limit as what was written.
  if (query !== checked) parseChecked(canonicalText(query), limits);
  const references = inSegmentReferences(query);
  const graph = await loadReferenceGraph(repo, scope, references, selfId);
  const classification = classifyQuery(query, (id) => graph.get(id), selfId);
  return {
    expression: { type: "PQL", format, value: expr.value },
    text: canonicalText(query),
    query,
    references,
    classification,
  };
}
