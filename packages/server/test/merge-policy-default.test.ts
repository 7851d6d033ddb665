/**
 * Issue #37, item 8: a schema class that has a default merge policy keeps exactly one. The
 * default cannot be unset (PUT or PATCH `default: false`, or a PUT that leaves `default` out),
 * moved to another schema class, or deleted: 400 `SEGMENTD-MERGE-POLICY-400` naming the policy,
 * the class and the way out, and the policy is unchanged. Making another policy the default
 * unsets the previous one in the same transaction; concurrent requests never leave zero or two.
 * Before, PUT/PATCH `default: false` left the sandbox without a default and every definition
 * create without `mergePolicyId` answered 400.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, MPS, arr, client, definitionBody, obj, startHarness, type Client, type Harness, type Res } from "./helpers/server-harness.js";

const PROFILE = "_xdm.context.profile";
const EVENT = "_xdm.context.experienceevent";
const CODE = "SEGMENTD-MERGE-POLICY-400";

let h: Harness;
let a: Client;
let bootstrapId: string;

const policy = (name: string, extra: Record<string, unknown> = {}) => ({
  name, schema: { name: PROFILE }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" }, ...extra,
});

function rule(id: string, schema: string, what: string, next: string): string {
  return `Merge policy '${id}' is the default merge policy of schema class '${schema}' in sandbox 'prod', and a schema class always keeps one default: ${what}. ${next}`;
}
const unsetMessage = (id: string, schema = PROFILE) => rule(id, schema, "its default cannot be set to false", "Make another merge policy of the class the default instead; that unsets this one.");
const deleteMessage = (id: string, schema = PROFILE) => rule(id, schema, "it cannot be deleted", "Make another merge policy of the class the default first.");
const moveMessage = (id: string, schema = PROFILE) => rule(id, schema, "its schema.name cannot change", "Make another merge policy of the class the default first.");

/** The UPS error of a response: its code and message. */
function error(r: Res): { status: number; code: string; message: string } {
  const body = obj(r.json);
  const [item] = arr(obj(body.errors)[String(r.status)]) as Array<{ code: string; message: string }>;
  assert.equal(body.title, item!.message);
  return { status: r.status, code: item!.code, message: item!.message };
}

async function read(id: string): Promise<Record<string, unknown>> {
  const r = await a.get(`${MPS}/${id}`);
  assert.equal(r.status, 200, r.text);
  return obj(r.json);
}

/** The ids of the sandbox's default policies of a schema class. */
async function defaults(schema = PROFILE): Promise<string[]> {
  const r = await a.get(`${MPS}?default=true&schema.name=${schema}&limit=100`);
  assert.equal(r.status, 200, r.text);
  return arr(obj(r.json).children).map((c) => obj(c).id as string);
}

async function create(name: string, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  const r = await a.post(MPS, policy(name, extra));
  assert.equal(r.status, 200, r.text);
  return obj(r.json);
}

/** A definition created without mergePolicyId gets the sandbox's default. */
async function definitionPolicy(name: string): Promise<unknown> {
  const r = await a.post(DEFS, definitionBody(name));
  assert.equal(r.status, 200, r.text);
  return obj(r.json).mergePolicyId;
}

before(async () => {
  h = await startHarness("mp-default");
  a = client(h.url);
  const ids = await defaults();
  assert.equal(ids.length, 1);
  bootstrapId = ids[0]!;
});
after(async () => h.close());

test("PUT default:false, or a PUT without default, on the only default: 400 with the rule; the policy is unchanged and still used", async () => {
  const before = await read(bootstrapId);
  for (const body of [policy("renamed", { default: false, isActiveOnEdge: true }), policy("renamed", { isActiveOnEdge: true })]) {
    const r = await a.put(`${MPS}/${bootstrapId}`, body);
    assert.deepEqual(error(r), { status: 400, code: CODE, message: unsetMessage(bootstrapId) });
    assert.deepEqual(await read(bootstrapId), before);
  }
  // The same PUT keeping default:true is accepted.
  const ok = await a.put(`${MPS}/${bootstrapId}`, policy("Default Timebased", { default: true, isActiveOnEdge: true, identityGraph: { type: "pdg" } }));
  assert.equal(ok.status, 200, ok.text);
  assert.equal(obj(ok.json).version, (before.version as number) + 1);
  assert.deepEqual(await defaults(), [bootstrapId]);
  assert.equal(await definitionPolicy("after-put"), bootstrapId);
});

test("PATCH /default false (and Adobe's single-operation form) on the only default: 400; unchanged", async () => {
  const before = await read(bootstrapId);
  for (const body of [[{ op: "replace", path: "/default", value: false }], { op: "replace", path: "/default", value: false },
    [{ op: "replace", path: "/name", value: "x" }, { op: "replace", path: "/default", value: false }]]) {
    const r = await a.patch(`${MPS}/${bootstrapId}`, body);
    assert.deepEqual(error(r), { status: 400, code: CODE, message: unsetMessage(bootstrapId) }, JSON.stringify(body));
    assert.deepEqual(await read(bootstrapId), before);
  }
  assert.deepEqual(await defaults(), [bootstrapId]);
  assert.equal(await definitionPolicy("after-patch"), bootstrapId);
});

test("moving the default to another schema class is refused: the class would lose its default", async () => {
  const before = await read(bootstrapId);
  const r = await a.patch(`${MPS}/${bootstrapId}`, [{ op: "replace", path: "/schema/name", value: EVENT }]);
  assert.deepEqual(error(r), { status: 400, code: CODE, message: moveMessage(bootstrapId) });
  assert.deepEqual(await read(bootstrapId), before);
  assert.deepEqual(await defaults(EVENT), []);
});

test("making B the default (create, PUT, PATCH) unsets A in the same write; DELETE of the default is 400 and it stays", async () => {
  const b = await create("b-default", { default: true });
  assert.deepEqual(await defaults(), [b.id]);
  const a1 = await read(bootstrapId);
  assert.equal(a1.default, false);
  const deleted = await a.delete(`${MPS}/${b.id as string}`);
  assert.deepEqual(error(deleted), { status: 400, code: CODE, message: deleteMessage(b.id as string) });
  assert.deepEqual(await read(b.id as string), b);
  assert.equal(await definitionPolicy("uses-b"), b.id);

  // A non-default is made the default by PUT, then by PATCH: each time the previous one flips.
  const c = await create("c");
  const put = await a.put(`${MPS}/${c.id as string}`, policy("c", { default: true }));
  assert.equal(put.status, 200, put.text);
  assert.deepEqual(await defaults(), [c.id]);
  const bAfter = await read(b.id as string);
  assert.deepEqual([bAfter.default, bAfter.version], [false, (b.version as number) + 1]);
  const patch = await a.patch(`${MPS}/${bootstrapId}`, [{ op: "replace", path: "/default", value: true }]);
  assert.equal(patch.status, 200, patch.text);
  assert.deepEqual(await defaults(), [bootstrapId]);
  assert.equal((await read(c.id as string)).default, false);
  // No longer the default, B is unset and C deleted freely (B is still used by the definition "uses-b").
  assert.equal((await a.patch(`${MPS}/${b.id as string}`, [{ op: "replace", path: "/default", value: false }])).status, 200);
  assert.equal((await a.delete(`${MPS}/${c.id as string}`)).status, 200);
  assert.equal((await a.get(`${MPS}/${c.id as string}`)).status, 404);
  assert.deepEqual(await defaults(), [bootstrapId]);
});

test("defaults are per schema class: an event-class default leaves the profile default alone and is kept the same way", async () => {
  const ev = await create("event-default", { schema: { name: EVENT }, default: true });
  assert.deepEqual(await defaults(EVENT), [ev.id]);
  assert.deepEqual(await defaults(), [bootstrapId]);
  const r = await a.put(`${MPS}/${ev.id as string}`, policy("event-default", { schema: { name: EVENT }, default: false }));
  assert.deepEqual(error(r), { status: 400, code: CODE, message: unsetMessage(ev.id as string, EVENT) });
  const d = await a.delete(`${MPS}/${ev.id as string}`);
  assert.deepEqual(error(d), { status: 400, code: CODE, message: deleteMessage(ev.id as string, EVENT) });
  assert.deepEqual(await read(ev.id as string), ev);
});

test("concurrent requests that set and unset defaults leave exactly one default each round", async () => {
  const ids = [bootstrapId, ...await Promise.all(["k1", "k2", "k3"].map(async (n) => (await create(n)).id as string))];
  for (let round = 0; round < 4; round++) {
    const requests: Array<Promise<[string, boolean, Res]>> = [];
    for (const id of ids) {
      requests.push(a.patch(`${MPS}/${id}`, [{ op: "replace", path: "/default", value: true }]).then((r) => [id, true, r]));
      requests.push(a.patch(`${MPS}/${id}`, [{ op: "replace", path: "/default", value: false }]).then((r) => [id, false, r]));
    }
    for (const [id, value, r] of await Promise.all(requests)) {
      if (value || r.status === 200) {
        assert.equal(r.status, 200, `${id} default:${value}: ${r.text}`);
        continue;
      }
      // Unsetting is refused exactly when the policy was the default at that moment.
      assert.deepEqual(error(r), { status: 400, code: CODE, message: unsetMessage(id) });
    }
    const now = await defaults();
    assert.equal(now.length, 1, `round ${round}: ${JSON.stringify(now)}`);
    assert.equal(await definitionPolicy(`round-${round}`), now[0]);
  }
});
