/**
 * Merge policies (segmentation-api.md §15, profile.yaml): one default per
 * schema class (a new default unsets the old one; the default is never unset,
 * moved to another class or deleted, so a class that has one keeps it), at most
 * one policy active on edge per sandbox, JSON Patch and PUT updates.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { EventBus } from "../platform/bus.js";
import type { MergePolicy } from "../stores/records.js";
import {
  DefaultMergePolicyRequiredError,
  EdgePolicyConflictError,
  MergePolicyInUseError,
  type MergePolicyListQuery,
  type MetadataStore,
  type Page,
} from "../stores/types.js";
import { ApiError, ErrorCodes, badRequest, notFound } from "./errors.js";
import { applyPatch, JsonPatchError, type JsonValue, type PatchOperation } from "./json-patch.js";
import { scopeOf, type TenantContext } from "./tenancy.js";

export const PROFILE_SCHEMA_CLASS = "_xdm.context.profile";

export interface MergePolicyInput {
  name?: string;
  schema: { name: string };
  identityGraph: { type: string };
  attributeMerge: { type: string; order?: string[] };
  isActiveOnEdge?: boolean;
  default?: boolean;
  // Server-owned fields a PUT body may carry.
  id?: string;
  imsOrgId?: string;
  version?: number;
}

function validatePolicyShape(p: MergePolicyInput): void {
  const problems: string[] = [];
  if (p.identityGraph.type !== "none" && p.identityGraph.type !== "pdg") problems.push(`identityGraph.type must be "none" or "pdg" (got "${p.identityGraph.type}")`);
  const am = p.attributeMerge;
  if (am.type !== "timestampOrdered" && am.type !== "dataSetPrecedence") {
    problems.push(`attributeMerge.type must be "timestampOrdered" or "dataSetPrecedence" (got "${am.type}")`);
  } else if (am.type === "dataSetPrecedence" && (!am.order || am.order.length === 0)) {
    problems.push("attributeMerge.order (the dataset ids in precedence order) is required when attributeMerge.type is dataSetPrecedence");
  }
  if (p.schema.name.trim() === "") problems.push("schema.name must not be empty");
  if (p.name !== undefined && p.name.trim() === "") problems.push("name must not be empty");
  if (problems.length > 0) {
    throw new ApiError(400, ErrorCodes.mergePolicy, problems.join("; "), problems.map((m) => ({ code: ErrorCodes.mergePolicy, message: m })));
  }
}

/**
 * Adobe documents patch paths in a dotted form (`/identityGraph.type`) and
 * misspells one (`/idActiveOnEdge`); both are accepted next to RFC 6901 paths.
 */
function normalizePath(path: string): string {
  if (path === "/idActiveOnEdge") return "/isActiveOnEdge";
  return path.replace(/^\/(identityGraph|attributeMerge|schema)\.(type|order|name)$/, "/$1/$2");
}

/** What a tenant's write tried to do to its class's default (DefaultMergePolicyRequiredError). */
type DefaultChange = "unset" | "move" | "delete";

/** The 400 for a write that would leave a schema class without its default merge policy. */
function defaultRequiredError(ctx: TenantContext, err: DefaultMergePolicyRequiredError, change: DefaultChange): ApiError {
  const what = change === "delete" ? "it cannot be deleted" : change === "move" ? "its schema.name cannot change" : "its default cannot be set to false";
  const next = change === "unset" ? "Make another merge policy of the class the default instead; that unsets this one." : "Make another merge policy of the class the default first.";
  return badRequest(`Merge policy '${err.mergePolicyId}' is the default merge policy of schema class '${err.schemaName}' in sandbox '${ctx.sandbox.sandboxName}', ` +
    `and a schema class always keeps one default: ${what}. ${next}`, ErrorCodes.mergePolicy);
}

/** Writes of the API keep each schema class's default (a replica copying the hub's state does not check). */
const KEEP_DEFAULT = { keepDefault: true } as const;

const PATCHABLE_ROOTS = new Set(["name", "identityGraph", "attributeMerge", "schema", "default", "isActiveOnEdge", "version"]);

export class MergePolicyService {
  constructor(
    private readonly store: MetadataStore,
    private readonly clock: Clock,
    private readonly bus: EventBus,
  ) {}

  private translate(err: unknown, ctx: TenantContext): never {
    if (err instanceof EdgePolicyConflictError) {
      throw new ApiError(400, ErrorCodes.mergePolicyConflict,
        `Only one merge policy per sandbox can be active on edge; '${err.activeId}' already is in sandbox '${ctx.sandbox.sandboxName}'. Set its isActiveOnEdge to false first.`);
    }
    throw err;
  }

  private toPolicy(ctx: TenantContext, input: MergePolicyInput, id: string, version: number): MergePolicy {
    validatePolicyShape(input);
    const am = input.attributeMerge as MergePolicy["attributeMerge"];
    return {
      id,
      name: input.name ?? `merge policy ${id}`,
      imsOrgId: ctx.orgId,
      sandbox: ctx.sandbox,
      schema: { name: input.schema.name },
      version,
      identityGraph: { type: input.identityGraph.type as MergePolicy["identityGraph"]["type"] },
      attributeMerge: am.type === "dataSetPrecedence" ? { type: am.type, order: [...(am.order ?? [])] } : { type: am.type },
      isActiveOnEdge: input.isActiveOnEdge ?? false,
      default: input.default ?? false,
      updateEpoch: Math.floor(this.clock.now() / 1000),
    };
  }

  async create(ctx: TenantContext, input: MergePolicyInput): Promise<MergePolicy> {
    const policy = this.toPolicy(ctx, input, randomUUID(), 1);
    try {
      await this.store.mergePolicies.insert(scopeOf(ctx), { policy, creationTime: this.clock.now() });
    } catch (err) {
      this.translate(err, ctx);
    }
    this.bus.publish("mergePolicy.changed", { tenant: scopeOf(ctx), change: "created", mergePolicyId: policy.id });
    return policy;
  }

  async get(ctx: TenantContext, id: string): Promise<MergePolicy> {
    const rec = await this.store.mergePolicies.get(scopeOf(ctx), id);
    if (!rec) throw notFound("Merge policy", id);
    return rec.policy;
  }

  private async save(ctx: TenantContext, id: string, input: MergePolicyInput): Promise<MergePolicy> {
    const scope = scopeOf(ctx);
    const existing = await this.store.mergePolicies.get(scope, id);
    if (!existing) throw notFound("Merge policy", id);
    if (input.id !== undefined && input.id !== id) throw new ApiError(400, ErrorCodes.immutable, "id is immutable");
    if (input.imsOrgId !== undefined && input.imsOrgId !== ctx.orgId) throw new ApiError(400, ErrorCodes.immutable, "imsOrgId is immutable");
    const policy = this.toPolicy(ctx, input, id, existing.policy.version + 1);
    let ok: boolean;
    try {
      ok = await this.store.mergePolicies.update(scope, { policy, creationTime: existing.creationTime }, KEEP_DEFAULT);
    } catch (err) {
      if (err instanceof DefaultMergePolicyRequiredError) throw defaultRequiredError(ctx, err, policy.default ? "move" : "unset");
      this.translate(err, ctx);
    }
    if (!ok) throw notFound("Merge policy", id);
    this.bus.publish("mergePolicy.changed", { tenant: scope, change: "updated", mergePolicyId: id, previous: existing.policy });
    return policy;
  }

  /** PUT: full overwrite. */
  async replace(ctx: TenantContext, id: string, input: MergePolicyInput): Promise<MergePolicy> {
    return this.save(ctx, id, input);
  }

  /** PATCH: RFC 6902 JSON Patch (a single operation object is accepted too, as Adobe's guide sends one). */
  async patch(ctx: TenantContext, id: string, ops: PatchOperation[]): Promise<MergePolicy> {
    const current = await this.get(ctx, id);
    const normalized = ops.map((op) => ({ ...op, path: normalizePath(op.path), ...(op.from !== undefined ? { from: normalizePath(op.from) } : {}) }));
    for (const [i, op] of normalized.entries()) {
      for (const p of [op.path, op.from]) {
        if (p === undefined) continue;
        const root = p.split("/")[1] ?? "";
        if (!PATCHABLE_ROOTS.has(root)) throw badRequest(`operation ${i}: path "${p}" cannot be patched (allowed: ${[...PATCHABLE_ROOTS].map((r) => "/" + r).join(", ")})`, ErrorCodes.mergePolicy);
      }
    }
    let patched: JsonValue;
    try {
      patched = applyPatch(current as unknown as JsonValue, normalized);
    } catch (err) {
      if (err instanceof JsonPatchError) throw badRequest(`JSON Patch failed: ${err.message}`, ErrorCodes.mergePolicy);
      throw err;
    }
    const p = patched as unknown as Record<string, unknown>;
    const shape = (v: unknown, key: string): Record<string, unknown> => {
      if (typeof v !== "object" || v === null || Array.isArray(v)) throw badRequest(`${key} must be an object after the patch`, ErrorCodes.mergePolicy);
      return v as Record<string, unknown>;
    };
    const str = (v: unknown, key: string): string => {
      if (typeof v !== "string") throw badRequest(`${key} must be a string after the patch`, ErrorCodes.mergePolicy);
      return v;
    };
    const bool = (v: unknown, key: string): boolean => {
      if (typeof v !== "boolean") throw badRequest(`${key} must be a boolean after the patch`, ErrorCodes.mergePolicy);
      return v;
    };
    const am = shape(p.attributeMerge, "attributeMerge");
    const order = am.order;
    if (order !== undefined && (!Array.isArray(order) || !order.every((x) => typeof x === "string"))) {
      throw badRequest("attributeMerge.order must be an array of strings after the patch", ErrorCodes.mergePolicy);
    }
    return this.save(ctx, id, {
      name: str(p.name, "name"),
      schema: { name: str(shape(p.schema, "schema").name, "schema.name") },
      identityGraph: { type: str(shape(p.identityGraph, "identityGraph").type, "identityGraph.type") },
      attributeMerge: { type: str(am.type, "attributeMerge.type"), ...(order !== undefined ? { order: order as string[] } : {}) },
      isActiveOnEdge: bool(p.isActiveOnEdge, "isActiveOnEdge"),
      default: bool(p.default, "default"),
    });
  }

  async delete(ctx: TenantContext, id: string): Promise<void> {
    const current = await this.get(ctx, id);
    if (current.isActiveOnEdge) {
      throw badRequest(`Merge policy '${id}' is active on edge and cannot be deleted; set isActiveOnEdge to false first`, ErrorCodes.mergePolicy);
    }
    try {
      const ok = await this.store.mergePolicies.delete(scopeOf(ctx), id, KEEP_DEFAULT);
      if (!ok) throw notFound("Merge policy", id);
    } catch (err) {
      if (err instanceof DefaultMergePolicyRequiredError) throw defaultRequiredError(ctx, err, "delete");
      if (err instanceof MergePolicyInUseError) {
        throw badRequest(`Merge policy '${id}' is used by ${err.total} segment definition(s) (${err.definitionIds.map((d) => `'${d}'`).join(", ")}${err.total > err.definitionIds.length ? ", ..." : ""}) and cannot be deleted`, ErrorCodes.mergePolicy);
      }
      throw err;
    }
    this.bus.publish("mergePolicy.changed", { tenant: scopeOf(ctx), change: "deleted", mergePolicyId: id });
  }

  async list(ctx: TenantContext, query: MergePolicyListQuery): Promise<Page<MergePolicy>> {
    const page = await this.store.mergePolicies.list(scopeOf(ctx), query);
    return { total: page.total, items: page.items.map((r) => r.policy) };
  }

  async bulkGet(ctx: TenantContext, ids: string[]): Promise<{ found: Map<string, MergePolicy>; missing: string[] }> {
    const unique = [...new Set(ids)];
    const recs = await this.store.mergePolicies.getMany(scopeOf(ctx), unique);
    const found = new Map([...recs].map(([id, r]) => [id, r.policy]));
    return { found, missing: unique.filter((id) => !found.has(id)) };
  }

  /**
   * Give a sandbox without any merge policy a default one (timestamp-ordered,
   * private identity graph, active on edge) so that definitions can be created
   * at once. Run at start for every configured sandbox.
   */
  async ensureDefault(ctx: TenantContext): Promise<void> {
    if ((await this.store.mergePolicies.count(scopeOf(ctx))) > 0) return;
    try {
      await this.create(ctx, {
        name: "Default Timebased",
        schema: { name: PROFILE_SCHEMA_CLASS },
        identityGraph: { type: "pdg" },
        attributeMerge: { type: "timestampOrdered" },
        isActiveOnEdge: true,
        default: true,
      });
    } catch (err) {
      // Another server sharing the database created it first.
      if (err instanceof ApiError && err.code === ErrorCodes.mergePolicyConflict) return;
      throw err;
    }
  }
}
