/**
 * What DefinitionService calls on a definition's parsed expression before it analyses and
 * stores it: references to the sandbox's live computed attributes become their aggregates
 * (computed/rewrite.ts), so the canonical text every engine compiles — batch jobs, streaming,
 * edge, explain — evaluates the value itself. A reference to an attribute that does not exist or
 * holds no value (DRAFT, FAILED, DISABLED) is refused, nothing stored.
 */
import type { QueryExpander } from "../services/definition-analysis.js";
import { ApiError, ErrorCodes } from "../services/errors.js";
import { tenantIdOf } from "../services/schema-registry.js";
import { scopeOf } from "../services/tenancy.js";
import type { ComputedAttributeRepository } from "../stores/computed-attributes.js";
import { referencedAttributes, rewriteComputedAttributes } from "./rewrite.js";
import { LIVE_STATUSES } from "./service.js";

export function definitionExpander(repo: ComputedAttributeRepository): QueryExpander {
  return async (ctx, query) => {
    const tenantId = tenantIdOf(ctx.orgId);
    const names = referencedAttributes(query, tenantId);
    if (names.length === 0) return query;
    const all = await repo.list(scopeOf(ctx));
    const live = new Map(all.filter((r) => LIVE_STATUSES.includes(r.status)).map((r) => [r.name, r]));
    for (const name of names) {
      if (live.has(name)) continue;
      const found = all.find((r) => r.name === name);
      throw new ApiError(400, ErrorCodes.invalidPql, found === undefined
        ? `The expression reads computed attribute '${name}', which does not exist in this sandbox`
        : `The expression reads computed attribute '${name}', which is ${found.status}: only NEW, PROCESSING and PROCESSED attributes hold values`);
    }
    return rewriteComputedAttributes(query, tenantId, live);
  };
}
