/**
 * The one tenant type and the one tenant key. A tenant is an organization's
 * sandbox, known both by its id and by its name. The metadata stores
 * (`stores/`) key rows by sandbox id; the profile stores (`profiles/`,
 * `hygiene/`) by sandbox name, as their stored data always has. Each store's
 * scope type picks the field it keys by from `TenantRef`, so a `TenantRef`
 * (built once per request by `tenantRef`) is accepted by both without
 * conversion. Lives in platform/ so every layer, including the bus, can use it.
 */

/** Which organization and sandbox a call acts for, by both sandbox id and name. */
export interface TenantRef {
  orgId: string;
  sandboxId: string;
  sandboxName: string;
}

/** The scope of the metadata stores (`stores/types.ts` `TenantScope`) and of bus events. */
export type SandboxIdScope = Pick<TenantRef, "orgId" | "sandboxId">;

/** The scope of the profile stores (`profiles/types.ts` `TenantScope`). */
export type SandboxNameScope = Pick<TenantRef, "orgId" | "sandboxName">;

/** The shape of a request's tenant (`services/tenancy.ts` `TenantContext`), declared structurally to keep platform/ at the bottom. */
export interface TenantSource {
  orgId: string;
  sandbox: { sandboxId: string; sandboxName: string };
}

export function tenantRef(t: TenantSource): TenantRef {
  return { orgId: t.orgId, sandboxId: t.sandbox.sandboxId, sandboxName: t.sandbox.sandboxName };
}

/**
 * The in-memory key of a tenant (maps of the streaming engine and the edge
 * locations). Never persisted. Accepts a `TenantRef` or a request's tenant.
 */
export function tenantKey(t: SandboxIdScope | TenantSource): string {
  return "sandbox" in t ? `${t.orgId}\u0000${t.sandbox.sandboxId}` : `${t.orgId}\u0000${t.sandboxId}`;
}

/**
 * The in-memory key of a tenant inside the profile stores (their change feed,
 * which also crosses the embedded store's worker boundary). The profile stores
 * know a tenant only by sandbox name — hygiene work orders and the stored
 * tenant rows carry no sandbox id — so this key is by name; it is never
 * compared with `tenantKey`.
 */
export function sandboxNameKey(t: SandboxNameScope): string {
  return `${t.orgId}\u0000${t.sandboxName}`;
}
