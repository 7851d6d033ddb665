/**
 * AEP's status lifecycle of a published attribute: NEW → PROCESSING → PROCESSED (or FAILED).
 * Definitions compute the value themselves (computed/rewrite.ts), so nothing has to be stored
 * before an attribute is usable; what PROCESSING stands for here is the attribute's first
 * evaluation over the sandbox's stored profiles, at one instant: how many profiles have a
 * contributing event (an event meeting the condition inside the lookback — whatever the
 * function, as the reference, computed/values.ts, counts them). In a server it runs as a batch job
 * does, over the resident columnar snapshot (`residentEvaluator`: the snapshot refreshed from the
 * change feed, one predicate over every profile); without one, every profile's events are read
 * from the store a chunk at a time and asked by the reference (`storeScanEvaluator`). Its
 * progress (profiles evaluated of the total) is written as it goes; its outcome is PROCESSED with
 * `lastEvaluationTs` and how many profiles have a contributing event, or FAILED with the error.
 *
 * Every write is conditional on the record the processor last wrote (status and updateEpoch,
 * which a PATCH moves), so a PATCH while it runs wins — DISABLED, or a NEW one's new
 * description: the processor stops at its next write (the next read starts it again). A run is not resumed by itself
 * after a restart: the next read of the attribute (GET or list) starts it again from the start.
 */
import { parse, type Query } from "@segmentd/pql";
import type { Clock } from "../platform/clock.js";
import type { Logger } from "../platform/logger.js";
import { tenantRef } from "../platform/tenant.js";
import type { ProfileReads } from "../profiles/store.js";
import { NO_MERGE_POLICY } from "../profiles/types.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { AttributeEvaluation, ComputedAttributeRecord, ComputedAttributeRepository, ComputedAttributeStatus } from "../stores/computed-attributes.js";
import type { MergePolicyRepository } from "../stores/types.js";
import { analyzeAttributeExpression } from "./expression.js";
import { attributeAggregateText } from "./rewrite.js";
import { contributingEvents, lookbackStart, referenceDefinition } from "./values.js";

type AttributeSource = Pick<ComputedAttributeRecord, "expression" | "duration">;

/** How far an evaluation has got; the last one reported is its outcome. */
export interface EvaluationProgress {
  evaluated: number;
  withValue: number;
  /** The profiles evaluated in all, once known (the count asked first may have moved). */
  total?: number;
}

/**
 * One evaluation of an attribute over every profile of a sandbox at `now`. `progress` is awaited
 * (a write); false means the record moved under the processor: the evaluation stops, and so
 * may `evaluate` (its answer is then ignored).
 */
export interface ProfileEvaluator {
  count(ctx: TenantContext): Promise<number>;
  evaluate(ctx: TenantContext, attribute: AttributeSource, now: number, progress: (p: EvaluationProgress) => Promise<boolean>): Promise<EvaluationProgress>;
}

/** Each profile's events (oldest first) from `since` on, a chunk of profiles at a time. */
export interface StoredProfileEvents {
  count(ctx: TenantContext): Promise<number>;
  scan(ctx: TenantContext, since: number): AsyncIterable<readonly (readonly Record<string, unknown>[])[]>;
}

/** The profile store read under the sandbox's default merge policy (AEP's fallback when it has none). */
export function storedProfileEvents(profiles: Pick<ProfileReads, "countProfiles" | "scanProfiles">, mergePolicies: MergePolicyRepository): StoredProfileEvents {
  return {
    count: (ctx) => profiles.countProfiles(tenantRef(ctx)),
    async *scan(ctx, since) {
      const d = await mergePolicies.getDefault(scopeOf(ctx), "_xdm.context.profile");
      for await (const chunk of profiles.scanProfiles(tenantRef(ctx), d?.policy ?? NO_MERGE_POLICY, { eventsSince: since })) {
        yield chunk.map((p) => p.events.map((e) => e.body));
      }
    },
  };
}

/** The reference over every profile's stored events, a chunk of profiles at a time. */
export function storeScanEvaluator(profiles: StoredProfileEvents): ProfileEvaluator {
  return {
    count: (ctx) => profiles.count(ctx),
    async evaluate(ctx, attribute, now, progress) {
      const def = referenceDefinition(attribute);
      const p: EvaluationProgress = { evaluated: 0, withValue: 0 };
      for await (const chunk of profiles.scan(ctx, lookbackStart(now, attribute.duration))) {
        for (const events of chunk) {
          p.evaluated++;
          if (contributingEvents(def, events, now).length > 0) p.withValue++;
        }
        if (!(await progress({ ...p }))) break;
      }
      return p;
    },
  };
}

/**
 * "Has a contributing event at now" as PQL: the attribute's events (its condition and lookback,
 * as the rewrite of a definition reading it has them) counted, whatever its function.
 */
export function contributingEventsQuery(attribute: AttributeSource): Query {
  const shape = analyzeAttributeExpression(attribute.expression.value);
  return parse(`${attributeAggregateText({ ...shape, fn: "COUNT", field: null }, attribute.duration)} > 0`);
}

/** The profiles qualifying for a query over the sandbox's resident snapshot (batch/engine/snapshot-counts.ts); null: none any more (closing). */
export interface ResidentProfiles {
  qualifying(ctx: TenantContext, query: Query, now: number, o: { onProgress?: (profilesRead: number) => void; isCancelled?: () => boolean }): Promise<{ profiles: number; qualifying: number } | null>;
}

/**
 * Over the resident snapshot when there is one (`resident()`, asked at each evaluation: the batch
 * area is wired after this one), as a batch job evaluates: the snapshot brought up to date (built
 * on first use, the build's profiles read being the progress), then one predicate over every
 * profile. Without one (or once the batch area has closed: evaluations resumed at shutdown), the
 * store scan.
 */
export function residentEvaluator(resident: () => ResidentProfiles | undefined, fallback: StoredProfileEvents): ProfileEvaluator {
  const scan = storeScanEvaluator(fallback);
  return {
    count: (ctx) => fallback.count(ctx),
    async evaluate(ctx, attribute, now, progress) {
      const r = resident();
      if (r === undefined) return scan.evaluate(ctx, attribute, now, progress);
      let stopped = false;
      let writing: Promise<unknown> | null = null;
      const onProgress = (read: number): void => {
        // The build's callback cannot wait: a report while the previous write is under way is dropped.
        if (writing !== null || stopped) return;
        writing = progress({ evaluated: read, withValue: 0 }).then((ok) => (stopped ||= !ok), () => undefined).finally(() => (writing = null));
      };
      try {
        const out = await r.qualifying(ctx, contributingEventsQuery(attribute), now, { onProgress, isCancelled: () => stopped });
        if (out === null) return await scan.evaluate(ctx, attribute, now, progress);
        return { evaluated: out.profiles, withValue: out.qualifying, total: out.profiles };
      } catch (err) {
        // Stopped by a PATCH: the build gave up (BuildCancelledError); the processor writes nothing more.
        if (stopped) return { evaluated: 0, withValue: 0 };
        throw err;
      } finally {
        await writing;
      }
    },
  };
}

/** Minimum interval between progress writes (ms). */
const PROGRESS_INTERVAL_MS = 1_000;

export class AttributeProcessor {
  private readonly running = new Map<string, Promise<void>>();
  private paused: { promise: Promise<void>; resume: () => void } | null = null;

  constructor(
    private readonly repo: ComputedAttributeRepository,
    private readonly clock: Clock,
    profiles?: ProfileEvaluator | StoredProfileEvents,
    private readonly logger?: Pick<Logger, "error">,
    private readonly progressIntervalMs = PROGRESS_INTERVAL_MS,
  ) {
    this.profiles = profiles === undefined || "evaluate" in profiles ? profiles : storeScanEvaluator(profiles);
  }

  private readonly profiles: ProfileEvaluator | undefined;

  /** Starts the evaluation of a NEW or PROCESSING attribute unless this process runs it already. */
  kick(ctx: TenantContext, record: ComputedAttributeRecord): void {
    if (record.status !== "NEW" && record.status !== "PROCESSING") return;
    const key = `${ctx.orgId}\u0000${ctx.sandbox.sandboxId}\u0000${record.id}`;
    if (this.running.has(key)) return;
    const run = this.run(ctx, record.id)
      .catch((err: unknown) => this.logger?.error({ err, attributeId: record.id }, "computed attribute evaluation failed"))
      .finally(() => this.running.delete(key));
    this.running.set(key, run);
  }

  /** Resolves when every started evaluation has finished (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  /** Holds evaluations before they start until resume() (tests observe NEW). */
  pause(): void {
    if (this.paused !== null) return;
    let resume = (): void => {};
    const promise = new Promise<void>((r) => (resume = r));
    this.paused = { promise, resume };
  }

  resume(): void {
    this.paused?.resume();
    this.paused = null;
  }

  private async run(ctx: TenantContext, id: string): Promise<void> {
    if (this.paused !== null) await this.paused.promise;
    const scope = scopeOf(ctx);
    const stored = await this.repo.get(scope, id);
    if (stored === undefined || (stored.status !== "NEW" && stored.status !== "PROCESSING")) return;
    const now = this.clock.now();
    const evaluation: AttributeEvaluation = { profilesEvaluated: 0, profilesTotal: 0, profilesWithValue: 0 };
    let current: ComputedAttributeRecord = stored;
    // Each write holds only while the record is still what this run wrote last (a PATCH moves updateEpoch).
    const write = async (status: ComputedAttributeStatus, extra: Partial<ComputedAttributeRecord> = {}): Promise<boolean> => {
      const next: ComputedAttributeRecord = { ...current, status, evaluation: { ...evaluation }, ...extra };
      if (!(await this.repo.updateIf(scope, next, current))) return false;
      current = next;
      return true;
    };
    try {
      evaluation.profilesTotal = this.profiles === undefined ? 0 : await this.profiles.count(ctx);
      if (!(await write("PROCESSING"))) return;
      if (this.profiles !== undefined) {
        let lastWrite = performance.now();
        let stopped = false;
        const progress = async (p: EvaluationProgress): Promise<boolean> => {
          evaluation.profilesEvaluated = p.evaluated;
          evaluation.profilesWithValue = p.withValue;
          if (stopped || performance.now() - lastWrite < this.progressIntervalMs) return !stopped;
          stopped = !(await write("PROCESSING"));
          lastWrite = performance.now();
          return !stopped;
        };
        const out = await this.profiles.evaluate(ctx, current, now, progress);
        if (stopped) return;
        evaluation.profilesEvaluated = out.evaluated;
        evaluation.profilesWithValue = out.withValue;
        if (out.total !== undefined) evaluation.profilesTotal = out.total;
      }
      await write("PROCESSED", { lastEvaluationTs: now });
    } catch (err) {
      evaluation.error = err instanceof Error ? err.message : String(err);
      await write("FAILED");
    }
  }
}
