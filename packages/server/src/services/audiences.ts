/**
 * The Audiences API (segmentation-api.md §3.1) over the same records as the
 * definitions API: a Platform audience IS a segment definition (audienceId =
 * id, writes go through DefinitionService, so the engines see them), and an
 * external audience ("custom upload" and other origins) is metadata whose
 * members are set by ingestion, never evaluated.
 */
import { randomUUID } from "node:crypto";
import { isPublished, type ExternalAudience, type LifecycleState, type SegmentDefinition } from "../stores/records.js";
import { DuplicateAudienceError, type MetadataStore, type TenantScope } from "../stores/types.js";
import {
  LIFECYCLE_STATES, PLATFORM_NAMESPACE, PLATFORM_ORIGIN, externalAudience, platformAudience, selectAudiences,
  type Audience, type AudienceListQuery,
} from "./audience-view.js";
import type { DefinitionInput, DefinitionService } from "./definitions.js";
import { ApiError, ErrorCodes } from "./errors.js";
import { applyPatch, JsonPatchError, type JsonValue, type PatchOperation } from "./json-patch.js";
import { analyzeExpression, type ExpressionInput } from "./definition-analysis.js";
import { scopeOf, type TenantContext } from "./tenancy.js";
import type { TenantRef } from "../platform/tenant.js";
import type { Clock } from "../platform/clock.js";

/** Adobe's origins of external audiences. */
export const EXTERNAL_ORIGINS = ["CUSTOM_UPLOAD", "AUDIENCE_ORCHESTRATION", "AUDIENCE_MANAGER", "AUDIENCE_MATCH"] as const;
export const CUSTOM_UPLOAD_NAMESPACE = "CustomerAudienceUpload";
/** External audiences per sandbox. */
export const MAX_EXTERNAL_AUDIENCES = 4000;
const PAGE = 1000;

/** The fields a create, PUT or patched body may carry (Platform and external alike). */
export interface AudienceBody {
  name?: string;
  description?: string;
  type?: string;
  expression?: ExpressionInput;
  schema?: { name: string };
  labels?: string[];
  lifecycleState?: string;
  profileInstanceId?: string;
  mergePolicyId?: string;
  evaluationInfo?: DefinitionInput["evaluationInfo"];
  dataGovernancePolicy?: { excludeOptOut?: boolean };
  ttlInDays?: number | string;
  audienceId?: string;
  namespace?: string;
  originName?: string;
  datasetId?: string;
  sourceId?: string;
  linkedAudienceRef?: Record<string, string>;
  audienceMeta?: Record<string, unknown>;
}

/** Whether the catalog has the dataset in this sandbox (absent: the process serves no catalog, nothing to check against). */
export type DatasetLookup = (scope: TenantRef, id: string) => Promise<boolean>;

function invalid(message: string): ApiError {
  return new ApiError(400, ErrorCodes.audienceValidation, `There is a problem in audience validation. ${message}`);
}

function audienceNotFound(id: string): ApiError {
  return new ApiError(404, ErrorCodes.audienceNotFound, `The audience entity ${id} is not found. Use a valid entity and try again.`);
}

function isExternalBody(b: AudienceBody): boolean {
  if (b.type === "ExternalSegment" || b.type === "ExternalAudience") return true;
  if (b.type !== undefined && b.type !== "SegmentDefinition") throw invalid(`type must be SegmentDefinition or ExternalSegment, not ${JSON.stringify(b.type.slice(0, 64))}.`);
  return b.originName !== undefined && b.originName !== PLATFORM_ORIGIN;
}

/** The requested state, checked against the previous one (Adobe's lifecycle rules). */
function nextState(requested: string | undefined, previous: LifecycleState | undefined, deletedMessage: string): LifecycleState | undefined {
  if (requested === undefined) return undefined;
  if (requested === "deleted") throw invalid(deletedMessage);
  if (!(LIFECYCLE_STATES as readonly string[]).includes(requested)) {
    throw invalid(`lifecycleState must be one of ${LIFECYCLE_STATES.join(", ")}, not ${JSON.stringify(requested.slice(0, 64))}.`);
  }
  const next = requested as LifecycleState;
  if (next === "draft" && previous !== undefined && previous !== "draft") throw invalid(`A ${previous} audience cannot return to draft.`);
  return next;
}

export class AudienceService {
  constructor(
    private readonly store: MetadataStore,
    private readonly definitions: DefinitionService,
    private readonly clock: Clock,
    private readonly datasetExists?: DatasetLookup,
  ) {}

  /** Every definition of the sandbox; `pause` (with pages of `size`) lets a caller yield the event loop between pages. */
  private async allDefinitions(scope: TenantScope, pause?: () => Promise<void>, size = PAGE): Promise<{ definition: SegmentDefinition; references: string[] }[]> {
    const out: { definition: SegmentDefinition; references: string[] }[] = [];
    for (let offset = 0; ; offset += size) {
      if (offset > 0) await pause?.();
      const page = await this.store.definitions.list(scope, { filters: {}, sort: [{ field: "creationTime", direction: "asc" }], offset, limit: size });
      out.push(...page.items);
      if (page.items.length < size) return out;
    }
  }

  async list(ctx: TenantContext, q: AudienceListQuery): Promise<{ items: Audience[]; total: number }> {
    const scope = scopeOf(ctx);
    const [defs, external] = await Promise.all([this.allDefinitions(scope), this.store.externalAudiences.list(scope)]);
    const dependents = new Map<string, string[]>();
    for (const d of defs) for (const r of d.references) (dependents.get(r) ?? dependents.set(r, []).get(r)!).push(d.definition.id);
    const all = [
      ...defs.map((d) => platformAudience(d.definition, d.references, dependents.get(d.definition.id) ?? [])),
      ...external.map(externalAudience),
    ];
    return selectAudiences(all, q);
  }

  /**
   * Every audience's id, namespace, name and description (segment search's objects). With
   * `pause`, definitions are read 25 at a time and `pause` awaited between pages: a large
   * sandbox's read (8 KB descriptions) never holds the event loop at once.
   */
  async summaries(ctx: TenantContext, pause?: () => Promise<void>): Promise<{ id: string; namespace: string; name: string; description: string }[]> {
    const scope = scopeOf(ctx);
    const [defs, external] = await Promise.all([this.allDefinitions(scope, pause, pause === undefined ? PAGE : 25), this.store.externalAudiences.list(scope)]);
    return [
      ...defs.map(({ definition: d }) => ({ id: d.id, namespace: PLATFORM_NAMESPACE, name: d.name, description: d.description ?? "" })),
      ...external.map((e) => ({ id: e.id, namespace: e.namespace, name: e.name, description: e.description ?? "" })),
    ];
  }

  /** The namespace of the audience with this id (segment search's taxonomy), undefined when there is none. */
  async namespaceOf(ctx: TenantContext, id: string): Promise<string | undefined> {
    const scope = scopeOf(ctx);
    if (await this.store.definitions.get(scope, id)) return PLATFORM_NAMESPACE;
    return (await this.store.externalAudiences.get(scope, id))?.namespace;
  }

  private async platform(scope: TenantScope, id: string): Promise<Audience | undefined> {
    const rec = await this.store.definitions.get(scope, id);
    if (!rec) return undefined;
    return platformAudience(rec.definition, rec.references, await this.store.definitions.dependents(scope, id));
  }

  async get(ctx: TenantContext, id: string): Promise<Audience> {
    const scope = scopeOf(ctx);
    const found = (await this.platform(scope, id)) ?? (await this.externalOf(scope, id).then((a) => a && externalAudience(a)));
    if (!found) throw audienceNotFound(id);
    return found;
  }

  private async externalOf(scope: TenantScope, id: string): Promise<ExternalAudience | undefined> {
    return this.store.externalAudiences.get(scope, id);
  }

  async bulkGet(ctx: TenantContext, ids: readonly string[]): Promise<Map<string, Audience>> {
    const scope = scopeOf(ctx);
    const unique = [...new Set(ids)];
    const [defs, external] = await Promise.all([this.store.definitions.getMany(scope, unique), this.store.externalAudiences.getMany(scope, unique)]);
    const out = new Map<string, Audience>();
    for (const [id, rec] of defs) out.set(id, platformAudience(rec.definition, rec.references, await this.store.definitions.dependents(scope, id)));
    for (const [id, a] of external) out.set(id, externalAudience(a));
    return out;
  }

  async create(ctx: TenantContext, body: AudienceBody, actor: string | undefined): Promise<Audience> {
    if (isExternalBody(body)) return externalAudience(await this.createExternal(ctx, body, actor));
    const state = nextState(body.lifecycleState, undefined, "Cannot set lifecycleState as deleted");
    if (body.namespace !== undefined && body.namespace !== PLATFORM_NAMESPACE) throw invalid(`The namespace of a Platform audience is ${PLATFORM_NAMESPACE}.`);
    if (body.audienceId !== undefined) throw invalid("audienceId is assigned by the server for a Platform audience (it is the id).");
    const input = this.definitionInput(body, undefined);
    await this.checkParents(ctx, input.expression, state ?? "published", undefined);
    const d = await this.definitions.create(ctx, input, {
      ...(state ? { lifecycleState: state } : {}), ...(body.labels ? { labels: body.labels } : {}), ...(actor ? { createdBy: actor } : {}),
    });
    return (await this.platform(scopeOf(ctx), d.id)) ?? platformAudience(d, [], []);
  }

  /** PUT: the body replaces the audience; PATCH applies its operations to the audience and then does the same. */
  async replace(ctx: TenantContext, id: string, body: AudienceBody, actor: string | undefined, how: "put" | "patch"): Promise<Audience> {
    const scope = scopeOf(ctx);
    const deletedMessage = how === "patch" ? "lifecycle field can not be modified to Delete using Patch operation" : "Cannot set lifecycleState as deleted";
    const rec = await this.store.definitions.get(scope, id);
    if (!rec) {
      const ext = await this.externalOf(scope, id);
      if (!ext) throw audienceNotFound(id);
      return externalAudience(await this.replaceExternal(ctx, ext, body, actor, deletedMessage));
    }
    if (body.namespace !== undefined && body.namespace !== PLATFORM_NAMESPACE) throw invalid("Namespace is immutable field.");
    if (body.audienceId !== undefined && body.audienceId !== id) throw invalid("audienceId is immutable field.");
    if (body.type !== undefined && body.type !== "SegmentDefinition") throw invalid("type is immutable field.");
    const previous = rec.definition.audience?.lifecycleState ?? "published";
    const state = nextState(body.lifecycleState, previous, deletedMessage) ?? previous;
    const input = this.definitionInput(body, rec.definition);
    await this.checkParents(ctx, input.expression, state, id);
    if (state === "inactive" || state === "archived") await this.checkNoPublishedDependents(scope, id, state);
    const d = await this.definitions.overwrite(ctx, id, input, {
      lifecycleState: state, labels: body.labels ?? [], ...(actor ? { lastModifiedBy: actor } : {}),
    });
    return (await this.platform(scope, id)) ?? platformAudience(d, [], []);
  }

  async patch(ctx: TenantContext, id: string, ops: readonly PatchOperation[], actor: string | undefined): Promise<Audience> {
    const current = await this.get(ctx, id);
    let patched: JsonValue;
    try {
      patched = applyPatch(current as unknown as JsonValue, ops);
    } catch (err) {
      if (err instanceof JsonPatchError) throw invalid(`JSON Patch failed: ${err.message}.`);
      throw err;
    }
    if (patched === null || typeof patched !== "object" || Array.isArray(patched)) throw invalid("The patched audience must be an object.");
    return this.replace(ctx, id, patched as AudienceBody, actor, "patch");
  }

  async delete(ctx: TenantContext, id: string): Promise<void> {
    const scope = scopeOf(ctx);
    if (await this.store.definitions.get(scope, id)) {
      try {
        await this.definitions.delete(ctx, id);
      } catch (err) {
        if (err instanceof ApiError && err.code === ErrorCodes.hasDependents) {
          throw new ApiError(400, ErrorCodes.hasDependents, "The audience cannot be deleted.", err.items);
        }
        throw err;
      }
      return;
    }
    if (!(await this.store.externalAudiences.delete(scope, id))) throw audienceNotFound(id);
  }

  private definitionInput(body: AudienceBody, previous: SegmentDefinition | undefined): DefinitionInput {
    if (typeof body.name !== "string" || body.name.trim() === "") throw invalid("name is a mandatory field.");
    if (body.expression === undefined) throw invalid("expression is a mandatory field of a Platform audience.");
    return {
      name: body.name,
      ...(body.description !== undefined ? { description: body.description } : {}),
      schema: body.schema ?? previous?.schema ?? { name: "_xdm.context.profile" },
      expression: body.expression,
      ...(body.evaluationInfo ?? previous?.evaluationInfo ? { evaluationInfo: body.evaluationInfo ?? previous!.evaluationInfo } : {}),
      ...(body.mergePolicyId ?? previous?.mergePolicyId ? { mergePolicyId: body.mergePolicyId ?? previous!.mergePolicyId } : {}),
      ...(body.profileInstanceId !== undefined ? { profileInstanceId: body.profileInstanceId } : {}),
      ...(body.ttlInDays !== undefined ? { ttlInDays: ttlOf(body.ttlInDays) } : {}),
      ...(body.dataGovernancePolicy ?? previous?.dataGovernancePolicy ? { dataGovernancePolicy: body.dataGovernancePolicy ?? previous!.dataGovernancePolicy } : {}),
    };
  }

  /** Publishing needs every referenced (parent) audience published (Adobe's lifecycle FAQ). */
  private async checkParents(ctx: TenantContext, expression: ExpressionInput, state: LifecycleState, selfId: string | undefined): Promise<void> {
    if (state !== "published") return;
    // Invalid PQL fails here with the same errors the definition's write would give.
    const { references } = await analyzeExpression(this.store.definitions, scopeOf(ctx), expression, ctx.limits, selfId);
    const refs = references.filter((r) => r !== selfId);
    if (refs.length === 0) return;
    const parents = await this.store.definitions.getMany(scopeOf(ctx), refs);
    const unpublished = [...parents.values()].filter((p) => !isPublished(p.definition)).map((p) => p.definition.id);
    if (unpublished.length > 0) throw invalid(`A published audience cannot reference audiences that are not published: ${unpublished.join(", ")}.`);
  }

  private async checkNoPublishedDependents(scope: TenantScope, id: string, state: LifecycleState): Promise<void> {
    const deps = await this.store.definitions.getMany(scope, await this.store.definitions.dependents(scope, id));
    const published = [...deps.values()].filter((d) => isPublished(d.definition)).map((d) => d.definition.id);
    if (published.length > 0) throw invalid(`The audience cannot become ${state} while published audiences depend on it: ${published.join(", ")}.`);
  }

  private async checkDataset(ctx: TenantContext, datasetId: string | undefined): Promise<void> {
    if (datasetId === undefined || this.datasetExists === undefined) return;
    if (!(await this.datasetExists(scopeOf(ctx), datasetId))) {
      throw new ApiError(400, ErrorCodes.audienceDataset, `Dataset ${datasetId} cannot be retrieved from Catalog: it does not exist in sandbox '${ctx.sandbox.sandboxName}'.`);
    }
  }

  private async createExternal(ctx: TenantContext, body: AudienceBody, actor: string | undefined): Promise<ExternalAudience> {
    if (typeof body.name !== "string" || body.name.trim() === "") throw invalid("name is a mandatory field.");
    if (body.expression !== undefined) throw invalid("An external audience has no expression: its members are set by ingestion.");
    const origin = body.originName ?? "CUSTOM_UPLOAD";
    if (!(EXTERNAL_ORIGINS as readonly string[]).includes(origin)) throw invalid(`originName must be one of ${EXTERNAL_ORIGINS.join(", ")} for an external audience.`);
    const namespace = body.namespace ?? (origin === "CUSTOM_UPLOAD" ? CUSTOM_UPLOAD_NAMESPACE : undefined);
    if (namespace === undefined) throw invalid("namespace is a mandatory field of an external audience.");
    if (namespace === PLATFORM_NAMESPACE) throw invalid(`The namespace ${PLATFORM_NAMESPACE} is reserved for Platform audiences.`);
    // Adobe: externally created audiences are published immediately.
    const state = nextState(body.lifecycleState, undefined, "Cannot set lifecycleState as deleted") ?? "published";
    await this.checkDataset(ctx, body.datasetId);
    const scope = scopeOf(ctx);
    if ((await this.store.externalAudiences.count(scope)) >= MAX_EXTERNAL_AUDIENCES) {
      throw new ApiError(400, ErrorCodes.limit, `Sandbox '${ctx.sandbox.sandboxName}' already has the maximum of ${MAX_EXTERNAL_AUDIENCES} external audiences`);
    }
    const now = this.clock.now();
    const id = randomUUID();
    const record: ExternalAudience = {
      id, audienceId: body.audienceId ?? id, namespace, name: body.name, imsOrgId: ctx.orgId, sandbox: ctx.sandbox,
      type: "ExternalSegment", originName: origin, lifecycleState: state, labels: body.labels ?? [],
      ...externalOptionals(body),
      ...(actor !== undefined ? { createdBy: actor } : {}),
      creationTime: now, updateTime: now, updateEpoch: Math.floor(now / 1000),
    };
    try {
      await this.store.externalAudiences.insert(scope, record);
    } catch (err) {
      if (err instanceof DuplicateAudienceError) {
        throw new ApiError(409, ErrorCodes.audienceDuplicate, `An audience with namespace ${err.namespace} and audienceId ${err.audienceId} already exists in sandbox '${ctx.sandbox.sandboxName}'.`);
      }
      throw err;
    }
    return record;
  }

  private async replaceExternal(ctx: TenantContext, ext: ExternalAudience, body: AudienceBody, actor: string | undefined, deletedMessage: string): Promise<ExternalAudience> {
    if (typeof body.name !== "string" || body.name.trim() === "") throw invalid("name is a mandatory field.");
    if (body.namespace !== undefined && body.namespace !== ext.namespace) throw invalid("Namespace is immutable field.");
    if (body.audienceId !== undefined && body.audienceId !== ext.audienceId) throw invalid("audienceId is immutable field.");
    if (body.originName !== undefined && body.originName !== ext.originName) throw invalid("originName is immutable field.");
    if (body.expression !== undefined) throw invalid("An external audience has no expression: its members are set by ingestion.");
    const state = nextState(body.lifecycleState, ext.lifecycleState, deletedMessage) ?? ext.lifecycleState;
    await this.checkDataset(ctx, body.datasetId);
    const now = this.clock.now();
    const record: ExternalAudience = {
      id: ext.id, audienceId: ext.audienceId, namespace: ext.namespace, name: body.name, imsOrgId: ext.imsOrgId, sandbox: ext.sandbox,
      type: "ExternalSegment", originName: ext.originName, lifecycleState: state, labels: body.labels ?? [],
      ...externalOptionals(body),
      ...(ext.createdBy !== undefined ? { createdBy: ext.createdBy } : {}),
      ...(actor !== undefined ? { lastModifiedBy: actor } : {}),
      creationTime: ext.creationTime, updateTime: now, updateEpoch: Math.floor(now / 1000),
    };
    if (!(await this.store.externalAudiences.update(scopeOf(ctx), record))) throw audienceNotFound(ext.id);
    return record;
  }
}

function externalOptionals(body: AudienceBody): Partial<ExternalAudience> {
  return {
    ...(body.description !== undefined ? { description: body.description } : {}),
    ...(body.datasetId !== undefined ? { datasetId: body.datasetId } : {}),
    ...(body.sourceId !== undefined ? { sourceId: body.sourceId } : {}),
    ...(body.linkedAudienceRef !== undefined ? { linkedAudienceRef: body.linkedAudienceRef } : {}),
    ...(body.audienceMeta !== undefined ? { audienceMeta: body.audienceMeta } : {}),
    ...(body.ttlInDays !== undefined ? { ttlInDays: ttlOf(body.ttlInDays) } : {}),
  };
}

/** ttlInDays as a number (the route admits 1–3650 or the same as a string of digits). */
function ttlOf(v: number | string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 3650) throw invalid("ttlInDays must be a whole number of days from 1 to 3650.");
  return n;
}
