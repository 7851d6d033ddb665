/**
 * Authentication and tenancy hooks. Every API-area plugin registers them
 * first thing:
 *
 *   registerTenantHooks(app, deps)   // org + sandbox APIs (segmentation, merge policies)
 *   registerOrgHooks(app, deps)      // org-wide APIs without x-sandbox-name (hygiene)
 *   registerOperatorHooks(app, deps) // operator/admin endpoints
 *
 * Order of checks (each failure is Adobe's gateway error, family A):
 * Authorization → x-api-key → x-gw-ims-org-id → token grants that org →
 * org is known → x-sandbox-name present → sandbox exists (UPS 403).
 * They run as onRequest hooks, i.e. before the body is read or parsed.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Authenticator } from "../services/auth/authenticator.js";
import { ApiError, ErrorCodes } from "../services/errors.js";
import type { TenantDirectory } from "../services/tenancy.js";
import { Gateway } from "./errors.js";
import { documentAuth } from "./openapi.js";
import "./request-context.js";

export interface AuthDeps {
  authenticator: Authenticator;
  tenants: TenantDirectory;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s.trim() === "" ? undefined : s.trim();
}

function bearer(request: FastifyRequest): string {
  const h = header(request, "authorization");
  if (!h) throw Gateway.tokenMissing();
  const m = /^Bearer\s+(\S+)$/i.exec(h);
  if (!m) throw Gateway.tokenInvalid();
  return m[1]!;
}

export async function authenticateOrg(deps: AuthDeps, request: FastifyRequest): Promise<void> {
  const verdict = await deps.authenticator.verifyToken(bearer(request));
  // An operator token is not an org token: it never reaches org APIs.
  if (!verdict.ok || verdict.principal.kind !== "org") throw Gateway.tokenInvalid();
  const apiKey = header(request, "x-api-key");
  if (!apiKey) throw Gateway.apiKeyMissing();
  if (!deps.authenticator.isRegisteredApiKey(apiKey)) throw Gateway.apiKeyInvalid();
  const orgId = header(request, "x-gw-ims-org-id");
  if (!orgId) throw Gateway.missingHeader("x-gw-ims-org-id");
  if (!verdict.principal.orgs.has(orgId)) throw Gateway.orgNotEntitled();
  if (!deps.tenants.hasOrg(orgId)) throw Gateway.orgUnknown();
  request.principal = verdict.principal;
  request.orgId = orgId;
}

export function resolveSandbox(deps: AuthDeps, request: FastifyRequest): void {
  const orgId = request.orgId!;
  const name = header(request, "x-sandbox-name");
  if (!name) throw Gateway.missingHeader("x-sandbox-name");
  const tenant = deps.tenants.resolve(orgId, name);
  if (!tenant) {
    throw new ApiError(403, ErrorCodes.unknownSandbox, `Sandbox '${name.slice(0, 100)}' does not exist in organization '${orgId}'`);
  }
  request.tenant = tenant;
}

export function registerOrgHooks(app: FastifyInstance, deps: AuthDeps): void {
  documentAuth(app, "org");
  app.addHook("onRequest", async (request) => {
    await authenticateOrg(deps, request);
  });
}

export function registerTenantHooks(app: FastifyInstance, deps: AuthDeps): void {
  documentAuth(app, "tenant");
  app.addHook("onRequest", async (request) => {
    await authenticateOrg(deps, request);
    resolveSandbox(deps, request);
  });
}

/** Operator endpoints accept only operator tokens; an org token gets 403, whatever org it names. */
export function registerOperatorHooks(app: FastifyInstance, deps: AuthDeps): void {
  documentAuth(app, "operator");
  app.addHook("onRequest", async (request) => {
    const verdict = await deps.authenticator.verifyToken(bearer(request));
    if (!verdict.ok) throw Gateway.tokenInvalid();
    if (verdict.principal.kind !== "operator") {
      throw new ApiError(403, ErrorCodes.operatorOnly, "This endpoint requires an operator token; organization tokens are not accepted");
    }
    request.principal = verdict.principal;
  });
}
