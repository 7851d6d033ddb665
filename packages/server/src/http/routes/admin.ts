/**
 * Operator (admin) endpoints under /admin. Only operator tokens pass the guard
 * (registerOperatorHooks); later issues add runtime entitlement changes here.
 */
import type { FastifyInstance } from "fastify";
import { registerOperatorHooks, type AuthDeps } from "../auth.js";
import { sandboxSchema } from "../schemas.js";

export async function adminRoutes(app: FastifyInstance, opts: AuthDeps): Promise<void> {
  registerOperatorHooks(app, opts);
  app.get("/tenants", {
    schema: {
      tags: ["Operator"],
      summary: "Organizations and sandboxes this server knows (operator token only)",
      headers: { type: "object", properties: { authorization: { type: "string", description: "Bearer <OPERATOR_TOKEN>" } } },
      response: {
        200: {
          type: "object",
          properties: {
            organizations: {
              type: "array",
              items: { type: "object", properties: { orgId: { type: "string" }, sandboxes: { type: "array", items: sandboxSchema } }, required: ["orgId", "sandboxes"] },
            },
          },
          required: ["organizations"],
        },
      },
    },
  }, async () => {
    const byOrg = new Map<string, unknown[]>();
    for (const t of opts.tenants.all()) {
      const list = byOrg.get(t.orgId) ?? [];
      list.push(t.sandbox);
      byOrg.set(t.orgId, list);
    }
    return { organizations: [...byOrg].map(([orgId, sandboxes]) => ({ orgId, sandboxes })) };
  });
}
