/**
 * Computed attributes (AEP's /data/core/ca/attributes): create, read, list, PATCH under AEP's
 * status rules, delete a draft. Every input is checked before anything is written, so a refused
 * request leaves the store as it was; every store call carries the caller's scope, so another
 * org's or sandbox's id reads as missing.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import { ApiError, ErrorCodes, notFound } from "../services/errors.js";
import { tenantIdOf } from "../services/schema-registry.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import {
  COMPUTED_ATTRIBUTE_STATUSES,
  ComputedAttributeLimitError,
  DURATION_UNITS,
  DuplicateComputedAttributeError,
  type AttributeEvaluation,
  type ComputedAttributeRecord,
  type ComputedAttributeRepository,
  type ComputedAttributeStatus,
  type DurationUnit,
} from "../stores/computed-attributes.js";
import type { DependentsOf } from "./dependents.js";
import { analyzeAttributeExpression } from "./expression.js";
import { COMPUTED_ERROR, DEFAULT_COMPUTED_ATTRIBUTE_LIMIT, DURATION_BOUNDS, NAME_PATTERN } from "./limits.js";
import { filterAndSort, type ListQuery } from "./list-query.js";
import type { AttributeProcessor } from "./processing.js";

export interface ExpressionBody {
  type: string;
  format: string;
  value: string;
}

export interface CreateBody {
  name: string;
  displayName: string;
  description: string;
  expression: ExpressionBody;
  duration: { count: number; unit: string };
  status: string;
  keepCurrent?: boolean;
}

export interface PatchBody {
  displayName?: string;
  description?: string;
  expression?: ExpressionBody;
  duration?: { count: number; unit: string };
  status?: string;
  keepCurrent?: boolean;
}

/** The API object (AEP's computed attribute response). */
export interface ComputedAttributeView {
  id: string;
  type: "ComputedAttribute";
  name: string;
  displayName: string;
  description: string;
  imsOrgId: string;
  sandbox: { sandboxId: string; sandboxName: string; type: string; isDefault: boolean };
  path: string;
  positionPath: string[];
  keepCurrent: boolean;
  expression: { type: "PQL"; format: "pql/text"; value: string };
  duration: { count: number; unit: DurationUnit };
  mergeFunction: { value: string };
  status: ComputedAttributeStatus;
  schema: { name: string };
  returnSchema: { "meta:xdmType": string };
  definedOn: { "meta:resourceType": string; "meta:containerId": string; $ref: string }[];
  createEpoch: number;
  updateEpoch: number;
  createdBy?: string;
  /** AEP's: when the last evaluation finished (ISO 8601, UTC); absent until the first one has. */
  lastEvaluationTs?: string;
  /** segmentd's: the first evaluation's progress and outcome (computed/processing.ts). */
  evaluation?: AttributeEvaluation;
}

export interface ComputedAttributeServiceOptions {
  newId?: () => string;
  /** Moves published attributes through PROCESSING to PROCESSED; none: they stay NEW. */
  processor?: AttributeProcessor;
  /** The saved definitions that read an attribute: disabling it is refused while there are any. */
  dependents?: DependentsOf;
}

/** The field group the values live under: `_<TENANT_ID>.ComputedAttributes.<name>` on the profile. */
export function computedAttributesPath(orgId: string): { tenantId: string; path: string; positionPath: string[] } {
  const tenantId = tenantIdOf(orgId);
  return { tenantId, path: `_${tenantId}/ComputedAttributes`, positionPath: [`_${tenantId}`, "ComputedAttributes"] };
}

function invalid(message: string): ApiError {
  return new ApiError(400, COMPUTED_ERROR.invalid, message);
}

/** Statuses that hold a value: the others (DRAFT, FAILED, DISABLED) are not usable in a definition. */
export const LIVE_STATUSES: readonly ComputedAttributeStatus[] = ["NEW", "PROCESSING", "PROCESSED"];

/** Where each status may go by PATCH (AEP's computed attributes API guide, "Update"). */
const TRANSITIONS: Record<ComputedAttributeStatus, readonly ComputedAttributeStatus[]> = {
  DRAFT: ["NEW"],
  NEW: ["DISABLED"],
  PROCESSING: ["DISABLED"],
  PROCESSED: ["DISABLED"],
  FAILED: ["DISABLED"],
  DISABLED: [],
};

/** The fields besides status that PATCH may change, per status. */
const EDITABLE: Record<ComputedAttributeStatus, readonly (keyof PatchBody)[]> = {
  DRAFT: ["displayName", "description", "expression", "duration", "keepCurrent"],
  NEW: ["displayName", "description"],
  PROCESSING: [],
  PROCESSED: [],
  FAILED: [],
  DISABLED: [],
};

/** Attempts of a PATCH whose record changed under it (the processor moved its status). */
const PATCH_ATTEMPTS = 3;

export class ComputedAttributeService {
  private readonly newId: () => string;

  constructor(
    private readonly repo: ComputedAttributeRepository,
    private readonly clock: Clock,
    private readonly options: ComputedAttributeServiceOptions = {},
  ) {
    this.newId = options.newId ?? randomUUID;
  }

  /** The processor, when this service has one (tests wait for it or hold it). */
  get processor(): AttributeProcessor | undefined {
    return this.options.processor;
  }

  render(ctx: TenantContext, r: ComputedAttributeRecord): ComputedAttributeView {
    const { path, positionPath } = computedAttributesPath(ctx.orgId);
    return {
      id: r.id,
      type: "ComputedAttribute",
      name: r.name,
      displayName: r.displayName,
      description: r.description,
      imsOrgId: ctx.orgId,
      sandbox: { sandboxId: ctx.sandbox.sandboxId, sandboxName: ctx.sandbox.sandboxName, type: ctx.sandbox.type, isDefault: ctx.sandbox.default },
      path,
      positionPath,
      keepCurrent: r.keepCurrent,
      expression: r.expression,
      duration: r.duration,
      mergeFunction: { value: r.mergeFunction },
      status: r.status,
      schema: { name: "_xdm.context.profile" },
      returnSchema: { "meta:xdmType": r.returnType },
      definedOn: [{ "meta:resourceType": "unions", "meta:containerId": "tenant", $ref: "https://ns.adobe.com/xdm/context/profile__union" }],
      createEpoch: r.createEpoch,
      updateEpoch: r.updateEpoch,
      ...(r.createdBy === undefined ? {} : { createdBy: r.createdBy }),
      ...(r.lastEvaluationTs === undefined ? {} : { lastEvaluationTs: new Date(r.lastEvaluationTs).toISOString() }),
      ...(r.evaluation === undefined ? {} : { evaluation: r.evaluation }),
    };
  }

  async create(ctx: TenantContext, body: CreateBody, actor?: string): Promise<ComputedAttributeView> {
    if (!NAME_PATTERN.test(body.name)) {
      throw invalid(`name may hold only letters and digits, a letter first, at most 100 (no spaces or underscores): got "${body.name.slice(0, 120)}"`);
    }
    if (body.status !== "DRAFT" && body.status !== "NEW") throw invalid(`status must be DRAFT or NEW when a computed attribute is created (got "${body.status.slice(0, 40)}")`);
    const duration = checkDuration(body.duration);
    const expr = checkExpression(body.expression, ctx.limits.expressionBytes);
    const now = this.clock.now();
    const record: ComputedAttributeRecord = {
      id: this.newId(),
      name: body.name,
      displayName: body.displayName,
      description: body.description,
      expression: expr.expression,
      keepCurrent: body.keepCurrent ?? false,
      duration,
      mergeFunction: expr.fn,
      returnType: expr.returnType,
      status: body.status,
      createEpoch: now,
      updateEpoch: now,
      ...(actor === undefined ? {} : { createdBy: actor }),
    };
    const limit = ctx.limits.computedAttributes ?? DEFAULT_COMPUTED_ATTRIBUTE_LIMIT;
    try {
      await this.repo.insert(scopeOf(ctx), record, limit);
    } catch (err) {
      // AEP's message for a second attribute of one name (profile.yaml, createComputedAttribute 400).
      if (err instanceof DuplicateComputedAttributeError) throw new ApiError(400, COMPUTED_ERROR.duplicate, "Function with the same name already exists for the specified schema or definedOn");
      if (err instanceof ComputedAttributeLimitError) {
        throw new ApiError(400, ErrorCodes.limit, `This sandbox has ${limit} computed attributes that are not disabled, its limit; disable or delete one first`);
      }
      throw err;
    }
    this.options.processor?.kick(ctx, record);
    return this.render(ctx, record);
  }

  async get(ctx: TenantContext, id: string): Promise<ComputedAttributeView> {
    const r = await this.load(ctx, id);
    // An evaluation interrupted by a restart starts again when the attribute is read.
    this.options.processor?.kick(ctx, r);
    return this.render(ctx, r);
  }

  async list(ctx: TenantContext, query: ListQuery): Promise<{ items: ComputedAttributeView[]; total: number }> {
    const all = await this.repo.list(scopeOf(ctx));
    for (const r of all) this.options.processor?.kick(ctx, r);
    const kept = filterAndSort(all, query);
    return { total: kept.length, items: kept.slice(query.offset, query.offset + query.limit).map((r) => this.render(ctx, r)) };
  }

  /** The sandbox's attributes that hold values (NEW, PROCESSING, PROCESSED), by name. */
  async live(ctx: TenantContext): Promise<Map<string, ComputedAttributeRecord>> {
    const all = await this.repo.list(scopeOf(ctx));
    return new Map(all.filter((r) => LIVE_STATUSES.includes(r.status)).map((r) => [r.name, r]));
  }

  async patch(ctx: TenantContext, id: string, body: PatchBody): Promise<ComputedAttributeView> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.load(ctx, id);
      const next = await this.patched(ctx, current, body);
      // Written only over the record it was checked against: the processor may have moved its status meanwhile.
      if (await this.repo.updateIf(scopeOf(ctx), next, current)) {
        if (next.status === "NEW") this.options.processor?.kick(ctx, next);
        return this.render(ctx, next);
      }
      if (attempt >= PATCH_ATTEMPTS) throw new ApiError(409, COMPUTED_ERROR.conflict, "The computed attribute changed while it was being updated; send the request again");
    }
  }

  /** The record `body` makes of `current`, every rule checked; nothing written. */
  private async patched(ctx: TenantContext, current: ComputedAttributeRecord, body: PatchBody): Promise<ComputedAttributeRecord> {
    const keys = Object.keys(body) as (keyof PatchBody)[];
    if (keys.length === 0) throw invalid("The request changes nothing: send displayName, description, status, expression, duration or keepCurrent");
    const next: ComputedAttributeRecord = { ...current };
    for (const key of keys) {
      if (key === "status") continue;
      if (sameValue(key, body, current)) continue;
      if (!EDITABLE[current.status].includes(key)) {
        const allowed = EDITABLE[current.status];
        const what = allowed.length === 0 ? "only the status can change" : `only ${allowed.join(", ")} and the status can change`;
        throw new ApiError(400, COMPUTED_ERROR.transition, `${key} cannot be changed while the computed attribute is ${current.status}: ${what}`);
      }
    }
    if (body.displayName !== undefined) next.displayName = body.displayName;
    if (body.description !== undefined) next.description = body.description;
    if (body.keepCurrent !== undefined) next.keepCurrent = body.keepCurrent;
    if (body.duration !== undefined) next.duration = checkDuration(body.duration);
    if (body.expression !== undefined) {
      const expr = checkExpression(body.expression, ctx.limits.expressionBytes);
      next.expression = expr.expression;
      next.mergeFunction = expr.fn;
      next.returnType = expr.returnType;
    }
    if (body.status !== undefined && body.status !== current.status) {
      const to = body.status as ComputedAttributeStatus;
      if (!(COMPUTED_ATTRIBUTE_STATUSES as readonly string[]).includes(body.status)) {
        throw invalid(`status must be one of ${COMPUTED_ATTRIBUTE_STATUSES.join(", ")} (got "${body.status.slice(0, 40)}")`);
      }
      if (!TRANSITIONS[current.status].includes(to)) {
        const allowed = TRANSITIONS[current.status];
        const where = allowed.length === 0 ? "cannot change any more" : `can only change to ${allowed.join(" or ")}`;
        throw new ApiError(400, COMPUTED_ERROR.transition, `A computed attribute in status ${current.status} ${where} (got "${to}")`);
      }
      if (to === "DISABLED") await this.refuseWhileRead(ctx, current);
      next.status = to;
    }
    // Strictly later: the processor's writes are conditional on it (stores/computed-attributes.ts updateIf).
    next.updateEpoch = Math.max(this.clock.now(), current.updateEpoch + 1);
    return next;
  }

  /** AEP refuses to remove a function others depend on (422): here, saved definitions that read it. */
  private async refuseWhileRead(ctx: TenantContext, r: ComputedAttributeRecord): Promise<void> {
    const users = this.options.dependents === undefined ? [] : await this.options.dependents(ctx, r.name);
    if (users.length === 0) return;
    const shown = users.slice(0, 10).map((d) => `'${d.name}' (${d.id})`).join(", ");
    const more = users.length > 10 ? ` and ${users.length - 10} more` : "";
    throw new ApiError(422, COMPUTED_ERROR.inUse,
      `Computed attribute '${r.name}' cannot be disabled: ${users.length} saved segment definition${users.length === 1 ? " reads" : "s read"} it: ${shown}${more}. Remove it from ${users.length === 1 ? "that definition" : "those definitions"} first`,
      users.map((d) => ({ code: COMPUTED_ERROR.inUse, message: `segment definition '${d.name}' reads computed attribute '${r.name}'`, definitionId: d.id })));
  }

  /** AEP deletes drafts only; a published attribute is disabled instead. */
  async delete(ctx: TenantContext, id: string): Promise<ComputedAttributeView> {
    const current = await this.load(ctx, id);
    if (current.status !== "DRAFT") {
      throw new ApiError(422, COMPUTED_ERROR.notDeletable, `Only a DRAFT computed attribute can be deleted; this one is ${current.status} (disable it with PATCH {"status": "DISABLED"})`);
    }
    if (!(await this.repo.delete(scopeOf(ctx), id))) throw notFound("Computed attribute", id);
    return this.render(ctx, current);
  }

  private async load(ctx: TenantContext, id: string): Promise<ComputedAttributeRecord> {
    const r = await this.repo.get(scopeOf(ctx), id);
    if (r === undefined) throw notFound("Computed attribute", id);
    return r;
  }
}

function sameValue(key: keyof PatchBody, body: PatchBody, current: ComputedAttributeRecord): boolean {
  const v = body[key];
  switch (key) {
    case "expression":
      return body.expression !== undefined && body.expression.value === current.expression.value && body.expression.format === current.expression.format;
    case "duration":
      return body.duration !== undefined && body.duration.count === current.duration.count && body.duration.unit === current.duration.unit;
    default:
      return v === current[key as "displayName" | "description" | "keepCurrent"];
  }
}

function checkDuration(d: { count: number; unit: string }): { count: number; unit: DurationUnit } {
  if (!(DURATION_UNITS as readonly string[]).includes(d.unit)) {
    throw invalid(`duration.unit must be HOURS, DAYS, WEEKS or MONTHS (got "${d.unit.slice(0, 40)}")`);
  }
  const unit = d.unit as DurationUnit;
  const b = DURATION_BOUNDS[unit];
  if (!Number.isInteger(d.count) || d.count < b.min || d.count > b.max) {
    throw invalid(`duration.count must be an integer from ${b.min} to ${b.max} for ${unit} (got ${d.count})`);
  }
  return { count: d.count, unit };
}

function checkExpression(e: ExpressionBody, maxBytes: number): { expression: { type: "PQL"; format: "pql/text"; value: string }; fn: ComputedAttributeRecord["mergeFunction"]; returnType: string } {
  if (e.type !== "PQL") throw invalid(`expression.type must be "PQL" (got "${e.type.slice(0, 40)}")`);
  if (e.format !== "pql/text") throw invalid(`expression.format must be "pql/text" (got "${e.format.slice(0, 40)}")`);
  const bytes = Buffer.byteLength(e.value, "utf8");
  if (bytes > maxBytes) throw new ApiError(400, ErrorCodes.limit, `expression.value is ${bytes} bytes; the limit is ${maxBytes} bytes`);
  if (e.value.trim() === "") throw new ApiError(400, ErrorCodes.invalidPql, "expression.value must not be empty");
  const shape = analyzeAttributeExpression(e.value);
  return { expression: { type: "PQL", format: "pql/text", value: e.value }, fn: shape.fn, returnType: shape.returnType };
}
