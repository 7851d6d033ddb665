/**
 * Dataset expirations (/ttl, hygiene-api.md §5): a delayed "delete this
 * dataset". At most one active (pending/executing) per dataset; at most the
 * org's datasetExpirationQuota active at once (a hard limit, whatever the
 * expiry date). Both limits are checked inside the store's insert transaction.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { HygieneContext } from "./context.js";
import type { EntitlementService } from "./entitlement-service.js";
import { HygieneCodes, HygieneError, notFound, quotaExceeded, ttlInvalid } from "./errors.js";
import { checkLeadTime, parseExpiry } from "./expiry.js";
import { exitVanishedProfiles, type LifecycleListener, type LifecycleProfileStore } from "./lifecycle-exits.js";
import { QUOTA_PERIOD_WORDS } from "./quotas.js";
import type { ExpirationListQuery, ExpirationRecord, Page } from "./records.js";
import type { HygieneStore } from "./store/types.js";

type Obj = Record<string, unknown>;

function bodyObject(body: unknown): Obj {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw ttlInvalid("The request body must be a JSON object.");
  return body as Obj;
}

function optionalText(b: Obj, key: string, max: number): string | undefined {
  const v = b[key];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw ttlInvalid(`'${key}' must be a string.`);
  if (v.length > max) throw ttlInvalid(`'${key}' must be at most ${max} characters long.`);
  return v;
}

export class ExpirationService {
  constructor(
    private readonly store: HygieneStore,
    private readonly profiles: LifecycleProfileStore,
    private readonly entitlements: EntitlementService,
    private readonly clock: Clock,
    private readonly onChange?: LifecycleListener,
    private readonly onError: (err: unknown, what: string) => void = () => {},
  ) {}

  async create(ctx: HygieneContext, body: unknown): Promise<ExpirationRecord> {
    const b = bodyObject(body);
    const datasetId = b.datasetId;
    if (typeof datasetId !== "string" || datasetId.trim() === "") throw ttlInvalid("'datasetId' is required.");
    const displayName = optionalText(b, "displayName", 255);
    if (displayName === undefined || displayName.trim() === "") throw ttlInvalid("'displayName' is required.");
    const description = optionalText(b, "description", 1000) ?? "";
    const expiry = parseExpiry(b.expiry);
    const now = this.clock.now();
    checkLeadTime(expiry, now);
    const dataset = await this.profiles.getDataset({ orgId: ctx.orgId, sandboxName: ctx.sandboxName }, datasetId);
    if (dataset === null) throw notFound(`Dataset ${datasetId} not found in sandbox ${ctx.sandboxName}.`);
    const record: ExpirationRecord = {
      ttlId: `SD-${randomUUID()}`,
      orgId: ctx.orgId,
      sandboxName: ctx.sandboxName,
      datasetId,
      datasetName: dataset.name,
      displayName,
      description,
      status: "pending",
      expiry,
      createdAt: now,
      updatedAt: now,
      updatedBy: ctx.actor,
      history: [{ status: "created", expiry, updatedAt: now, updatedBy: ctx.actor }],
      revision: 0,
    };
    const allowance = (await this.entitlements.effective(ctx.orgId)).datasetExpirationQuota;
    const outcome = await this.store.insertExpiration(record, allowance);
    if (outcome.ok) return record;
    if (outcome.reason === "duplicate") {
      throw new HygieneError(
        400,
        HygieneCodes.ttlDuplicate,
        `The requested dataset already has an existing expiration. Additional detail: A TTL already exists for datasetId=${datasetId}`,
        "problem",
      );
    }
    throw quotaExceeded("datasetExpirationQuota", outcome.allowance, outcome.active, 1, QUOTA_PERIOD_WORDS.datasetExpirationQuota);
  }

  /** `id` is a ttlId or a datasetId (then the dataset's current expiration). */
  async get(ctx: HygieneContext, id: string): Promise<ExpirationRecord> {
    const found = (await this.store.getExpiration(ctx.orgId, id)) ?? (await this.store.expirationForDataset(ctx.orgId, ctx.sandboxName, id));
    if (!found) throw notFound(`Dataset expiration configuration ${id} not found.`);
    return found;
  }

  list(ctx: HygieneContext, query: ExpirationListQuery): Promise<Page<ExpirationRecord>> {
    return this.store.listExpirations(ctx.orgId, query);
  }

  /** PUT takes a ttlId only (a datasetId is refused, as Adobe does). */
  async update(ctx: HygieneContext, ttlId: string, body: unknown): Promise<ExpirationRecord> {
    const b = bodyObject(body);
    const displayName = optionalText(b, "displayName", 255);
    const description = optionalText(b, "description", 1000);
    const hasExpiry = b.expiry !== undefined;
    if (displayName === undefined && description === undefined && !hasExpiry) throw ttlInvalid("Give at least one of 'displayName', 'description', 'expiry'.");
    if (displayName !== undefined && displayName.trim() === "") throw ttlInvalid("'displayName' must not be empty.");
    const current = await this.store.getExpiration(ctx.orgId, ttlId);
    if (!current) throw notFound(`Dataset expiration configuration ${ttlId} not found.`);
    const now = this.clock.now();
    let expiry = current.expiry;
    if (hasExpiry) {
      expiry = parseExpiry(b.expiry);
      checkLeadTime(expiry, now);
    }
    if (current.status !== "pending") throw this.wrongState(current, "updated");
    const next: ExpirationRecord = {
      ...current,
      displayName: displayName ?? current.displayName,
      description: description ?? current.description,
      expiry,
      updatedAt: now,
      updatedBy: ctx.actor,
      history: [...current.history, { status: "updated", expiry, updatedAt: now, updatedBy: ctx.actor }],
    };
    if (!(await this.store.replaceExpiration(next, ["pending"]))) {
      const fresh = await this.store.getExpiration(ctx.orgId, ttlId);
      if (fresh?.status === "pending") throw new HygieneError(409, HygieneCodes.conflict, `Dataset expiration ${ttlId} was changed by another request; read it again and retry.`, "problem");
      throw this.wrongState(fresh ?? current, "updated");
    }
    return { ...next, revision: next.revision + 1 };
  }

  /** Only pending can be cancelled: executing → 400, cancelled/completed/unknown → 404 (hygiene-api.md §5.6). */
  async cancel(ctx: HygieneContext, id: string): Promise<ExpirationRecord> {
    const current = (await this.store.getExpiration(ctx.orgId, id)) ?? (await this.store.expirationForDataset(ctx.orgId, ctx.sandboxName, id));
    if (!current || current.status === "cancelled" || current.status === "completed") {
      throw notFound(`Dataset expiration configuration ${id} not found${current ? ` in a cancellable state (it is ${current.status})` : ""}.`);
    }
    if (current.status === "executing") throw this.wrongState(current, "cancelled");
    const now = this.clock.now();
    const next: ExpirationRecord = {
      ...current,
      status: "cancelled",
      updatedAt: now,
      updatedBy: ctx.actor,
      history: [...current.history, { status: "cancelled", expiry: current.expiry, updatedAt: now, updatedBy: ctx.actor }],
    };
    if (!(await this.store.replaceExpiration(next, ["pending"]))) {
      const fresh = await this.store.getExpiration(ctx.orgId, current.ttlId);
      if (fresh?.status === "pending") throw new HygieneError(409, HygieneCodes.conflict, `Dataset expiration ${current.ttlId} was changed by another request; read it again and retry.`, "problem");
      throw this.wrongState(fresh ?? current, "cancelled");
    }
    return { ...next, revision: next.revision + 1 };
  }

  private wrongState(r: ExpirationRecord, verb: string): HygieneError {
    return new HygieneError(400, HygieneCodes.ttlWrongState, `Dataset expiration ${r.ttlId} is ${r.status}; only a pending expiration can be ${verb}.`, "problem");
  }

  /**
   * Executes every due expiration: pending → executing (claimed by
   * compare-and-set) → dataset deleted → completed. Executing ones left by a
   * crashed process are finished too. Returns how many completed.
   */
  async runDue(limit = 100): Promise<number> {
    const now = this.clock.now();
    let completed = 0;
    for (const ref of await this.store.dueExpirations(now, limit)) {
      const current = await this.store.getExpiration(ref.orgId, ref.id);
      if (!current) continue;
      let claimed = current;
      if (current.status === "pending") {
        const at = this.clock.now();
        claimed = {
          ...current,
          status: "executing",
          updatedAt: at,
          updatedBy: "segmentd",
          history: [...current.history, { status: "executing", expiry: current.expiry, updatedAt: at, updatedBy: "segmentd" }],
        };
        if (!(await this.store.replaceExpiration(claimed, ["pending"]))) continue;
        claimed = { ...claimed, revision: claimed.revision + 1 };
      } else if (current.status !== "executing") continue;
      const scope = { orgId: claimed.orgId, sandboxName: claimed.sandboxName };
      // null: the dataset was already deleted by other means; the expiration is still done.
      const counts = await this.profiles.deleteDataset(scope, claimed.datasetId);
      const exits = counts ? await exitVanishedProfiles(this.profiles, scope, counts.profileIds, this.clock.now()) : undefined;
      const at = this.clock.now();
      const done: ExpirationRecord = {
        ...claimed,
        status: "completed",
        updatedAt: at,
        updatedBy: "segmentd",
        history: [...claimed.history, { status: "completed", expiry: claimed.expiry, updatedAt: at, updatedBy: "segmentd" }],
      };
      if (await this.store.replaceExpiration(done, ["executing"])) completed++;
      if (counts && exits && this.onChange && counts.profileIds.length > 0) {
        try {
          await this.onChange({ scope, cause: { kind: "expiration", id: claimed.ttlId }, changedProfileIds: counts.profileIds, removedProfileIds: exits.removedProfileIds });
        } catch (err) {
          this.onError(err, `listener of expiration ${claimed.ttlId}`);
        }
      }
    }
    return completed;
  }
}
