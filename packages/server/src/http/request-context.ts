/**
 * What the auth and tenancy hooks attach to a request. Handlers read it through
 * `tenantOf(request)`, never from headers, so that no handler can act for a
 * tenant the caller was not checked against.
 */
import type { FastifyRequest } from "fastify";
import type { Principal } from "../services/auth/authenticator.js";
import type { TenantContext } from "../services/tenancy.js";

declare module "fastify" {
  interface FastifyRequest {
    principal?: Principal;
    /** The verified organization (set by the org auth hook). */
    orgId?: string;
    /** The verified organization and sandbox (set by the sandbox hook). */
    tenant?: TenantContext;
  }
}

export function tenantOf(request: FastifyRequest): TenantContext {
  if (!request.tenant) throw new Error("route is missing the tenant hooks (see http/auth.ts registerTenantHooks)");
  return request.tenant;
}

export function orgOf(request: FastifyRequest): string {
  if (!request.orgId) throw new Error("route is missing the org auth hook (see http/auth.ts registerOrgHooks)");
  return request.orgId;
}

/** Who makes the request (the token's subject), for createdBy / lastModifiedBy. */
export function actorOf(request: FastifyRequest): string | undefined {
  return request.principal?.subject;
}
