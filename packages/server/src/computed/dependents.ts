/**
 * The saved definitions that read a computed attribute: their expression as written (the stored
 * canonical text holds the aggregate instead, computed/expand.ts) names
 * `_<TENANT_ID>.ComputedAttributes.<name>`. Disabling an attribute is refused while any does
 * (computed/service.ts), as AEP refuses to delete a function others depend on (422).
 */
import { tenantIdOf } from "../services/schema-registry.js";
import { expressionText } from "../services/definition-analysis.js";
import { parsePql } from "../services/pql.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { DefinitionRepository } from "../stores/types.js";
import { referencedAttributes } from "./rewrite.js";

export interface DependentDefinition {
  id: string;
  name: string;
}

export type DependentsOf = (ctx: TenantContext, attributeName: string) => Promise<DependentDefinition[]>;

const PAGE = 500;

export function definitionsReading(definitions: DefinitionRepository): DependentsOf {
  return async (ctx, attributeName) => {
    const scope = scopeOf(ctx);
    const tenantId = tenantIdOf(ctx.orgId);
    const out: DependentDefinition[] = [];
    for (let offset = 0; ; offset += PAGE) {
      const page = await definitions.list(scope, { filters: {}, sort: [{ field: "creationTime", direction: "asc" }], offset, limit: PAGE });
      for (const { definition } of page.items) {
        // Cheap test first: only an expression naming the field group is parsed.
        if (!definition.expression.value.includes("ComputedAttributes")) continue;
        let names: string[];
        try {
          names = referencedAttributes(parsePql(expressionText(definition.expression, Number.MAX_SAFE_INTEGER).text), tenantId);
        } catch {
          continue; // a stored expression that no longer parses reads nothing
        }
        if (names.includes(attributeName)) out.push({ id: definition.id, name: definition.name });
      }
      if (page.items.length < PAGE || offset + PAGE >= page.total) return out;
    }
  };
}
