/**
 * Durability with the server in a child process: data survives a graceful
 * restart, and `kill -9` while 50 creates are in flight loses none that got a
 * 200. Runs on the store SEGMENTD_TEST_STORE selects.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { DEFS, client, definitionBody, obj, testConfig } from "./helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "./helpers/test-store.js";
import { spawnTs, waitFor, type Spawned } from "./helpers/spawn.js";

let store: TestStoreHandle;
let configFile: string;
const CHILD = "packages/server/test/helpers/child-server.ts";

before(async () => {
  store = await createTestStore("durable");
  const c = testConfig(store);
  c.logLevel = "warn";
  configFile = path.join(store.dataDir, "segmentd.config.json");
  writeFileSync(configFile, JSON.stringify({
    host: c.host, port: 0, dataDir: c.dataDir, ...(c.databaseUrl ? { databaseUrl: c.databaseUrl } : {}), logLevel: c.logLevel,
    auth: c.auth, organizations: c.organizations,
  }));
});
after(async () => store.dispose());

async function startChild(): Promise<{ s: Spawned; url: string }> {
  const s = spawnTs(CHILD, [configFile]);
  const m = await waitFor(s, /READY (\S+)/);
  return { s, url: m[1]! };
}

test("definitions survive a graceful restart; SIGTERM exits 0", async () => {
  const { s, url } = await startChild();
  const a = client(url);
  const created = obj((await a.post(DEFS, definitionBody("survivor"))).json);
  s.child.kill("SIGTERM");
  assert.deepEqual(await s.exited, { code: 0, signal: null });
  const again = await startChild();
  const got = await client(again.url).get(`${DEFS}/${created.id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(got.json, created);
  again.s.child.kill("SIGTERM");
  await again.s.exited;
});

test("kill -9 during 50 concurrent creates loses no acknowledged create", async () => {
  const { s, url } = await startChild();
  const a = client(url);
  const acked: { id: string; name: string }[] = [];
  let responses = 0;
  let killed = false;
  const attempts = Array.from({ length: 50 }, (_, i) =>
    a.post(DEFS, definitionBody(`crash-${i}`)).then(
      (r) => {
        responses++;
        if (r.status === 200) acked.push({ id: obj(r.json).id as string, name: `crash-${i}` });
        else assert.fail(`unexpected status ${r.status}: ${r.text}`);
        if (responses >= 25 && !killed) {
          killed = true;
          s.child.kill("SIGKILL");
        }
      },
      () => undefined, // connection cut by the kill: never acknowledged
    ),
  );
  await Promise.all(attempts);
  const exit = await s.exited;
  assert.equal(exit.signal, "SIGKILL");
  assert.ok(acked.length >= 25, `only ${acked.length} acknowledged`);
  const again = await startChild();
  const b = client(again.url);
  for (const { id, name } of acked) {
    const r = await b.get(`${DEFS}/${id}`);
    assert.equal(r.status, 200, `acknowledged ${id} lost`);
    assert.equal(obj(r.json).name, name);
  }
  // The store is consistent: every listed definition can be read.
  const list = obj((await b.get(`${DEFS}?limit=100`)).json);
  assert.ok((obj(list.page).totalCount as number) >= acked.length + 1);
  again.s.child.kill("SIGTERM");
  assert.equal((await again.s.exited).code, 0);
});
