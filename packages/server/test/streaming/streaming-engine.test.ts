/**
 * Streaming evaluation against the real hub store with a ManualClock: events
 * make profiles enter continuous audiences at once (source streaming), the
 * sweep makes them leave when the window closes without any new event, and
 * only the definitions an event can affect are evaluated.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { evaluate } from "@segmentd/pql";
import { StreamingEngine } from "../../src/streaming/engine.js";
import { EVENTS_DS, PROFILES_DS, event, openFixture, profile, type Fixture } from "./fixtures.js";

const T0 = Date.parse("2026-03-10T10:00:00Z");
const HOUR = 3_600_000;
// Events reach the engine a moment after they happen; PQL's "before now" excludes an event stamped exactly now.
const LAG = 1000;
const scope = { orgId: "", sandboxName: "prod" };

describe("streaming engine", () => {
  let f: Fixture;
  let engine: StreamingEngine;
  let purchases: string;
  let usVisitors: string;
  let usCountry: string;
  let checkoutsToday: string;

  before(async () => {
    f = await openFixture(T0);
    scope.orgId = f.tenant.orgId;
    purchases = await f.define("purchased within the hour", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 1 hours before now)])', { continuous: true });
    usVisitors = await f.define(
      "US visitors",
      'homeAddress.country = "US" and chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 2 hours before now)])',
      { continuous: true },
    );
    usCountry = await f.define("US profiles", 'homeAddress.country = "US"', { continuous: true });
    checkoutsToday = await f.define("checkouts today", 'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.checkouts", false)) WHEN(today)])', { continuous: true });
    // A batch-only definition is never evaluated by the streaming engine.
    await f.define("batch only", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 1 hours before now)])', {});
    engine = new StreamingEngine({ catalog: f.catalog, hub: f.hub, clock: f.clock });
  });
  after(async () => {
    await engine.stop();
    await f.close();
  });

  it("an event makes the profile enter at once, with a streaming transition", async () => {
    const records = await f.store(EVENTS_DS, [event("alice", "commerce.purchases", T0 - LAG)]);
    const transitions = await engine.onRecordsStored(f.tenant, records);
    assert.equal(transitions.length, 1);
    assert.deepEqual(
      { def: transitions[0]!.definitionId, from: transitions[0]!.from, to: transitions[0]!.to, source: transitions[0]!.source, at: transitions[0]!.at },
      { def: purchases, from: null, to: "realized", source: "streaming", at: new Date(T0).toISOString() },
    );
    const pid = await f.hub.findProfileId(scope, { namespace: "crmid", id: "alice" });
    const members = await f.hub.getMemberships(scope, pid!);
    assert.deepEqual(members.map((m) => [m.definitionId, m.status]), [[purchases, "realized"]]);
  });

  it("the sweep writes the exit when the window closes, without a new event", async () => {
    f.clock.set(T0 - LAG + HOUR - 1000);
    assert.deepEqual(await engine.sweep(), [], "still inside the window");
    f.clock.set(T0 - LAG + HOUR + 30_000);
    const exits = await engine.sweep();
    assert.deepEqual(exits.map((t) => [t.definitionId, t.from, t.to, t.source]), [[purchases, "realized", "exited", "streaming"]]);
    // The exit is at most 60 s after the window closed.
    assert.ok(Date.parse(exits[0]!.at) - (T0 - LAG + HOUR) <= 60_000);
    const pid = await f.hub.findProfileId(scope, { namespace: "crmid", id: "alice" });
    assert.deepEqual((await f.hub.getMemberships(scope, pid!)).map((m) => m.status), ["exited"]);
  });

  it("a profile record with the attribute completes a profile+event definition", async () => {
    const t = f.clock.now();
    const evs = await f.store(EVENTS_DS, [event("bob", "web.pageview", t - LAG)]);
    assert.deepEqual(await engine.onRecordsStored(f.tenant, evs), [], "no country yet");
    const prof = await f.store(PROFILES_DS, [profile("bob", { homeAddress: { country: "US" } })]);
    const transitions = await engine.onRecordsStored(f.tenant, prof);
    assert.deepEqual(transitions.map((x) => x.definitionId).sort(), [usCountry, usVisitors].sort());
    // The attribute change out of the US exits both.
    f.clock.advance(60_000);
    const prof2 = await f.store(PROFILES_DS, [profile("bob", { homeAddress: { country: "FR" } })]);
    const exits = await engine.onRecordsStored(f.tenant, prof2);
    assert.deepEqual(exits.map((x) => [x.definitionId, x.to]).sort(), [[usCountry, "exited"], [usVisitors, "exited"]].sort());
  });

  it("calendar windows (today) exit at the sweep after UTC midnight", async () => {
    const t = Date.parse("2026-03-10T23:30:00Z");
    f.clock.set(t);
    const recs = await f.store(EVENTS_DS, [event("carol", "COMMERCE.CHECKOUTS", t - LAG)]);
    assert.deepEqual((await engine.onRecordsStored(f.tenant, recs)).map((x) => x.definitionId), [checkoutsToday]);
    f.clock.set(Date.parse("2026-03-10T23:59:59Z"));
    assert.deepEqual(await engine.sweep(), []);
    f.clock.set(Date.parse("2026-03-11T00:00:20Z"));
    assert.deepEqual((await engine.sweep()).map((x) => [x.definitionId, x.to]), [[checkoutsToday, "exited"]]);
  });

  it("onProfilesChanged re-evaluates a profile whose data was deleted", async () => {
    const t = Date.parse("2026-03-11T09:00:00Z");
    f.clock.set(t);
    const recs = await f.store(PROFILES_DS, [profile("dave", { homeAddress: { country: "US" } })]);
    assert.deepEqual((await engine.onRecordsStored(f.tenant, recs)).map((x) => x.definitionId), [usCountry]);
    const pid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "dave" }))!;
    // A lifecycle delete removes the attribute; records do not describe that change.
    const removed = await f.hub.updateFields(scope, { datasetId: PROFILES_DS, identities: [{ namespace: "crmid", id: "dave" }], remove: ["homeAddress.country"] });
    assert.deepEqual(removed.profileIds, [pid]);
    const exits = await engine.onProfilesChanged(f.tenant, removed.profileIds);
    assert.deepEqual(exits.map((x) => [x.definitionId, x.from, x.to, x.source]), [[usCountry, "realized", "exited", "streaming"]]);
  });

  it("memberships equal what evaluate says for the profile's events, for a random stream", async () => {
    // A deterministic pseudo-random stream over 5 profiles and 3 event types.
    let s = 42;
    const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
    const types = ["commerce.purchases", "web.pageview", "other.thing"];
    const start = Date.parse("2026-03-12T08:00:00Z");
    const sent = new Map<string, Array<{ eventType: string; timestamp: string }>>();
    for (let i = 0; i < 40; i++) {
      f.clock.set(start + i * 7 * 60_000);
      const who = `p${Math.floor(rnd() * 5)}`;
      const body = event(who, types[Math.floor(rnd() * 3)]!, f.clock.now() - LAG);
      sent.set(who, [...(sent.get(who) ?? []), { eventType: body["eventType"] as string, timestamp: body["timestamp"] as string }]);
      await engine.onRecordsStored(f.tenant, await f.store(EVENTS_DS, [body]));
      await engine.sweep();
    }
    const pql = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 1 hours before now)])';
    for (const [who, evs] of sent) {
      const pid = await f.hub.findProfileId(scope, { namespace: "crmid", id: who });
      const m = (await f.hub.getMemberships(scope, pid!)).find((x) => x.definitionId === purchases);
      const expected = evaluate(pql, { profile: {}, events: evs, now: f.clock.now() }) === true;
      assert.equal(m?.status === "realized", expected, `profile ${who}`);
    }
  });

  it("a select-form event condition qualifies like its chain form (the top level is a boolean position)", async () => {
    const t = Date.parse("2026-03-13T09:00:00Z");
    f.clock.set(t);
    // `compile` yields the matching events for this spelling; membership needs its boolean reading.
    const selectForm = await f.define(
      "email openers (select)",
      'select X from xEvent where X.eventType = "directMarketing.emailOpened" and X.timestamp occurs < 2 hours before now',
      { continuous: true },
    );
    const recs = await f.store(EVENTS_DS, [event("erin", "directMarketing.emailOpened", t - LAG)]);
    const got = await engine.onRecordsStored(f.tenant, recs);
    assert.deepEqual(got.map((x) => [x.definitionId, x.to]), [[selectForm, "realized"]]);
  });
});
