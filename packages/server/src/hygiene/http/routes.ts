/**
 * The data lifecycle API under /data/core/hygiene: quota, work orders and
 * dataset expirations. Org-scoped: x-sandbox-name is optional; when sent it
 * must name a sandbox of the org, new work orders/expirations act on datasets
 * of that sandbox (else of the org's default sandbox), and lists and reads,
 * updates and cancels by id see only that sandbox's (else the whole org's).
 * Handlers only translate HTTP to the hygiene services and back.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerOrgHooks, type AuthDeps } from "../../http/auth.js";
import { orgOf } from "../../http/request-context.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import type { HygieneContext } from "../context.js";
import type { Hygiene } from "../hygiene.js";
import { invalid, notFound, ttlInvalid } from "../errors.js";
import { hygieneErrorHandler } from "./error-body.js";
import { expirationListQuery, workOrderListQuery, type Query } from "./list-params.js";
import { expirationJson, workOrderJson } from "./render.js";

export const HYGIENE_PREFIX = "/data/core/hygiene";

export interface HygieneRoutesOptions extends AuthDeps {
  hygiene: Hygiene;
}

function headerSandbox(request: FastifyRequest): string | undefined {
  const v = request.headers["x-sandbox-name"];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s.trim() === "" ? undefined : s.trim();
}

const tags = ["Data lifecycle"];

export async function hygieneRoutes(app: FastifyInstance, opts: HygieneRoutesOptions): Promise<void> {
  registerOrgHooks(app, opts);
  const { hygiene, tenants } = opts;

  /** The sandbox a request acts in: the header's (which must exist in the org) or the org's default. */
  const sandboxName = (request: FastifyRequest): string => {
    const orgId = orgOf(request);
    const name = headerSandbox(request);
    if (name !== undefined) {
      if (!tenants.resolve(orgId, name)) throw new ApiError(403, ErrorCodes.unknownSandbox, `Sandbox '${name.slice(0, 100)}' does not exist in organization '${orgId}'`);
      return name;
    }
    const def = tenants.defaultSandbox(orgId);
    if (!def) throw new ApiError(403, ErrorCodes.unknownSandbox, `Organization '${orgId}' has no sandbox`);
    return def.sandbox.sandboxName;
  };
  const ctxOf = (request: FastifyRequest): HygieneContext => ({
    orgId: orgOf(request),
    sandboxName: sandboxName(request),
    actor: request.principal?.subject ?? "unknown",
  });
  /** Validates a sent header even on org-wide reads, so a typo'd sandbox is not silently ignored. */
  const listSandbox = (request: FastifyRequest): string | undefined => (headerSandbox(request) !== undefined ? sandboxName(request) : undefined);

  /**
   * A request naming a sandbox reaches a resource by id only in that sandbox: a
   * `dev` request gets the same 404 for a `prod` order as for a missing one. It
   * is checked before the service reads or changes anything (a resource never
   * changes sandbox, so the check holds for the change that follows).
   */
  const store = hygiene.deps.store;
  const orderInSandbox = async (request: FastifyRequest, id: string): Promise<void> => {
    const sandbox = listSandbox(request);
    if (sandbox !== undefined && (await store.getWorkOrder(orgOf(request), id, sandbox)) === undefined) throw notFound(`Work order ${id} not found.`);
  };
  /** As for work orders; `id` is a ttlId or a datasetId, as the expiration service resolves it. */
  const expirationInSandbox = async (request: FastifyRequest, id: string): Promise<void> => {
    const sandbox = listSandbox(request);
    if (sandbox === undefined) return;
    const orgId = orgOf(request);
    const found = (await store.getExpiration(orgId, id, sandbox)) ?? (await store.expirationForDataset(orgId, sandbox, id));
    if (found === undefined) throw notFound(`Dataset expiration configuration ${id} not found.`);
  };

  app.setErrorHandler(hygieneErrorHandler((request) => headerSandbox(request) ?? "not-applicable", () => hygiene.deps.clock.now()));

  app.get(`${HYGIENE_PREFIX}/quota`, { schema: { tags, summary: "Quota usage and allowances of the organization" } }, async (request) => {
    const q = request.query as Query;
    const raw = q.quotaType;
    if (Array.isArray(raw)) throw invalid("Give 'quotaType' at most once.");
    listSandbox(request);
    return hygiene.quotas.report(orgOf(request), raw === undefined || raw === "" ? undefined : raw);
  });

  // ---- work orders ---------------------------------------------------------

  app.post(`${HYGIENE_PREFIX}/workorder`, { schema: { tags, summary: "Create a record delete or record update work order" } }, async (request) => {
    const order = await hygiene.workOrders.create(ctxOf(request), request.body);
    return workOrderJson(order);
  });

  app.get(`${HYGIENE_PREFIX}/workorder`, { schema: { tags, summary: "List work orders" } }, async (request) => {
    const ctx = { orgId: orgOf(request), sandboxName: "", actor: "" };
    const query = workOrderListQuery(request.query as Query, listSandbox(request));
    const page = await hygiene.workOrders.list(ctx, query);
    const base = `${request.protocol}://${request.host}${HYGIENE_PREFIX}/workorder`;
    const pageIndex = query.offset / query.limit;
    const links: Record<string, { href: string; templated: boolean }> = {
      page: { href: `${base}?limit={limit}&page={page}`, templated: true },
    };
    // Omitted on the last page: aepp follows `next` for as long as it exists.
    if (query.offset + page.items.length < page.total) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(request.query as Query)) if (typeof v === "string" && k !== "page" && k !== "limit") params.set(k, v);
      params.set("limit", String(query.limit));
      params.set("page", String(pageIndex + 1));
      links.next = { href: `${base}?${params.toString()}`, templated: false };
    }
    return { results: page.items.map(workOrderJson), total: page.total, count: page.items.length, _links: links };
  });

  const getOrder = async (request: FastifyRequest) => {
    const id = (request.params as { id: string }).id;
    await orderInSandbox(request, id);
    return workOrderJson(await hygiene.workOrders.get(ctxOf(request), id));
  };
  const renameOrder = async (request: FastifyRequest) => {
    const id = (request.params as { id: string }).id;
    await orderInSandbox(request, id);
    return workOrderJson(await hygiene.workOrders.rename(ctxOf(request), id, request.body));
  };
  // aepp calls these with a trailing slash.
  for (const path of [`${HYGIENE_PREFIX}/workorder/:id`, `${HYGIENE_PREFIX}/workorder/:id/`]) {
    app.get(path, { schema: { tags, summary: "Get one work order" } }, getOrder);
    app.put(path, { schema: { tags, summary: "Rename or re-describe a work order" } }, renameOrder);
  }

  // ---- dataset expirations -------------------------------------------------

  app.post(`${HYGIENE_PREFIX}/ttl`, { schema: { tags, summary: "Schedule a dataset expiration" } }, async (request, reply) => {
    const record = await hygiene.expirations.create(ctxOf(request), request.body);
    reply.code(201);
    return expirationJson(record, false);
  });

  app.get(`${HYGIENE_PREFIX}/ttl`, { schema: { tags, summary: "List dataset expirations" } }, async (request) => {
    const ctx = { orgId: orgOf(request), sandboxName: "", actor: "" };
    const query = expirationListQuery(request.query as Query, listSandbox(request));
    const page = await hygiene.expirations.list(ctx, query);
    return {
      results: page.items.map((e) => expirationJson(e, false)),
      current_page: query.offset / query.limit,
      // Never 0: aepp loops until total_pages equals its page counter.
      total_pages: Math.max(1, Math.ceil(page.total / query.limit)),
      total_count: page.total,
    };
  });

  app.get(`${HYGIENE_PREFIX}/ttl/:id`, { schema: { tags, summary: "Get a dataset expiration by its id or its dataset's id" } }, async (request) => {
    const include = (request.query as Query).include;
    if (include !== undefined && include !== "history") throw ttlInvalid(`Invalid include '${String(include)}'. Allowed: history.`);
    const id = (request.params as { id: string }).id;
    await expirationInSandbox(request, id);
    const record = await hygiene.expirations.get(ctxOf(request), id);
    return expirationJson(record, include === "history");
  });

  app.put(`${HYGIENE_PREFIX}/ttl/:id`, { schema: { tags, summary: "Update a pending dataset expiration" } }, async (request) => {
    const id = (request.params as { id: string }).id;
    await expirationInSandbox(request, id);
    const record = await hygiene.expirations.update(ctxOf(request), id, request.body);
    return expirationJson(record, false);
  });

  app.delete(`${HYGIENE_PREFIX}/ttl/:id`, { schema: { tags, summary: "Cancel a pending dataset expiration" } }, async (request) => {
    const id = (request.params as { id: string }).id;
    await expirationInSandbox(request, id);
    const record = await hygiene.expirations.cancel(ctxOf(request), id);
    return expirationJson(record, false);
  });
}
