/**
 * bench:backfill --computed (issue #41, acceptance 3): a computed attribute's "backfill on
 * create" — its first evaluation, NEW → PROCESSING → PROCESSED (computed/processing.ts) — against
 * a batch job of a definition reading it, over bench:backfill's data, services and resident
 * snapshot (built once, timed by the caller: both use it).
 *
 * The attribute: SUM of commerce.order.priceTotal over purchases in the last 7 days. Its
 * evaluation runs as the server wires it (app.ts): `residentEvaluator` over the batch area's
 * `SnapshotCounts`, the sandbox's default merge policy (the bench's pdg one), the snapshot's
 * evaluation pool. The reference: a batch definition `_<tenant>.ComputedAttributes.<name> > 0`
 * (rewritten at save into the attribute's aggregate; opted-out profiles not excluded), evaluated
 * as a job evaluates it and its changes written — the caller's `referenceJob`, bench:backfill's
 * (a). Its members must be the profiles the attribute counts (every purchase has a positive
 * priceTotal in the demo data).
 *
 * Before anything is timed, one unmeasured evaluation reads the purchase events' columns (type,
 * time, price), so that neither side pays their first materialisation. Two rounds, each: the
 * attribute created until PROCESSED, then the reference. With --computed-scan, the same attribute
 * once more through the store scan the processor used before (every profile's events read and
 * asked by the reference, computed/values.ts), for comparison.
 */
import { AttributeProcessor, residentEvaluator, storedProfileEvents } from "../../packages/server/src/computed/processing.js";
import { ComputedAttributeService, type ComputedAttributeView } from "../../packages/server/src/computed/service.js";
import { SnapshotCounts } from "../../packages/server/src/batch/engine/snapshot-counts.js";
import type { SnapshotCache } from "../../packages/server/src/batch/columnar/cache.js";
import type { ManualClock } from "../../packages/server/src/platform/clock.js";
import type { ProfileStore } from "../../packages/server/src/profiles/store.js";
import { tenantIdOf } from "../../packages/server/src/services/schema-registry.js";
import type { TenantContext } from "../../packages/server/src/services/tenancy.js";
import type { Logger } from "../../packages/server/src/platform/logger.js";
import type { MetadataStore } from "../../packages/server/src/stores/types.js";

type Timed = <T>(f: () => Promise<T>) => Promise<{ value: T; ms: number; cpuMs: number }>;

export interface ComputedBackfillOptions {
  tenant: TenantContext;
  store: ProfileStore;
  metadata: MetadataStore;
  snapshots: SnapshotCache;
  clock: ManualClock;
  /** bench:backfill's (a): a batch definition created, evaluated as a job, its changes written. */
  referenceJob: (label: string, pql: string, excludeOptOut: boolean) => Promise<{ ms: number; cpuMs: number; members: Float64Array }>;
  /** An unmeasured job evaluation of a batch definition (its columns materialised). */
  warmUp: (label: string, pql: string) => Promise<number>;
  timed: Timed;
  target: (what: string, value: string, met: boolean) => void;
  /** Also the store scan (slow at 1M profiles). */
  scan: boolean;
  /** The size the snapshot holds, for the target line. */
  sizes: string;
}

const EXPRESSION = 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)';
const DURATION = { count: 7, unit: "DAYS" } as const;
/** Reads the columns both sides read (unmeasured; matches nobody). */
const WARM_UP = 'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].sum(commerce.order.priceTotal) > 123456789';
const ROUNDS = 2;

const s2 = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GB`;

/** Returns false when a check failed (the caller sets the exit code). */
export async function runComputedBackfill(o: ComputedBackfillOptions): Promise<boolean> {
  const { tenant, store, metadata, snapshots, clock, timed } = o;
  const logger = { error: (...a: unknown[]) => console.error("processor:", ...a) } as Pick<Logger, "error">;
  const counts = new SnapshotCounts(store, metadata.mergePolicies, snapshots);
  const fallback = storedProfileEvents(store, metadata.mergePolicies);
  const processor = new AttributeProcessor(metadata.computedAttributes, clock, residentEvaluator(() => counts, fallback), logger);
  const svc = new ComputedAttributeService(metadata.computedAttributes, clock, { processor });
  const tenantId = tenantIdOf(tenant.orgId);

  /** One attribute from the create call until it is PROCESSED (or FAILED). */
  const createUntilProcessed = async (name: string, service: ComputedAttributeService, p: AttributeProcessor) => {
    const rssBefore = process.memoryUsage().rss;
    const t = await timed(async () => {
      const created = await service.create(tenant, { name, displayName: name, description: "", expression: { type: "PQL", format: "pql/text", value: EXPRESSION }, duration: DURATION, status: "NEW" });
      await p.idle();
      return service.get(tenant, created.id);
    });
    const r: ComputedAttributeView = t.value;
    if (r.status !== "PROCESSED") throw new Error(`attribute ${name} is ${r.status}: ${JSON.stringify(r.evaluation)}`);
    const e = r.evaluation!;
    return { ms: t.ms, cpuMs: t.cpuMs, withValue: e.profilesWithValue, line: `${e.profilesWithValue} of ${e.profilesTotal} profiles with a value; RSS ${gb(rssBefore)} → ${gb(process.memoryUsage().rss)}` };
  };

  const w = await timed(() => o.warmUp("warm-up (purchase columns)", WARM_UP));
  console.log(`  warm-up: the purchase events' columns read once in ${s2(w.ms)} (not measured; ${w.value} members)`);

  let ok = true;
  let attrMs = 0;
  let refMs = 0;
  let attrCpu = 0;
  let refCpu = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    const name = `spend7d${round}`;
    const b = await createUntilProcessed(name, svc, processor);
    console.log(`(b${round}) attribute ${name} (SUM of priceTotal, purchases, 7 days) created → PROCESSED in ${s2(b.ms)} (CPU ${s2(b.cpuMs)}); ${b.line}`);
    // Opted-out profiles included, as the attribute counts them.
    const a = await o.referenceJob(`a${round}: _${tenantId}.ComputedAttributes.${name} > 0`, `_${tenantId}.ComputedAttributes.${name} > 0`, false);
    const same = a.members.length === b.withValue;
    console.log(`  ratio attribute / reference = ${(b.ms / a.ms).toFixed(2)} (wall), ${(b.cpuMs / a.cpuMs).toFixed(2)} (CPU); the reference's ${a.members.length} members ${same ? "=" : "DIFFER from"} the attribute's ${b.withValue} profiles with a value`);
    ok &&= same;
    attrMs += b.ms;
    refMs += a.ms;
    attrCpu += b.cpuMs;
    refCpu += a.cpuMs;
  }

  if (o.scan) {
    // The processor as it was: no snapshot, every profile's events read from the store.
    const scanning = new AttributeProcessor(metadata.computedAttributes, clock, fallback, logger);
    const scanSvc = new ComputedAttributeService(metadata.computedAttributes, clock, { processor: scanning });
    const c = await createUntilProcessed("spend7dScan", scanSvc, scanning);
    console.log(`(scan) the same attribute through the store scan → PROCESSED in ${s2(c.ms)} (CPU ${s2(c.cpuMs)}); ${c.line}; ${(c.ms / (attrMs / ROUNDS)).toFixed(1)}× the snapshot's`);
  }

  const ratio = attrMs / refMs;
  console.log(`peak RSS ${gb(process.resourceUsage().maxRSS * 1024)} (the snapshot's build included)`);
  o.target(`a computed attribute's first evaluation (create → PROCESSED) ≤ a batch job of a definition reading it (${o.sizes}; ${ROUNDS} rounds)`,
    `${s2(attrMs / ROUNDS)} against ${s2(refMs / ROUNDS)} a round, ratio ${ratio.toFixed(2)} (wall) / ${(attrCpu / refCpu).toFixed(2)} (CPU)`, ratio <= 1);
  await processor.idle();
  return ok;
}
