/**
 * Segment definitions: validation, classification and eligibility
 * (decisions.md §1), limits, and the AEP field rules (segmentation-api.md §2).
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { EventBus } from "../platform/bus.js";
import type { AudienceMeta, ClassificationInfo, EvaluationInfo, MergePolicy, SegmentDefinition } from "../stores/records.js";
import {
  DuplicateNameError,
  HasDependentsError,
  LimitExceededError,
  type DefinitionListQuery,
  type MetadataStore,
  type Page,
} from "../stores/types.js";
import { ApiError, ErrorCodes, badRequest, notFound, type ErrorItem } from "./errors.js";
import { analyzeExpression, diagnosticItems, expressionText, type Analysis, type ExpressionInput } from "./definition-analysis.js";
import { canonicalText, parsePql, pqlErrors, queryToPqlJson, type Query } from "./pql.js";
import { scopeOf, type TenantContext } from "./tenancy.js";

export interface EvaluationInfoInput {
  batch?: { enabled?: boolean };
  continuous?: { enabled?: boolean };
  synchronous?: { enabled?: boolean };
}

/** The create body (CreateSegmentDefinition) and the PATCH body (a whole SegmentDefinition). */
export interface DefinitionInput {
  name: string;
  description?: string;
  schema: { name: string };
  expression: ExpressionInput;
  evaluationInfo?: EvaluationInfoInput;
  mergePolicyId?: string;
  profileInstanceId?: string;
  payloadSchema?: string;
  ttlInDays?: number;
  dataGovernancePolicy?: { excludeOptOut?: boolean };
  // Server-owned fields a PATCH body may carry (AEP samples resend them).
  id?: string;
  imsOrgId?: string;
  sandbox?: { sandboxId?: string; sandboxName?: string };
  creationTime?: number;
  updateTime?: number;
  updateEpoch?: number;
}

export interface EligibilityResult {
  valid: boolean;
  diagnostics: ErrorItem[];
  classification: ClassificationInfo | null;
  mergePolicy: { id: string; isActiveOnEdge: boolean } | null;
  eligible: { batch: boolean; continuous: boolean; synchronous: boolean };
  reasons: { continuous: string[]; synchronous: string[] };
}

export const DEFAULT_PROFILE_INSTANCE_ID = "ups";

/** What a write says of the audience view: fields left out keep their previous values (a new definition is published, unlabelled). */
export type AudienceInput = Partial<AudienceMeta>;

function audienceOf(input: AudienceInput, previous: AudienceMeta | undefined): AudienceMeta {
  const createdBy = previous ? previous.createdBy : input.createdBy;
  const lastModifiedBy = input.lastModifiedBy ?? previous?.lastModifiedBy;
  return {
    lifecycleState: input.lifecycleState ?? previous?.lifecycleState ?? "published",
    labels: input.labels ?? previous?.labels ?? [],
    ...(createdBy !== undefined ? { createdBy } : {}),
    ...(lastModifiedBy !== undefined ? { lastModifiedBy } : {}),
  };
}

/** The evaluation methods a write asks for, as it is stored (impact reports them the same way). */
export function evaluationInfoOf(input: EvaluationInfoInput | undefined): EvaluationInfo {
  // A missing evaluationInfo means batch only (decisions.md §1).
  if (!input) return { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } };
  return {
    batch: { enabled: input.batch?.enabled ?? false },
    continuous: { enabled: input.continuous?.enabled ?? false },
    synchronous: { enabled: input.synchronous?.enabled ?? false },
  };
}

function validateName(name: string): string {
  if (name.trim() === "") throw badRequest("name must not be empty", ErrorCodes.badJson);
  return name;
}

/** Why a requested method is refused, per method; empty lists mean allowed. */
function methodReasons(a: Analysis["classification"], policy: MergePolicy): { continuous: string[]; synchronous: string[] } {
  const synchronous = a.synchronous ? [] : a.reasons.length > 0 ? [...a.reasons] : ["the expression is not eligible for edge evaluation"];
  if (!policy.isActiveOnEdge) {
    synchronous.push(`merge policy '${policy.id}' is not active on edge; edge evaluation needs the sandbox's active-on-edge merge policy`);
  }
  const continuous = a.continuous ? [] : a.reasons.length > 0 ? [...a.reasons] : ["the expression is not eligible for streaming evaluation"];
  return { continuous, synchronous };
}

export class DefinitionService {
  constructor(
    private readonly store: MetadataStore,
    private readonly clock: Clock,
    private readonly bus: EventBus,
    /** Rewrites paths that stand for stored things (computed attributes) before analysis; none by default. */
    private readonly expand?: (ctx: TenantContext, query: Query) => Promise<Query>,
  ) {}

  private expanderFor(ctx: TenantContext): ((query: Query) => Promise<Query>) | undefined {
    const expand = this.expand;
    return expand === undefined ? undefined : (query) => expand(ctx, query);
  }

  private async mergePolicyFor(ctx: TenantContext, schemaName: string, requested: string | undefined): Promise<MergePolicy> {
    const scope = scopeOf(ctx);
    if (requested !== undefined) {
      const p = await this.store.mergePolicies.get(scope, requested);
      if (!p) throw badRequest(`merge policy '${requested}' does not exist in sandbox '${ctx.sandbox.sandboxName}'`, ErrorCodes.mergePolicy);
      return p.policy;
    }
    const d = await this.store.mergePolicies.getDefault(scope, schemaName);
    if (!d) {
      throw badRequest(`sandbox '${ctx.sandbox.sandboxName}' has no default merge policy for schema class '${schemaName}'; create one or pass mergePolicyId`, ErrorCodes.mergePolicy);
    }
    return d.policy;
  }

  private async build(ctx: TenantContext, input: DefinitionInput, previous: SegmentDefinition | undefined, audience: AudienceInput): Promise<{ definition: SegmentDefinition; analysis: Analysis }> {
    const name = validateName(input.name);
    if (input.schema.name.trim() === "") throw badRequest("schema.name must not be empty", ErrorCodes.badJson);
    const selfId = previous?.id;
    const analysis = await analyzeExpression(this.store.definitions, scopeOf(ctx), input.expression, ctx.limits, selfId, this.expanderFor(ctx));
    const policy = await this.mergePolicyFor(ctx, input.schema.name, input.mergePolicyId ?? previous?.mergePolicyId);
    const evaluationInfo = evaluationInfoOf(input.evaluationInfo);
    const reasons = methodReasons(analysis.classification, policy);
    const refused: ErrorItem[] = [];
    if (evaluationInfo.synchronous.enabled) {
      for (const r of reasons.synchronous) refused.push({ code: ErrorCodes.ineligible, message: `edge (synchronous): ${r}`, method: "synchronous" });
    }
    if (evaluationInfo.continuous.enabled) {
      for (const r of reasons.continuous) refused.push({ code: ErrorCodes.ineligible, message: `streaming (continuous): ${r}`, method: "continuous" });
    }
    if (refused.length > 0) {
      throw new ApiError(400, ErrorCodes.ineligible, "The definition is not eligible for the requested evaluation method(s)", refused);
    }
    const now = this.clock.now();
    const definition: SegmentDefinition = {
      id: previous?.id ?? randomUUID(),
      imsOrgId: ctx.orgId,
      sandbox: ctx.sandbox,
      name,
      ...(input.description !== undefined ? { description: input.description } : {}),
      profileInstanceId: input.profileInstanceId ?? previous?.profileInstanceId ?? DEFAULT_PROFILE_INSTANCE_ID,
      schema: { name: input.schema.name },
      expression: analysis.expression,
      mergePolicyId: policy.id,
      evaluationInfo,
      dataGovernancePolicy: { excludeOptOut: input.dataGovernancePolicy?.excludeOptOut ?? previous?.dataGovernancePolicy.excludeOptOut ?? true },
      ...(input.payloadSchema !== undefined ? { payloadSchema: input.payloadSchema } : {}),
      ...(input.ttlInDays !== undefined ? { ttlInDays: input.ttlInDays } : {}),
      creationTime: previous?.creationTime ?? now,
      updateEpoch: Math.floor(now / 1000),
      updateTime: now,
      classification: { ...analysis.classification, mergePolicyActiveOnEdge: policy.isActiveOnEdge },
      audience: audienceOf(audience, previous?.audience),
    };
    return { definition, analysis };
  }

  private translateStoreError(err: unknown, ctx: TenantContext): never {
    if (err instanceof DuplicateNameError) {
      throw new ApiError(422, ErrorCodes.duplicateName, `A segment definition named "${err.definitionName}" already exists in sandbox '${ctx.sandbox.sandboxName}'. To update it, use PATCH.`);
    }
    if (err instanceof LimitExceededError) {
      const what = { definitions: "segment definitions", streaming: "streaming segment definitions (edge ones included)", edge: "edge segment definitions" }[err.limit];
      throw new ApiError(400, ErrorCodes.limit, `Sandbox '${ctx.sandbox.sandboxName}' already has the maximum of ${err.max} ${what}`);
    }
    throw err;
  }

  async create(ctx: TenantContext, input: DefinitionInput, audience: AudienceInput = {}): Promise<SegmentDefinition> {
    const { definition, analysis } = await this.build(ctx, input, undefined, audience);
    try {
      await this.store.definitions.insert(scopeOf(ctx), { definition, canonicalText: analysis.text, references: analysis.references }, ctx.limits);
    } catch (err) {
      this.translateStoreError(err, ctx);
    }
    this.bus.publish("definition.changed", { tenant: scopeOf(ctx), change: "created", definitionId: definition.id });
    return definition;
  }

  async get(ctx: TenantContext, id: string): Promise<SegmentDefinition> {
    const rec = await this.store.definitions.get(scopeOf(ctx), id);
    if (!rec) throw notFound("Segment definition", id);
    return rec.definition;
  }

  /** PATCH: AEP's whole-object overwrite. Server-owned fields may be resent but not changed. */
  async overwrite(ctx: TenantContext, id: string, input: DefinitionInput, audience: AudienceInput = {}): Promise<SegmentDefinition> {
    const scope = scopeOf(ctx);
    const existing = await this.store.definitions.get(scope, id);
    if (!existing) throw notFound("Segment definition", id);
    const immutable: string[] = [];
    if (input.id !== undefined && input.id !== id) immutable.push("id");
    if (input.imsOrgId !== undefined && input.imsOrgId !== ctx.orgId) immutable.push("imsOrgId");
    if (input.sandbox?.sandboxId !== undefined && input.sandbox.sandboxId !== ctx.sandbox.sandboxId) immutable.push("sandbox.sandboxId");
    if (input.sandbox?.sandboxName !== undefined && input.sandbox.sandboxName !== ctx.sandbox.sandboxName) immutable.push("sandbox.sandboxName");
    if (immutable.length > 0) {
      throw new ApiError(400, ErrorCodes.immutable, `These fields cannot be changed: ${immutable.join(", ")}`,
        immutable.map((f) => ({ code: ErrorCodes.immutable, message: `${f} is immutable`, field: f })));
    }
    const { definition, analysis } = await this.build(ctx, input, existing.definition, audience);
    let updated: boolean;
    try {
      updated = await this.store.definitions.update(scope, { definition, canonicalText: analysis.text, references: analysis.references }, ctx.limits);
    } catch (err) {
      this.translateStoreError(err, ctx);
    }
    if (!updated) throw notFound("Segment definition", id);
    this.bus.publish("definition.changed", { tenant: scope, change: "updated", definitionId: id });
    return definition;
  }

  async delete(ctx: TenantContext, id: string): Promise<{ status: boolean; message: string }> {
    const scope = scopeOf(ctx);
    let deleted: boolean;
    try {
      deleted = await this.store.definitions.delete(scope, id);
    } catch (err) {
      if (err instanceof HasDependentsError) {
        throw new ApiError(400, ErrorCodes.hasDependents,
          `Segment definition '${id}' cannot be deleted: it is referenced through inSegment by ${err.dependents.map((d) => `'${d}'`).join(", ")}`,
          [{ code: ErrorCodes.hasDependents, message: `Segment definition '${id}' is referenced by other segment definitions`, dependents: err.dependents }]);
      }
      throw err;
    }
    if (!deleted) throw notFound("Segment definition", id);
    this.bus.publish("definition.changed", { tenant: scope, change: "deleted", definitionId: id });
    return { status: true, message: `Segment definition with id '${id}' has been deleted` };
  }

  async list(ctx: TenantContext, query: DefinitionListQuery): Promise<Page<SegmentDefinition>> {
    const page = await this.store.definitions.list(scopeOf(ctx), query);
    return { total: page.total, items: page.items.map((r) => r.definition) };
  }

  /** Found definitions and the ids that were not found, in request order. */
  async bulkGet(ctx: TenantContext, ids: string[]): Promise<{ found: Map<string, SegmentDefinition>; missing: string[] }> {
    const recs = await this.store.definitions.getMany(scopeOf(ctx), [...new Set(ids)]);
    const found = new Map([...recs].map(([id, r]) => [id, r.definition]));
    return { found, missing: [...new Set(ids)].filter((id) => !found.has(id)) };
  }

  /** POST /segment/conversion: pql/text ⇄ pql/json; nothing is stored. */
  convert(ctx: TenantContext, expr: ExpressionInput): { type: "PQL"; format: "pql/text" | "pql/json"; value: string } {
    const { text, format } = expressionText(expr, ctx.limits.expressionBytes);
    const errors = pqlErrors(text);
    if (errors.length > 0) {
      throw new ApiError(400, ErrorCodes.invalidPql, `The PQL expression is invalid (${errors.length} error${errors.length === 1 ? "" : "s"})`, diagnosticItems(errors));
    }
    const query = parsePql(text);
    return format === "pql/text"
      ? { type: "PQL", format: "pql/json", value: queryToPqlJson(query) }
      : { type: "PQL", format: "pql/text", value: canonicalText(query) };
  }

  /** POST /segment/eligibility: diagnostics, classification and merge-policy verdict without storing anything. */
  async eligibility(ctx: TenantContext, expr: ExpressionInput, mergePolicyId: string | undefined, schemaName: string): Promise<EligibilityResult> {
    let analysis: Analysis;
    try {
      analysis = await analyzeExpression(this.store.definitions, scopeOf(ctx), expr, ctx.limits, undefined, this.expanderFor(ctx));
    } catch (err) {
      // Invalid PQL is an answer here, not a failure: report the diagnostics.
      if (err instanceof ApiError && err.code === ErrorCodes.invalidPql) {
        return {
          valid: false,
          diagnostics: err.items,
          classification: null,
          mergePolicy: null,
          eligible: { batch: false, continuous: false, synchronous: false },
          reasons: { continuous: [], synchronous: [] },
        };
      }
      throw err;
    }
    const policy = await this.mergePolicyFor(ctx, schemaName, mergePolicyId);
    const reasons = methodReasons(analysis.classification, policy);
    return {
      valid: true,
      diagnostics: [],
      classification: { ...analysis.classification, mergePolicyActiveOnEdge: policy.isActiveOnEdge },
      mergePolicy: { id: policy.id, isActiveOnEdge: policy.isActiveOnEdge },
      eligible: { batch: true, continuous: reasons.continuous.length === 0, synchronous: reasons.synchronous.length === 0 },
      reasons,
    };
  }
}
