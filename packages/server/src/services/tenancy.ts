/**
 * Organizations and their sandboxes, from configuration (or the dev bootstrap).
 * A request acts for one `TenantContext`; services hand its `scope` to every
 * store call.
 */
import { createHash } from "node:crypto";
import type { Config, SandboxLimits } from "../platform/config.js";
import type { SandboxRef } from "../stores/records.js";
import { tenantRef, type TenantRef } from "../platform/tenant.js";

export interface TenantContext {
  orgId: string;
  sandbox: SandboxRef;
  limits: SandboxLimits;
}

/** The tenant's `TenantRef`: accepted as is by the metadata stores, the profile stores and the bus. */
export function scopeOf(ctx: Pick<TenantContext, "orgId" | "sandbox">): TenantRef {
  return tenantRef(ctx);
}

/** A stable UUID-shaped id for a configured sandbox without an explicit id (so restarts keep it). */
export function derivedSandboxId(orgId: string, name: string): string {
  const h = createHash("sha256").update(`segmentd-sandbox\u0000${orgId}\u0000${name}`).digest("hex");
  // Format as an RFC 4122 version-5-style UUID.
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export class TenantDirectory {
  private readonly orgs = new Map<string, Map<string, TenantContext>>();
  private readonly bySandbox = new Map<string, TenantContext>();

  constructor(config: Pick<Config, "organizations" | "limits">) {
    for (const org of config.organizations) {
      const sandboxes = new Map<string, TenantContext>();
      for (const s of org.sandboxes) {
        const t: TenantContext = {
          orgId: org.id,
          sandbox: { sandboxId: s.id ?? derivedSandboxId(org.id, s.name), sandboxName: s.name, type: s.type, default: s.default },
          limits: { ...config.limits, ...(s.limits ?? {}) },
        };
        sandboxes.set(s.name, t);
        this.bySandbox.set(t.sandbox.sandboxId, t);
      }
      this.orgs.set(org.id, sandboxes);
    }
  }

  hasOrg(orgId: string): boolean {
    return this.orgs.has(orgId);
  }

  resolve(orgId: string, sandboxName: string): TenantContext | undefined {
    return this.orgs.get(orgId)?.get(sandboxName);
  }

  /** The tenant of a sandbox id (what the bus and the metadata stores carry). */
  bySandboxId(sandboxId: string): TenantContext | undefined {
    return this.bySandbox.get(sandboxId);
  }

  /** The org's default sandbox (used by org-wide APIs that do not take x-sandbox-name). */
  defaultSandbox(orgId: string): TenantContext | undefined {
    const all = [...(this.orgs.get(orgId)?.values() ?? [])];
    return all.find((t) => t.sandbox.default) ?? all[0];
  }

  all(): TenantContext[] {
    return [...this.orgs.values()].flatMap((m) => [...m.values()]);
  }
}
