/**
 * Issue #22, item 2: one event the hub refuses must not cost the events of other requests
 * (or tenants) forwarded in the same batch. The events are enqueued below the HTTP boundary
 * (which refuses unstorable strings with a 400 before they get here), into a forwarder over
 * the fixture's real hub: on both stores an event bound to a dataset of the other schema
 * class is refused by the store itself; on PostgreSQL also a lone surrogate and a NUL.
 * Everything else must reach the hub, the refused events be dead-lettered (listed, counted in
 * the metric, one warn line each), transient failures retried rather than dead-lettered, and
 * the forwarder keep forwarding.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Registry } from "prom-client";
import { HubForwardError, HubForwarder, type DeadLetter, type ForwardItem } from "../../src/edge/hub-forwarder.js";
import { EdgeLocations } from "../../src/edge/locations.js";
import type { EdgeProjector } from "../../src/edge/projector.js";
import { registerEdgeMetrics } from "../../src/edge/edge-metrics.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { Dataset, JsonObject, ValidRecord } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import type { TenantContext } from "../../src/services/tenancy.js";
import type { StreamingEngine } from "../../src/streaming/engine.js";
import { EVENTS_DS, PROFILES_DS, event, openFixture, tenantFor, type Fixture } from "../streaming/fixtures.js";

const T0 = Date.parse("2026-10-01T10:00:00Z");
const OTHER = "DEADLETTEROTHER000000000@AdobeOrg";
const PDG = { identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const projector = { project: async () => 0 } as unknown as EdgeProjector;

describe("edge forwarding isolates the events the hub refuses", () => {
  let f: Fixture;
  let events: Dataset;
  const other: TenantContext = tenantFor(OTHER);
  const scopeOf = (t: TenantContext) => ({ orgId: t.orgId, sandboxName: t.sandbox.sandboxName });

  before(async () => {
    f = await openFixture(T0);
    events = (await f.hub.getDataset(scopeOf(f.tenant), EVENTS_DS))!;
    await f.hub.createDataset(scopeOf(other), { id: EVENTS_DS, name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0);
  });
  after(async () => {
    await f.close();
  });

  let n = 0;
  /** A forward item for an event of `crmId`; `patch` changes the record after validation (what the boundary would refuse). */
  function item(crmId: string, opts: { tenant?: TenantContext; datasetId?: string; patch?: (body: JsonObject) => void; change?: string } = {}): ForwardItem {
    const at = T0 - 100_000 + ++n;
    const r = validateRecord(event(crmId, "page.view", at), 0, events);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    let record: ValidRecord = r.record;
    if (opts.patch) {
      const body = structuredClone(record.body);
      opts.patch(body);
      const json = JSON.stringify(body);
      record = { ...record, body, json, size: Buffer.byteLength(json) };
    }
    return {
      tenant: opts.tenant ?? f.tenant,
      datasetId: opts.datasetId ?? EVENTS_DS,
      record,
      identity: { namespace: "crmid", id: crmId },
      location: "edge",
      newAtLocation: false,
      edgeChanges: opts.change ? [{ definitionId: opts.change, status: "realized", at }] : [],
    };
  }

  /** A hub that counts appends (the bisection's cost). */
  function counting(hub: ProfileStore): { store: ProfileStore; appends: () => number } {
    let appends = 0;
    const store = new Proxy(hub, {
      get(target, prop, receiver) {
        if (prop === "append") {
          return (...args: Parameters<ProfileStore["append"]>) => {
            appends++;
            return target.append(...args);
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    return { store, appends: () => appends };
  }

  async function eventIdsOf(tenant: TenantContext, crmId: string): Promise<string[]> {
    const page = await f.hub.getEvents(scopeOf(tenant), { namespace: "crmid", id: crmId }, PDG, { limit: 1000 });
    return page.events.map((e) => e.eventId ?? "").sort();
  }

  it("delivers every event the hub takes, in one batch with refused ones, and dead-letters only those", async () => {
    const errors: unknown[] = [];
    const letters: DeadLetter[] = [];
    const { store, appends } = counting(f.hub);
    const fw = new HubForwarder({ hub: store, projector, flushIntervalMs: 60_000, retryDelayMs: 1, now: () => f.clock.now(), onError: (e) => errors.push(e), onDeadLetter: (l) => letters.push(l) });
    const registry = new Registry();
    registerEdgeMetrics(registry, { forwarder: fw, locations: new EdgeLocations(), streaming: { cachedStates: 0 } as unknown as StreamingEngine });

    // Refused by both stores: an event bound for a profile-class dataset.
    const refused: ForwardItem[] = [item("bad-class", { datasetId: PROFILES_DS, change: "d-bad" })];
    // PostgreSQL cannot hold these strings (the boundary refuses them before the queue; here they got past it).
    if (f.hub.kind === "postgres") {
      refused.push(item("bad-surrogate", { patch: (b) => (b["note"] = "x\ud800y"), change: "d-bad" }));
      refused.push(item("bad-nul", { patch: (b) => (b["note"] = "x\u0000y") }));
    }
    const good: ForwardItem[] = [];
    for (let i = 0; i < 60; i++) good.push(item(`good-${i % 12}`, i % 5 === 0 ? { change: "d-good" } : {}));
    const otherTenant = [item("other-1", { tenant: other }), item("other-2", { tenant: other, change: "d-other" })];
    // Refused events in the middle of the batch, among good ones of this tenant and another's.
    const batch = [...good.slice(0, 25), refused[0]!, ...otherTenant, ...good.slice(25, 40), ...refused.slice(1), ...good.slice(40)];
    for (const it of batch) fw.enqueue(it);
    await fw.idle();

    assert.deepEqual(errors, [], "a refused event is no failure of the batch: nothing retried, nothing dropped");
    assert.equal(fw.stats.forwarded, good.length + otherTenant.length);
    assert.equal(fw.stats.deadLettered, refused.length);
    assert.equal(fw.stats.dropped, 0);
    // Every good event is in the hub, exactly once.
    for (let c = 0; c < 12; c++) {
      const want = good.filter((it) => it.identity.id === `good-${c}`).map((it) => it.record.eventId!).sort();
      assert.deepEqual(await eventIdsOf(f.tenant, `good-${c}`), want, `good-${c}'s events`);
    }
    assert.deepEqual(await eventIdsOf(other, "other-1"), [otherTenant[0]!.record.eventId!]);
    assert.deepEqual(await eventIdsOf(other, "other-2"), [otherTenant[1]!.record.eventId!]);
    assert.equal((await f.hub.listTransitions(scopeOf(f.tenant), { definitionId: "d-good" })).length, 12, "the good events' edge transitions");
    assert.equal((await f.hub.listTransitions(scopeOf(other), { definitionId: "d-other" })).length, 1, "the other tenant's transition");
    // The refused ones: not stored, their transitions not written, listed with the hub's reason.
    for (const it of refused) assert.deepEqual(await eventIdsOf(f.tenant, it.identity.id), [], `${it.identity.id} is not stored`);
    assert.equal((await f.hub.listTransitions(scopeOf(f.tenant), { definitionId: "d-bad" })).length, 0);
    const listed = fw.deadLetters();
    assert.deepEqual(listed.map((l) => l.eventId).sort(), refused.map((it) => it.record.eventId).sort());
    assert.deepEqual(letters, listed, "one onDeadLetter call (the warn line) per dead letter");
    const byClass = listed.find((l) => l.identity.id === "bad-class")!;
    assert.equal(byClass.datasetId, PROFILES_DS);
    assert.equal(byClass.orgId, f.tenant.orgId);
    assert.match(byClass.reason, /is experienceevent but dataset ds-profiles holds profile/);
    assert.equal(byClass.event["_id"], refused[0]!.record.eventId);
    for (const l of listed) assert.ok(l.reason.length > 0);
    assert.match(await registry.metrics(), new RegExp(`^segmentd_edge_dead_letters_total ${refused.length}$`, "m"));
    assert.match(await registry.metrics(), /^segmentd_edge_forward_dropped_total 0$/m);
    // Bisection, not one write per event: about two writes per level for each refused event.
    assert.ok(appends() <= 2 + refused.length * 2 * (Math.ceil(Math.log2(batch.length)) + 2), `${appends()} appends`);

    // It keeps forwarding.
    const later = item("good-later");
    fw.enqueue(later);
    await fw.close();
    assert.deepEqual(await eventIdsOf(f.tenant, "good-later"), [later.record.eventId!]);
    assert.equal(fw.stats.deadLettered, refused.length);
  });

  it("dead-letters a refused event that is alone in its batch, after the retries, and forwards what follows", async () => {
    const errors: unknown[] = [];
    const fw = new HubForwarder({ hub: f.hub, projector, retryDelayMs: 1, maxAttempts: 3, now: () => f.clock.now(), onError: (e) => errors.push(e) });
    const bad = item("lonely-bad", { datasetId: PROFILES_DS });
    fw.enqueue(bad);
    await fw.idle();
    // Alone, a refusal cannot be told from a hub that fails every write: retried first, dead-lettered at the last attempt.
    assert.deepEqual(errors.map((e) => (e as HubForwardError).willRetry), [true, true]);
    assert.deepEqual(fw.deadLetters().map((l) => l.eventId), [bad.record.eventId]);
    assert.equal(fw.stats.dropped, 0);
    const next = item("lonely-next");
    fw.enqueue(next);
    await fw.close();
    assert.deepEqual(await eventIdsOf(f.tenant, "lonely-next"), [next.record.eventId!]);
  });

  it("retries a hub that fails every write, whatever its error, and dead-letters nothing", async () => {
    let failing = 2;
    const flaky = new Proxy(f.hub, {
      get(target, prop, receiver) {
        if (prop === "append") {
          return (...args: Parameters<ProfileStore["append"]>) => (failing > 0 ? Promise.reject(new Error("disk is having a moment")) : target.append(...args));
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const errors: unknown[] = [];
    const fw = new HubForwarder({ hub: flaky, projector, flushIntervalMs: 60_000, retryDelayMs: 1, maxAttempts: 5, now: () => f.clock.now(), onError: (e) => {
      errors.push(e);
      failing--;
    } });
    const items = Array.from({ length: 40 }, (_, i) => item(`flaky-${i % 4}`));
    for (const it of items) fw.enqueue(it);
    await fw.idle();
    assert.equal(fw.stats.deadLettered, 0, "a failing store is not a refused event");
    assert.equal(fw.stats.dropped, 0);
    assert.deepEqual(errors.map((e) => (e as HubForwardError).willRetry), [true, true]);
    assert.equal(fw.stats.forwarded, 40);
    for (let c = 0; c < 4; c++) assert.equal((await eventIdsOf(f.tenant, `flaky-${c}`)).length, 10);
    await fw.close();
  });
});
