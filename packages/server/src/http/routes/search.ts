/**
 * Segment search (segmentation-api.md §8): `/search/namespaces`, `/search/entities` and
 * `/search/taxonomy` over the sandbox's audiences: segment definitions in namespace `AEPSegments`,
 * external audiences in their own (segmentd has no folders, so every object sits at the root).
 * The query language is in services/segment-search.ts; handlers read the sandbox's audiences,
 * match the query against the sandbox's cached index under a budget (services/search-match.ts,
 * #37) and page the matches.
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AudienceService } from "../../services/audiences.js";
import { ApiError, badRequest } from "../../services/errors.js";
import { SEARCH_LIMITS, SearchBudget, SearchDeadlineError, SearchTooCostlyError, type SearchLimits } from "../../services/search-budget.js";
import { SearchIndexCache } from "../../services/search-index.js";
import { runSearch } from "../../services/search-match.js";
import { compileSearch, PLATFORM_NAMESPACE, SEARCH_SCHEMA, SearchQueryError, type SearchDoc, type SearchPlan } from "../../services/segment-search.js";
import { registerTenantHooks, type AuthDeps } from "../auth.js";
import { tenantOf } from "../request-context.js";
import { authHeaders, commonErrorResponses, upsErrorSchema } from "../schemas.js";
import { MAX_QUERY_INTEGER } from "./paging-params.js";

export interface SearchRoutesOptions extends AuthDeps {
  audiences: AudienceService;
  /** Each search's budget (default SEARCH_LIMITS). */
  searchLimits?: SearchLimits;
}

/** AEP's page size for search: the default and the maximum. */
export const MAX_SEARCH_LIMIT = 50;
export const SEARCH_CODE = "SEGMENTD-SEARCH-400";
export const SEARCH_TOO_COSTLY_CODE = "SEGMENTD-SEARCH-TOO-COSTLY-422";
export const SEARCH_DEADLINE_CODE = "SEGMENTD-SEARCH-DEADLINE-503";
const ROOT = "root";

interface SearchQuery {
  "schema.name"?: string;
  schemaClass?: string;
  namespace?: string;
  s?: string;
  entityId?: string;
  limit?: number;
  page?: number;
}

const queryProps = {
  "schema.name": { type: "string" },
  schemaClass: { type: "string" },
  namespace: { type: "string" },
  s: { type: "string" },
  entityId: { type: "string" },
} as const;

const searchHeaders = { ...authHeaders, properties: { ...authHeaders.properties, "x-ups-search-version": { type: "string" } } };
const statusSchema = { type: "object", properties: { message: { type: "string" } }, required: ["message"] } as const;

/** Adobe's collection sends `schemaClass`, the reference `schema.name`: either names the schema, which must be the one searchable class. */
function checkRequest(request: FastifyRequest<{ Querystring: SearchQuery }>, needNamespace: boolean): void {
  const version = request.headers["x-ups-search-version"];
  if (version !== undefined && version !== "1.0") throw badRequest(`Unsupported x-ups-search-version '${String(version).slice(0, 20)}': the only supported version is 1.0`, SEARCH_CODE);
  const q = request.query;
  const schema = q["schema.name"] ?? q.schemaClass;
  if (schema === undefined) throw badRequest("The query parameter schema.name (or schemaClass) is required", SEARCH_CODE);
  if (schema !== SEARCH_SCHEMA) throw badRequest(`Unsupported schema '${schema.slice(0, 100)}': only ${SEARCH_SCHEMA} is searchable`, SEARCH_CODE);
  if (needNamespace && (q.namespace === undefined || q.namespace === "")) throw badRequest("The query parameter namespace is required", SEARCH_CODE);
}

function plan(s: string | undefined): SearchPlan {
  try {
    return compileSearch(s);
  } catch (err) {
    if (err instanceof SearchQueryError) throw badRequest(err.message, SEARCH_CODE);
    throw err;
  }
}

/** The sandbox's searchable objects, by name (case-insensitive) then id. */
async function searchable(svc: AudienceService, request: FastifyRequest): Promise<SearchDoc[]> {
  // Read in pages, yielding between them; a definition moved across pages by a concurrent write is counted once.
  const seen = new Set<string>();
  const out: SearchDoc[] = [];
  for (const a of await svc.summaries(tenantOf(request), () => nextTurn())) {
    if (seen.has(a.id)) continue;
    seen.add(a.id);
    out.push({ ...a, parentFolderId: ROOT });
  }
  return out.sort((a, b) => a.name.toLowerCase().localeCompare(b.name.toLowerCase()) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * The sandbox's searchable objects and the ids of those matching `s`. The query is compiled
 * before anything is read; the match runs on the sandbox's index, synced with what was just read,
 * under the search's budget: past its units 422, past its deadline 503.
 */
async function search(opts: SearchRoutesOptions, cache: SearchIndexCache, request: FastifyRequest, s: string | undefined): Promise<{ docs: SearchDoc[]; matches: (d: SearchDoc) => boolean }> {
  const p = plan(s);
  const budget = new SearchBudget(opts.searchLimits ?? SEARCH_LIMITS);
  const docs = await searchable(opts.audiences, request);
  if (p.kind === "all") return { docs, matches: () => true };
  const ctx = tenantOf(request);
  try {
    const ids = await cache.exclusive(`${ctx.orgId}\u0000${ctx.sandbox.sandboxId}`, async (index) => {
      budget.startSlice();
      await index.sync(docs, () => budget.due(), () => budget.pause());
      return runSearch(p, index, budget);
    });
    return { docs, matches: (d) => ids.has(d.id) };
  } catch (err) {
    if (err instanceof SearchTooCostlyError) throw new ApiError(422, SEARCH_TOO_COSTLY_CODE, err.message);
    if (err instanceof SearchDeadlineError) throw new ApiError(503, SEARCH_DEADLINE_CODE, err.message);
    throw err;
  }
}

function sourceIdOf(d: SearchDoc): { namespace: string; id: string } {
  return { namespace: d.namespace, id: d.id };
}

/** A search operation's route schema: its summary, query string and 200 body (with `status`). */
function searchSchema(summary: string, querystring: object, properties: Record<string, object>, required: string[]): object {
  return {
    tags: ["Segment search"],
    summary,
    headers: searchHeaders,
    querystring,
    response: {
      200: { type: "object", properties: { ...properties, status: statusSchema }, required: [...required, "status"] },
      ...commonErrorResponses,
      422: { ...upsErrorSchema, description: `A term needs more work than a search may do (${SEARCH_TOO_COSTLY_CODE})` },
      503: { ...upsErrorSchema, description: `The search did not finish within its deadline (${SEARCH_DEADLINE_CODE})` },
    },
  };
}

export async function searchRoutes(app: FastifyInstance, opts: SearchRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const cache = new SearchIndexCache();

  app.get<{ Querystring: SearchQuery }>("/search/namespaces", {
    schema: searchSchema("Count the search objects matching a query, per namespace", { type: "object", properties: queryProps }, {
      namespaces: { type: "array", items: { type: "object", properties: { namespace: { type: "string" }, displayName: { type: "string" }, count: { type: "integer" } }, required: ["namespace", "displayName", "count"] } },
      totalCount: { type: "string" },
    }, ["namespaces", "totalCount"]),
  }, async (request) => {
    checkRequest(request, false);
    const { docs, matches } = await search(opts, cache, request, request.query.s);
    // AEPSegments always, then every namespace the sandbox's external audiences use.
    const counts = new Map<string, number>([[PLATFORM_NAMESPACE, 0]]);
    for (const d of docs) counts.set(d.namespace, (counts.get(d.namespace) ?? 0) + (matches(d) ? 1 : 0));
    const namespaces = [...counts].map(([namespace, count]) => ({ namespace, displayName: namespace, count }));
    return { namespaces, totalCount: String(namespaces.length), status: { message: "Success" } };
  });

  app.get<{ Querystring: SearchQuery }>("/search/entities", {
    schema: searchSchema("Search objects of one namespace (folders first, then segment definitions), a page at a time", {
      type: "object",
      properties: {
        ...queryProps,
        limit: { type: "integer", minimum: 1, maximum: MAX_SEARCH_LIMIT, default: MAX_SEARCH_LIMIT },
        page: { type: "integer", minimum: 0, maximum: MAX_QUERY_INTEGER, default: 0 },
      },
    }, {
      entities: {
        type: "array",
        items: {
          type: "object",
          properties: {
            id: { type: "string" }, base64EncodedSourceId: { type: "string" },
            sourceId: { type: "object", properties: { namespace: { type: "string" }, id: { type: "string" } } },
            isFolder: { type: "boolean" }, parentFolderId: { type: "string" }, name: { type: "string" }, description: { type: "string" },
          },
        },
      },
      page: { type: "object", properties: { totalCount: { type: "integer" }, totalPages: { type: "integer" }, pageOffset: { type: "integer" }, pageSize: { type: "integer" } } },
    }, ["entities", "page"]),
  }, async (request) => {
    checkRequest(request, true);
    const q = request.query;
    const limit = q.limit ?? MAX_SEARCH_LIMIT;
    const page = q.page ?? 0;
    const folder = q.entityId ?? ROOT;
    let docs: SearchDoc[] = [];
    if (folder === ROOT) {
      const found = await search(opts, cache, request, q.s);
      docs = found.docs.filter((d) => d.namespace === q.namespace && found.matches(d));
    } else plan(q.s);
    const entities = docs.slice(page * limit, page * limit + limit).map((d) => {
      const sourceId = sourceIdOf(d);
      return { id: d.id, base64EncodedSourceId: Buffer.from(JSON.stringify(sourceId)).toString("base64"), sourceId, isFolder: false, parentFolderId: d.parentFolderId, name: d.name, description: d.description };
    });
    return {
      entities,
      page: { totalCount: docs.length, totalPages: Math.ceil(docs.length / limit), pageOffset: page, pageSize: entities.length },
      status: { message: "Success" },
    };
  });

  app.get<{ Querystring: SearchQuery }>("/search/taxonomy", {
    schema: searchSchema("The folders that contain a search object, root first (segmentd has none: an empty list)", { type: "object", properties: queryProps }, {
      taxonomy: { type: "array", items: { type: "object", properties: { id: { type: "string" }, base64EncodedSourceId: { type: "string" }, name: { type: "string" }, parentFolderId: { type: "string" } } } },
    }, ["taxonomy"]),
  }, async (request) => {
    checkRequest(request, true);
    const id = request.query.entityId;
    if (id === undefined || id === "") throw badRequest("The query parameter entityId is required", SEARCH_CODE);
    const found = (await opts.audiences.namespaceOf(tenantOf(request), id)) === request.query.namespace;
    // Adobe answers an unknown entity with an empty taxonomy and says so in the status.
    return { taxonomy: [], status: { message: found ? "Success" : `Cannot find entityId ${id.slice(0, 100)}.` } };
  });
}
