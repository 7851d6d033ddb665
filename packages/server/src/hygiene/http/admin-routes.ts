/**
 * Operator-only entitlement changes (decisions §3: allowances change at
 * runtime without a restart). Org tokens get 403 from the operator guard.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerOperatorHooks, type AuthDeps } from "../../http/auth.js";
import { ApiError, ErrorCodes, badRequest } from "../../services/errors.js";
import { HygieneError } from "../errors.js";
import type { Hygiene } from "../hygiene.js";

export const ENTITLEMENTS_PATH = "/admin/orgs/:orgId/entitlements";

export interface HygieneAdminOptions extends AuthDeps {
  hygiene: Hygiene;
}

export async function hygieneAdminRoutes(app: FastifyInstance, opts: HygieneAdminOptions): Promise<void> {
  registerOperatorHooks(app, opts);
  const orgParam = (request: FastifyRequest): string => {
    const { orgId } = request.params as { orgId: string };
    if (!opts.tenants.hasOrg(orgId)) throw new ApiError(404, ErrorCodes.notFound, `Organization '${orgId.slice(0, 100)}' is not configured on this server`);
    return orgId;
  };
  const tags = ["Operator"];

  app.get(ENTITLEMENTS_PATH, { schema: { tags, summary: "Data lifecycle allowances of an organization (operator token only)" } }, async (request) =>
    opts.hygiene.entitlements.view(orgParam(request)),
  );

  app.put(ENTITLEMENTS_PATH, { schema: { tags, summary: "Override data lifecycle allowances of an organization (operator token only)" } }, async (request) => {
    const orgId = orgParam(request);
    try {
      return await opts.hygiene.entitlements.update(orgId, request.body);
    } catch (err) {
      // Operator endpoints answer in the service (UPS) error shape, like the rest of /admin.
      if (err instanceof HygieneError) throw badRequest(err.message);
      throw err;
    }
  });
}
