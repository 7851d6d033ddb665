/**
 * Operator (admin) endpoints under /admin. Only operator tokens pass the guard
 * (registerOperatorHooks); later issues add runtime entitlement changes here.
 */
import type { FastifyInstance } from "fastify";
import { quarantinePageSchema } from "../../profiles/http/quarantine-routes.js";
import type { ManualClock } from "../../platform/clock.js";
import type { StoreHealth } from "../../profiles/store.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import { registerOperatorHooks, type AuthDeps } from "../auth.js";
import { sandboxSchema } from "../schemas.js";

export interface AdminRoutesOptions extends AuthDeps {
  /** The profile store, when the profile plane runs: GET /admin/quarantine lists what it quarantined. */
  profiles?: StoreHealth;
  /** A test clock (StartOptions.testClock): `POST /admin/clock` moves it, then runs the streaming sweep. */
  testClock?: { clock: ManualClock; sweep(): Promise<void> };
}

interface QuarantineQuerystring { orgId?: string; sandboxName?: string; limit?: number; after?: number }

export async function adminRoutes(app: FastifyInstance, opts: AdminRoutesOptions): Promise<void> {
  registerOperatorHooks(app, opts);
  const test = opts.testClock;
  if (test) {
    app.post<{ Body: { advanceMs: number } }>("/clock", {
      schema: {
        tags: ["Operator"],
        summary: "Move the test clock forward, then close the streaming windows due (only with SEGMENTD_TEST_CLOCK)",
        body: { type: "object", properties: { advanceMs: { type: "integer", minimum: 0, maximum: 366 * 24 * 3600 * 1000 } }, required: ["advanceMs"], additionalProperties: false },
      },
    }, async (request) => {
      test.clock.advance(request.body.advanceMs);
      await test.sweep();
      return { now: test.clock.now() };
    });
  }
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

  const profiles = opts.profiles;
  if (profiles === undefined) return;
  app.get<{ Querystring: QuarantineQuerystring }>("/quarantine", {
    schema: {
      tags: ["Operator"],
      summary: "Stored records the profile store skips at read because they cannot be served safely (operator token only)",
      description: "A record nested deeper than the record limit (or unreadable) that was stored before the limit was enforced is skipped wherever it would be read (profile access, batch jobs, exports, streaming); the rest of its profile and every other profile are served. Remove one by deleting its identity or dataset (data hygiene).",
      headers: { type: "object", properties: { authorization: { type: "string", description: "Bearer <OPERATOR_TOKEN>" } } },
      querystring: {
        type: "object",
        properties: {
          orgId: { type: "string", minLength: 1, maxLength: 256, description: "Only this organization's records (with sandboxName)" },
          sandboxName: { type: "string", minLength: 1, maxLength: 256, description: "Only this sandbox's records (with orgId)" },
          limit: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
          after: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "The `next` of the previous page" },
        },
        additionalProperties: false,
      },
      response: { 200: quarantinePageSchema },
    },
  }, async (request) => {
    const { orgId, sandboxName, limit = 100, after } = request.query;
    if ((orgId === undefined) !== (sandboxName === undefined)) {
      throw new ApiError(400, ErrorCodes.badRequest, "orgId and sandboxName filter together: give both or neither");
    }
    const scope = orgId !== undefined && sandboxName !== undefined ? { orgId, sandboxName } : undefined;
    const records = await profiles.listQuarantined({ limit, ...(scope ? { scope } : {}), ...(after !== undefined ? { afterSeq: after } : {}) });
    return { records, next: records.length === limit ? records[records.length - 1]!.seq : null };
  });
}
