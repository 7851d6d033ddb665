/**
 * The streaming engine at volume and its `from` rule, against the real hub
 * (embedded or PostgreSQL, SEGMENTD_TEST_STORE):
 * - 10,000 events in concurrent batches produce exactly the transitions that
 *   `evaluate` predicts, each once, with source `streaming`;
 * - the previous status handed to the store (`from`, which the store trusts) is
 *   the state's, and only for streaming-only definitions; a definition that
 *   another evaluator also writes never gets a `from`, so a membership changed
 *   behind the engine's back produces no wrong transition;
 * - a write that fails after it may have committed drops the cached state, so
 *   the next `from` comes from the hub, not from the stale state.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { evaluate } from "@segmentd/pql";
import type { MembershipChange, ProfileStore } from "../../src/profiles/store.js";
import type { JsonObject, MembershipTransition } from "../../src/profiles/types.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { PROFILE_SCHEMA_CLASS } from "../../src/services/merge-policies.js";
import { StreamingEngine } from "../../src/streaming/engine.js";
import { EVENTS_DS, PROFILES_DS, event, openFixture, profile, type Fixture } from "./fixtures.js";

const LAG = 1000;
const HOUR = 3_600_000;

/** The hub with some of its methods replaced (the others bound to it). */
function hubWith(hub: ProfileStore, overrides: Partial<ProfileStore>): ProfileStore {
  return new Proxy(hub, {
    get(target, prop) {
      const own = (overrides as Record<string | symbol, unknown>)[prop];
      if (own !== undefined) return own;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The hub, recording every change handed to applyMembershipChanges; `failNext` makes the next call write and then reject. */
function recordingHub(hub: ProfileStore): { hub: ProfileStore; changes: MembershipChange[]; failNext: () => void } {
  const changes: MembershipChange[] = [];
  let fail = false;
  const proxy = hubWith(hub, {
    async applyMembershipChanges(scope, cs) {
      for (const c of cs) changes.push({ ...c });
      const out = await hub.applyMembershipChanges(scope, cs);
      if (fail) {
        fail = false;
        throw new Error("connection lost after COMMIT");
      }
      return out;
    },
  });
  return { hub: proxy, changes, failNext: () => (fail = true) };
}

/**
 * "profileId definitionId" of every membership `evaluate` says the events sent to each CRM id
 * qualify (`attributesOf` gives its profile), sorted.
 */
async function expectedMemberships(f: Fixture, sent: ReadonlyMap<string, Array<{ eventType: string; timestamp: string }>>, pqls: Record<string, string>,
  now: number, attributesOf: (who: string) => Record<string, unknown>): Promise<string[]> {
  const expected: string[] = [];
  for (const [who, unordered] of sent) {
    // Time order, as the profile's events are kept (ISO strings of one shape sort by time).
    const evs = [...unordered].sort((a, b) => (a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0));
    const pid = (await f.hub.findProfileId({ orgId: f.tenant.orgId, sandboxName: "prod" }, { namespace: "crmid", id: who }))!;
    for (const [id, pql] of Object.entries(pqls)) {
      if (evaluate(pql, { profile: attributesOf(who), events: evs, now }) === true) expected.push(`${pid} ${id}`);
    }
  }
  return expected.sort();
}

/** Continuous definitions over windows of event types t.a, t.b and t.c (name, PQL). */
const WINDOW_DEFINITIONS: ReadonlyArray<[string, string]> = [
  ["a within 2 hours", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "t.a") WHEN(< 2 hours before now)])'],
  ["3 b within 3 hours", 'xEvent[eventType = "t.b" and timestamp occurs < 3 hours before now].count() >= 3'],
  ["gold with c today", 'loyalty.tier = "gold" and chain(xEvent, timestamp, [C0: WHAT(eventType = "t.c") WHEN(today)])'],
  ["a then b within 6 hours", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "t.a") WHEN(< 6 hours before now), C1: WHAT(eventType = "t.b") WHEN(< 6 hours before now)])'],
];

describe("streaming engine at volume", () => {
  const T = Date.parse("2026-05-20T18:00:00Z");
  let f: Fixture;
  let engine: StreamingEngine;
  const scope = { orgId: "", sandboxName: "prod" };
  const pqls: Record<string, string> = {};

  before(async () => {
    f = await openFixture(T);
    scope.orgId = f.tenant.orgId;
    for (const [name, pql] of WINDOW_DEFINITIONS) pqls[await f.define(name, pql, { continuous: true })] = pql;
    engine = new StreamingEngine({ catalog: f.catalog, hub: f.hub, clock: f.clock });
  });
  after(async () => {
    await engine.stop();
    await f.close();
  });

  it("a stream of 10,000 events produces exactly the transitions evaluate predicts", async () => {
    const PROFILES = 300;
    const tiers = new Map<string, string>();
    const profiles = [];
    for (let i = 0; i < PROFILES; i++) {
      const tier = ["gold", "silver", "bronze"][i % 3]!;
      tiers.set(`v${i}`, tier);
      profiles.push(profile(`v${i}`, { loyalty: { tier } }));
    }
    assert.deepEqual(await engine.onRecordsStored(f.tenant, await f.store(PROFILES_DS, profiles)), [], "no events yet");

    let s = 7;
    const rnd = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
    const types = ["t.a", "t.b", "t.c", "t.x"];
    const sent = new Map<string, Array<{ eventType: string; timestamp: string }>>();
    const got: MembershipTransition[] = [];
    for (let b = 0; b < 20; b++) {
      const bodies = [];
      for (let i = 0; i < 500; i++) {
        const who = `v${Math.floor(rnd() * PROFILES)}`;
        // Out of time order on purpose (up to 5 hours back, all on the same UTC day).
        const body = event(who, types[Math.floor(rnd() * types.length)]!, T - LAG - Math.floor(rnd() * 5 * HOUR));
        bodies.push(body);
        const list = sent.get(who) ?? [];
        list.push({ eventType: body["eventType"] as string, timestamp: body["timestamp"] as string });
        sent.set(who, list);
      }
      got.push(...(await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, bodies))));
    }
    await engine.idle();

    const expected = await expectedMemberships(f, sent, pqls, T, (who) => ({ loyalty: { tier: tiers.get(who) } }));
    assert.ok(expected.length > 200, `the stream qualifies many profiles (${expected.length})`);
    // With a fixed `now` these definitions only ever enter: one transition per qualified membership, nothing else.
    assert.deepEqual(got.map((t) => `${t.profileId} ${t.definitionId}`).sort(), expected);
    assert.ok(got.every((t) => t.from === null && t.to === "realized" && t.source === "streaming" && t.at === new Date(T).toISOString()));
    const logged = await f.hub.listTransitions(scope, { sources: ["streaming"], limit: 100_000 });
    assert.deepEqual(logged.map((t) => `${t.profileId} ${t.definitionId}`).sort(), expected);
    for (const id of Object.keys(pqls)) {
      const n = expected.filter((e) => e.endsWith(` ${id}`)).length;
      assert.deepEqual(await f.hub.countMembers(scope, id), { realized: n, exited: 0 });
    }
  });
});

describe("streaming engine: the `from` rule", () => {
  const T0 = Date.parse("2026-06-02T10:00:00Z");
  let f: Fixture;
  let engine: StreamingEngine;
  let rec: ReturnType<typeof recordingHub>;
  let onlyStreaming: string;
  let alsoBatch: string;
  const scope = { orgId: "", sandboxName: "prod" };
  const pidOf = async (who: string) => (await f.hub.findProfileId(scope, { namespace: "crmid", id: who }))!;

  before(async () => {
    f = await openFixture(T0);
    scope.orgId = f.tenant.orgId;
    onlyStreaming = await f.define("s within the hour", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "t.s") WHEN(< 1 hours before now)])', { continuous: true });
    alsoBatch = (
      await f.definitions.create(f.tenant, {
        name: "b within the hour, also batch",
        schema: { name: PROFILE_SCHEMA_CLASS },
        expression: { type: "PQL", format: "pql/text", value: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "t.b") WHEN(< 1 hours before now)])' },
        evaluationInfo: { batch: { enabled: true }, continuous: { enabled: true }, synchronous: { enabled: false } },
      })
    ).id;
    rec = recordingHub(f.hub);
    engine = new StreamingEngine({ catalog: f.catalog, hub: rec.hub, clock: f.clock });
  });
  after(async () => {
    await engine.stop();
    await f.close();
  });

  const fromOf = (def: string) => rec.changes.filter((c) => c.definitionId === def).map((c) => [c.status, "from" in c ? c.from : "(read)"]);

  it("streaming-only: from is the state's previous status (null, realized, exited)", async () => {
    f.clock.set(T0);
    await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("ann", "t.s", T0 - LAG)]));
    f.clock.set(T0 - LAG + HOUR + 20_000);
    const exits = await engine.sweep();
    assert.deepEqual(exits.map((t) => [t.definitionId, t.from, t.to]), [[onlyStreaming, "realized", "exited"]]);
    const t2 = f.clock.now();
    const back = await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("ann", "t.s", t2 - LAG)]));
    assert.deepEqual(back.map((t) => [t.from, t.to]), [["exited", "realized"]]);
    // The sweep's exit carries no from (see the rule); the entries do.
    assert.deepEqual(fromOf(onlyStreaming), [["realized", null], ["exited", "(read)"], ["realized", "exited"]]);
    const log = await f.hub.listTransitions(scope, { definitionId: onlyStreaming });
    assert.deepEqual(log.map((t) => [t.from, t.to, t.source]), [[null, "realized", "streaming"], ["realized", "exited", "streaming"], ["exited", "realized", "streaming"]]);
  });

  it("a definition another evaluator writes gets no from: a membership changed behind the engine's back gives no wrong transition", async () => {
    const t = f.clock.now();
    await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("ben", "t.b", t - LAG)]));
    const pid = await pidOf("ben");
    // A batch job exits ben (the engine's state still says realized).
    await f.hub.applyMembershipChanges(scope, [{ profileId: pid, definitionId: alsoBatch, status: "exited", source: "batch", at: t + 1000 }]);
    f.clock.set(t - LAG + HOUR + 20_000);
    const swept = await engine.sweep();
    assert.deepEqual(swept.filter((x) => x.definitionId === alsoBatch), [], "the store read the exit: nothing to record");
    assert.ok(fromOf(alsoBatch).every(([, from]) => from === "(read)"), "never a from");
    const log = await f.hub.listTransitions(scope, { definitionId: alsoBatch });
    assert.deepEqual(log.map((x) => [x.from, x.to, x.source]), [[null, "realized", "streaming"], ["realized", "exited", "batch"]]);
  });

  it("a write that fails after it may have committed drops the state: the next from comes from the hub", async () => {
    const t = f.clock.now();
    rec.failNext();
    await assert.rejects(engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("cat", "t.s", t - LAG)])), /connection lost/);
    const pid = await pidOf("cat");
    assert.deepEqual((await f.hub.getMemberships(scope, pid)).map((m) => [m.definitionId, m.status]), [[onlyStreaming, "realized"]], "the write did commit");
    // A stale state would say "no membership" and pass from: null — a second null → realized.
    f.clock.advance(60_000);
    assert.deepEqual(await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("cat", "t.s", f.clock.now() - LAG)])), []);
    const log = await f.hub.listTransitions(scope, { definitionId: onlyStreaming });
    assert.deepEqual(log.filter((x) => x.profileId === pid).map((x) => [x.from, x.to]), [[null, "realized"]]);
  });

  it("a lifecycle exit written before onProfilesChanged does not make the sweep record a second exit", async () => {
    const t = f.clock.now();
    await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("eve", "t.s", t - LAG)]));
    const pid = await pidOf("eve");
    // What exitVanishedProfiles does (source batch) before the listener calls onProfilesChanged.
    await f.hub.applyMembershipChanges(scope, [{ profileId: pid, definitionId: onlyStreaming, status: "exited", source: "batch", at: t + 1000 }]);
    f.clock.set(t - LAG + HOUR + 20_000);
    const swept = await engine.sweep();
    assert.deepEqual(swept.filter((x) => x.profileId === pid), []);
    const log = await f.hub.listTransitions(scope, { definitionId: onlyStreaming });
    assert.deepEqual(log.filter((x) => x.profileId === pid).map((x) => [x.from, x.to, x.source]), [[null, "realized", "streaming"], ["realized", "exited", "batch"]]);
  });

  it("passFrom: false never passes from", async () => {
    const r2 = recordingHub(f.hub);
    const e2 = new StreamingEngine({ catalog: f.catalog, hub: r2.hub, clock: f.clock, passFrom: false });
    const t = f.clock.now();
    const got = await e2.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [event("dan", "t.s", t - LAG)]));
    assert.deepEqual(got.map((x) => [x.definitionId, x.from, x.to]), [[onlyStreaming, null, "realized"]]);
    assert.ok(r2.changes.length > 0 && r2.changes.every((c) => !("from" in c)));
    await e2.stop();
  });
});

/**
 * Events evaluated ahead of their append (decideAhead + ProfileStore.appendDecided, as the
 * streaming collection route does): the transitions are those of the usual path, most events go
 * with their transitions in one write, and a wrong guess or a failed write falls back safely.
 */
describe("streaming engine: events decided ahead of their append", () => {
  const T = Date.parse("2026-07-10T18:00:00Z");
  let f: Fixture;
  let engine: StreamingEngine;
  let calls: { decided: number; applied: number; failNext: boolean };
  let hub: ProfileStore;
  const scope = { orgId: "", sandboxName: "prod" };
  const pqls: Record<string, string> = {};

  before(async () => {
    f = await openFixture(T);
    scope.orgId = f.tenant.orgId;
    // The same definitions but the one on a profile attribute (this stream sends none).
    for (const [name, pql] of WINDOW_DEFINITIONS.filter(([, pql]) => !pql.includes("loyalty"))) pqls[await f.define(name, pql, { continuous: true })] = pql;
    calls = { decided: 0, applied: 0, failNext: false };
    hub = hubWith(f.hub, {
      async appendDecided(...args) {
        calls.decided++;
        if (calls.failNext) {
          calls.failNext = false;
          throw new Error("disk full");
        }
        const r = await f.hub.appendDecided(...args);
        if (r.transitions !== null) calls.applied++;
        return r;
      },
    });
    engine = new StreamingEngine({ catalog: f.catalog, hub, clock: f.clock });
  });
  after(async () => {
    await engine.stop();
    await f.close();
  });

  /** What the collection route does: decide ahead, append with the decision, then evaluate the rest. */
  async function stream(bodies: JsonObject[]): Promise<MembershipTransition[]> {
    const r = await ingestRecords(hub, scope, EVENTS_DS, bodies.map((value, index) => ({ index, value })), {
      now: f.clock.now(),
      decideAhead: (records) => engine.decideAhead(f.tenant, records),
    });
    assert.deepEqual(r.failed, []);
    return engine.onRecordsStored(f.tenant, r.stored, r.storedPids, r.ahead);
  }

  it("a stream of 6,000 events in concurrent requests produces exactly the transitions evaluate predicts", async () => {
    const PROFILES = 200;
    let s = 11;
    const rnd = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
    const types = ["t.a", "t.b", "t.x"];
    const sent = new Map<string, Array<{ eventType: string; timestamp: string }>>();
    const got: MembershipTransition[] = [];
    for (let round = 0; round < 6; round++) {
      // Four requests at once, as concurrent HTTP requests would be: a profile's events in two
      // requests in flight are evaluated one request after the other (its queue slot).
      const requests = Array.from({ length: 4 }, () => {
        const bodies: JsonObject[] = [];
        for (let i = 0; i < 250; i++) {
          const who = `w${Math.floor(rnd() * PROFILES)}`;
          const body = event(who, types[Math.floor(rnd() * types.length)]!, T - LAG - Math.floor(rnd() * 4 * HOUR));
          bodies.push(body);
          const list = sent.get(who) ?? [];
          list.push({ eventType: body["eventType"] as string, timestamp: body["timestamp"] as string });
          sent.set(who, list);
        }
        return bodies;
      });
      for (const t of await Promise.all(requests.map(stream))) got.push(...t);
    }
    await engine.idle();
    assert.ok(calls.applied >= 12, `most requests wrote their transitions with their events (${calls.applied} of ${calls.decided})`);

    const expected = await expectedMemberships(f, sent, pqls, T, () => ({}));
    assert.ok(expected.length > 100, `the stream qualifies many profiles (${expected.length})`);
    assert.deepEqual(got.map((t) => `${t.profileId} ${t.definitionId}`).sort(), expected);
    assert.ok(got.every((t) => t.from === null && t.to === "realized" && t.source === "streaming"));
    const logged = await f.hub.listTransitions(scope, { sources: ["streaming"], limit: 100_000 });
    assert.deepEqual(logged.map((t) => `${t.profileId} ${t.definitionId}`).sort(), expected);
  });

  it("a profile that moved to another graph since its last event: the store applies nothing, the event is evaluated where it went", async () => {
    const a = Object.keys(pqls)[0]!;
    const t = f.clock.now();
    // mover's events are known (state cached, profile id learned), and so are keeper's (older).
    // (t.b: a type some definition reads, so that the engine loads the profile's state.)
    await stream([event("keeper", "t.b", t - LAG)]);
    await stream([event("mover", "t.b", t - LAG)]);
    const moverPid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "mover" }))!;
    const keeperPid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "keeper" }))!;
    // A profile record links the two identities: mover's graph merges into keeper's (the older id).
    await f.store(PROFILES_DS, [{ identityMap: { CRMID: [{ id: "keeper", primary: true }, { id: "mover" }] } }]);
    const into = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "mover" }))!;
    assert.equal(into, keeperPid < moverPid ? keeperPid : moverPid);
    assert.notEqual(into, moverPid, "mover's id went away");
    const before = { ...calls };
    const got = await stream([event("mover", "t.a", t - LAG)]);
    assert.equal(calls.decided, before.decided + 1, "decided ahead, for the old id");
    assert.equal(calls.applied, before.applied, "not applied");
    assert.deepEqual(got.map((x) => [x.profileId, x.definitionId, x.to]), [[into, a, "realized"]]);
    assert.deepEqual((await f.hub.getMemberships(scope, moverPid)).filter((m) => m.definitionId === a), [], "nothing written for the old id");
  });

  it("a failed append drops the states that took its events: the next event is evaluated from the hub", async () => {
    const a = Object.keys(pqls)[0]!;
    const t = f.clock.now();
    await stream([event("fay", "t.b", t - LAG)]);
    calls.failNext = true;
    await assert.rejects(stream([event("fay", "t.a", t - LAG)]), /disk full/);
    await engine.idle();
    const pid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "fay" }))!;
    assert.deepEqual(await f.hub.getMemberships(scope, pid), [], "neither the event nor its transition was written");
    assert.deepEqual((await f.hub.getEvents(scope, { namespace: "crmid", id: "fay" }, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } })).events.map((e) => e.body["eventType"]), ["t.b"]);
    // A state that kept the lost t.a event would say fay already qualifies and write nothing.
    const got = await stream([event("fay", "t.a", t - LAG + 1)]);
    assert.deepEqual(got.map((x) => [x.definitionId, x.from, x.to]), [[a, null, "realized"]]);
  });
});
