/** Platform seams: the in-process bus and the manual clock. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { InProcessBus, type BusTopic } from "../src/platform/bus.js";
import { ManualClock } from "../src/platform/clock.js";

const event = { tenant: { orgId: "o", sandboxId: "s" }, change: "created" as const, definitionId: "d1" };

test("a failing subscriber neither throws into the publisher nor stops the others", async () => {
  const errors: [BusTopic, string][] = [];
  const bus = new InProcessBus((topic, err) => errors.push([topic, (err as Error).message]));
  const got: string[] = [];
  bus.subscribe("definition.changed", () => {
    throw new Error("sync boom");
  });
  bus.subscribe("definition.changed", async () => {
    throw new Error("async boom");
  });
  const off = bus.subscribe("definition.changed", (e) => {
    got.push(e.definitionId);
  });
  bus.publish("definition.changed", event);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(got, ["d1"]);
  assert.deepEqual(errors.sort(), [["definition.changed", "async boom"], ["definition.changed", "sync boom"]]);
  off();
  bus.publish("definition.changed", { ...event, definitionId: "d2" });
  assert.deepEqual(got, ["d1"]);
  bus.publish("mergePolicy.changed", { tenant: event.tenant, change: "deleted", mergePolicyId: "m" }); // no subscribers: fine
});

test("ManualClock moves only when told to", () => {
  const c = new ManualClock(new Date("2028-02-28T23:59:59.000Z"));
  assert.equal(c.now(), Date.parse("2028-02-28T23:59:59.000Z"));
  c.advance(1000);
  assert.equal(new Date(c.now()).toISOString(), "2028-02-29T00:00:00.000Z");
  c.set(0);
  assert.equal(c.now(), 0);
});
