/**
 * A published attribute's statuses on the store under test (embedded or PostgreSQL): NEW →
 * PROCESSING with progress → PROCESSED with lastEvaluationTs and the profiles that have a value;
 * FAILED with the error; a DISABLE during the evaluation wins; an evaluation interrupted by a
 * restart starts again when the attribute is read; disabling is refused (422, the definitions
 * named) while saved definitions read the attribute.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../src/platform/clock.js";
import { defaultConfig } from "../../src/platform/config.js";
import { ApiError } from "../../src/services/errors.js";
import type { TenantContext } from "../../src/services/tenancy.js";
import type { MetadataStore } from "../../src/stores/types.js";
import type { DependentDefinition } from "../../src/computed/dependents.js";
import { AttributeProcessor, type StoredProfileEvents } from "../../src/computed/processing.js";
import { ComputedAttributeService, type CreateBody } from "../../src/computed/service.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const HOUR = 3_600_000;
const T0 = Date.parse("2026-03-01T12:00:00Z");
const ctx: TenantContext = { orgId: "orgP@AdobeOrg", sandbox: { sandboxId: "sbP", sandboxName: "prod", type: "production", default: true }, limits: defaultConfig().limits };

let handle: TestStoreHandle;
let store: MetadataStore;
before(async () => {
  handle = await createTestStore("ca-processing");
  store = await handle.open();
});
after(async () => {
  await store.close();
  await handle.dispose();
});

function body(name: string): CreateBody {
  return {
    name,
    displayName: name,
    description: "",
    expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)' },
    duration: { count: 12, unit: "HOURS" },
    status: "NEW",
  };
}

const purchase = (hoursAgo: number, price: number, type = "commerce.purchases") => ({ eventType: type, commerce: { order: { priceTotal: price } }, timestamp: new Date(T0 - hoursAgo * HOUR).toISOString() });

/** Five profiles in two chunks; three have a purchase in the last 12 hours. */
const CHUNKS: Record<string, unknown>[][][] = [
  [[purchase(1, 10)], [purchase(13, 10)], [purchase(2, 5, "web.pageViews")]],
  [[purchase(3, 1), purchase(20, 1)], [purchase(11, 7)]],
];

/** Profiles whose scan waits before its second chunk until `release` is called. */
function gatedProfiles(fail?: Error): StoredProfileEvents & { release: () => void; reachedGate: Promise<void> } {
  let release = (): void => {};
  const gate = new Promise<void>((r) => (release = r));
  let reached = (): void => {};
  const reachedGate = new Promise<void>((r) => (reached = r));
  return {
    release,
    reachedGate,
    count: async () => 5,
    async *scan() {
      yield CHUNKS[0]!;
      reached();
      await gate;
      if (fail !== undefined) throw fail;
      yield CHUNKS[1]!;
    },
  };
}

function service(profiles: StoredProfileEvents, dependents?: (name: string) => DependentDefinition[]): { svc: ComputedAttributeService; processor: AttributeProcessor; clock: ManualClock } {
  const clock = new ManualClock(T0);
  const processor = new AttributeProcessor(store.computedAttributes, clock, profiles, undefined, 0);
  const svc = new ComputedAttributeService(store.computedAttributes, clock, { processor, ...(dependents ? { dependents: async (_c, name) => dependents(name) } : {}) });
  return { svc, processor, clock };
}

test("NEW → PROCESSING with progress → PROCESSED with lastEvaluationTs and the profiles with a value", async () => {
  const profiles = gatedProfiles();
  const { svc, processor, clock } = service(profiles);
  const created = await svc.create(ctx, body("spendA"));
  assert.equal(created.status, "NEW");
  assert.equal(created.lastEvaluationTs, undefined);
  await profiles.reachedGate;
  clock.advance(5 * HOUR); // the evaluation is of one instant: the one it started at
  // The first chunk's progress is written before the scan asks for the next one.
  const during = await svc.get(ctx, created.id);
  assert.equal(during.status, "PROCESSING");
  assert.deepEqual(during.evaluation, { profilesEvaluated: 3, profilesTotal: 5, profilesWithValue: 1 });
  assert.equal(during.lastEvaluationTs, undefined);
  profiles.release();
  await processor.idle();
  const done = await svc.get(ctx, created.id);
  assert.equal(done.status, "PROCESSED");
  assert.equal(done.lastEvaluationTs, new Date(T0).toISOString());
  assert.deepEqual(done.evaluation, { profilesEvaluated: 5, profilesTotal: 5, profilesWithValue: 3 });
  assert.equal(done.updateEpoch, created.updateEpoch, "updateEpoch is the user's last change, not the evaluation's");
});

test("a DISABLE while it is PROCESSING wins; the evaluation stops", async () => {
  const profiles = gatedProfiles();
  const { svc, processor } = service(profiles);
  const created = await svc.create(ctx, body("spendB"));
  await profiles.reachedGate;
  const disabled = await svc.patch(ctx, created.id, { status: "DISABLED" });
  assert.equal(disabled.status, "DISABLED");
  profiles.release();
  await processor.idle();
  const after = await svc.get(ctx, created.id);
  assert.equal(after.status, "DISABLED");
  assert.equal(after.lastEvaluationTs, undefined);
});

test("an evaluation that throws leaves the attribute FAILED with the error", async () => {
  const profiles = gatedProfiles(new Error("profile store unreachable"));
  const { svc, processor } = service(profiles);
  const created = await svc.create(ctx, body("spendC"));
  profiles.release();
  await processor.idle();
  const failed = await svc.get(ctx, created.id);
  assert.equal(failed.status, "FAILED");
  assert.deepEqual(failed.evaluation, { profilesEvaluated: 3, profilesTotal: 5, profilesWithValue: 1, error: "profile store unreachable" });
  // FAILED may only become DISABLED.
  await assert.rejects(svc.patch(ctx, created.id, { status: "PROCESSED" }), (e: unknown) => e instanceof ApiError && e.status === 400 && e.message === 'A computed attribute in status FAILED can only change to DISABLED (got "PROCESSED")');
});

test("an attribute left PROCESSING by a restart is evaluated again when it is read", async () => {
  const first = gatedProfiles();
  const one = service(first);
  const created = await one.svc.create(ctx, body("spendD"));
  await first.reachedGate;
  // The process "dies" here: its run never finishes. Another process reads the attribute.
  const profiles = gatedProfiles();
  profiles.release();
  const two = service(profiles);
  assert.equal((await two.svc.get(ctx, created.id)).status, "PROCESSING");
  await two.processor.idle();
  const done = await two.svc.get(ctx, created.id);
  assert.equal(done.status, "PROCESSED");
  assert.deepEqual(done.evaluation, { profilesEvaluated: 5, profilesTotal: 5, profilesWithValue: 3 });
  // The first run, let go now, finds the status moved on and writes nothing.
  first.release();
  await one.processor.idle();
  assert.deepEqual((await two.svc.get(ctx, created.id)).evaluation, done.evaluation);
});

test("a PATCH of a NEW attribute while its evaluation starts is kept; the evaluation runs again at the next read", async () => {
  let release = (): void => {};
  const gate = new Promise<void>((r) => (release = r));
  let counting = (): void => {};
  const counted = new Promise<void>((r) => (counting = r));
  const inner = gatedProfiles();
  inner.release();
  // The evaluation has read the record (NEW) and waits on the count when the PATCH lands.
  const profiles: StoredProfileEvents = { count: async (c) => (counting(), await gate, inner.count(c)), scan: (c, since) => inner.scan(c, since) };
  const { svc, processor, clock } = service(profiles);
  const created = await svc.create(ctx, body("spendG"));
  await counted;
  const patched = await svc.patch(ctx, created.id, { description: "patched while NEW" });
  assert.equal(patched.status, "NEW");
  assert.equal(patched.updateEpoch, created.updateEpoch + 1, "moved forward though the clock did not");
  release();
  await processor.idle();
  const after = await svc.get(ctx, created.id); // this read starts the evaluation again
  assert.equal(after.description, "patched while NEW", "the evaluation's stale record did not overwrite the PATCH");
  assert.equal(after.status, "NEW");
  await processor.idle();
  const done = await svc.get(ctx, created.id);
  assert.deepEqual([done.status, done.description, done.updateEpoch], ["PROCESSED", "patched while NEW", created.updateEpoch + 1]);
  clock.advance(1);
});

test("a paused processor keeps published attributes NEW until it resumes", async () => {
  const profiles = gatedProfiles();
  profiles.release();
  const { svc, processor } = service(profiles);
  processor.pause();
  const created = await svc.create(ctx, body("spendE"));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal((await svc.get(ctx, created.id)).status, "NEW");
  processor.resume();
  await processor.idle();
  assert.equal((await svc.get(ctx, created.id)).status, "PROCESSED");
});

test("disabling is refused while saved definitions read the attribute: 422 naming them, nothing changed", async () => {
  const users = new Map<string, DependentDefinition[]>([["spendF", [{ id: "d-1", name: "Big spenders" }, { id: "d-2", name: "Recent buyers" }]]]);
  const profiles = gatedProfiles();
  profiles.release();
  const { svc, processor } = service(profiles, (name) => users.get(name) ?? []);
  const created = await svc.create(ctx, body("spendF"));
  await processor.idle();
  await assert.rejects(svc.patch(ctx, created.id, { status: "DISABLED" }), (e: unknown) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 422);
    assert.equal(e.code, "SEGMENTD-CA-IN-USE-422");
    assert.equal(e.message, "Computed attribute 'spendF' cannot be disabled: 2 saved segment definitions read it: 'Big spenders' (d-1), 'Recent buyers' (d-2). Remove it from those definitions first");
    assert.deepEqual(e.items.map((i) => (i as { definitionId?: string }).definitionId), ["d-1", "d-2"]);
    return true;
  });
  assert.equal((await svc.get(ctx, created.id)).status, "PROCESSED");
  users.delete("spendF");
  assert.equal((await svc.patch(ctx, created.id, { status: "DISABLED" })).status, "DISABLED");
});
