/**
 * A record whose evaluation waits for its profile's queue slot (a backfill holds the profile) is
 * evaluated on the definitions as they are when the slot is its own: with the set taken when it
 * arrived, an edit made meanwhile (whose backfill wrote the profile's new membership) was undone
 * by the old expression (seen as a rare mismatch in backfill-stream.test.ts on PostgreSQL).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { StreamingEngine } from "../../src/streaming/engine.js";
import type { MembershipTransition } from "../../src/profiles/types.js";
import { PROFILE_SCHEMA_CLASS } from "../../src/services/merge-policies.js";
import { PROFILES_DS, openFixture, profile, type Fixture } from "./fixtures.js";

const T0 = Date.parse("2026-03-10T10:00:00Z");
const scope = { orgId: "", sandboxName: "prod" };

describe("streaming engine and a definition changed while a record waits", () => {
  let f: Fixture;
  let engine: StreamingEngine;
  before(async () => {
    f = await openFixture(T0);
    scope.orgId = f.tenant.orgId;
    engine = new StreamingEngine({ catalog: f.catalog, hub: f.hub, clock: f.clock });
  });
  after(async () => {
    await engine.stop();
    await f.close();
  });

  const input = (pql: string) => ({
    name: "by country", schema: { name: PROFILE_SCHEMA_CLASS }, expression: { type: "PQL" as const, format: "pql/text" as const, value: pql },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
  });

  it("is evaluated on the definition as edited, not as it was when the record arrived", async () => {
    const id = await f.define("by country", 'homeAddress.country = "US"', { continuous: true });
    assert.deepEqual(await engine.onRecordsStored(f.tenant, await f.store(PROFILES_DS, [profile("carol", { homeAddress: { country: "FR" } })])), [], "not a US profile");
    const pid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "carol" }))!;
    const moved = await f.store(PROFILES_DS, [profile("carol", { homeAddress: { country: "FR", city: "Paris" } })]);
    let waiting!: Promise<MembershipTransition[]>;
    const res = await engine.holdIdle(f.tenant, [pid], async (held) => {
      assert.deepEqual(held, [pid]);
      // The record arrives while the profile is held: it waits for the slot.
      waiting = engine.onRecordsStored(f.tenant, moved);
      await new Promise((r) => setTimeout(r, 30));
      // The edit, then its backfill's write of carol (now a member).
      await f.definitions.overwrite(f.tenant, id, input('homeAddress.country = "FR"'));
      const at = f.clock.now();
      const written = await f.hub.applyMembershipChanges(scope, [{ profileId: pid, definitionId: id, status: "realized", source: "backfill", at }]);
      assert.equal(written.length, 1);
      return [{ profileId: pid, definitionId: id, status: "realized" as const, source: "backfill" as const, at }];
    });
    assert.deepEqual(res.busy, []);
    assert.deepEqual(await waiting, [], "the record changes nothing under the edited definition");
    assert.deepEqual((await f.hub.getMemberships(scope, pid)).map((m) => [m.definitionId, m.status]), [[id, "realized"]]);
  });
});
