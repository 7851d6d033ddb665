/**
 * Races: 100 concurrent creates of one name give exactly one 200 (the unique
 * index decides, not a read-then-write check), and concurrent creates cannot
 * overshoot a sandbox limit.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, client, definitionBody, obj, startHarness, type Harness } from "./helpers/server-harness.js";

let h: Harness;
before(async () => {
  h = await startHarness("race", { patch: (c) => { c.organizations[0]!.sandboxes[1]!.limits = { definitions: 30 }; } });
});
after(async () => h.close());

test("100 concurrent creates of one name: exactly one 200, the rest 422", async () => {
  const a = client(h.url);
  const rs = await Promise.all(Array.from({ length: 100 }, (_, i) => a.post(DEFS, definitionBody("same-name", `age > ${i}`))));
  const statuses = rs.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 1);
  assert.equal(statuses.filter((s) => s === 422).length, 99);
  const winner = obj(rs.find((r) => r.status === 200)!.json);
  const list = obj((await a.get(DEFS)).json);
  assert.equal(obj(list.page).totalCount, 1);
  assert.equal(obj((await a.get(`${DEFS}/${winner.id}`)).json).expression && obj(obj((await a.get(`${DEFS}/${winner.id}`)).json).expression).value, obj(winner.expression).value);
});

test("60 concurrent creates against a limit of 30: exactly 30 succeed", async () => {
  const dev = client(h.url, { sandbox: "dev" });
  const rs = await Promise.all(Array.from({ length: 60 }, (_, i) => dev.post(DEFS, definitionBody(`lim-${i}`))));
  assert.equal(rs.filter((r) => r.status === 200).length, 30);
  assert.equal(rs.filter((r) => r.status === 400).length, 30);
  assert.equal(obj(obj((await dev.get(DEFS)).json).page).totalCount, 30);
});
