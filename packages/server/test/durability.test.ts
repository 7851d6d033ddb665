/**
 * Durability with the server in a child process: data survives a graceful
 * restart, and `kill -9` while 50 creates are in flight loses none that got a
 * 200. Runs on the store SEGMENTD_TEST_STORE selects.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, client, definitionBody, obj } from "./helpers/server-harness.js";
import { childFixture, type ChildFixture } from "./helpers/child-fixture.js";

let fx: ChildFixture;

before(async () => {
  fx = await childFixture("durable");
});
after(async () => fx.dispose());

function startChild(): ReturnType<ChildFixture["start"]> {
  return fx.start();
}

async function fireCreates(url: string, prefix: string, n: number, onResponse: (count: number) => void) {
  const a = client(url);
  const acked: { id: string; name: string }[] = [];
  const refused: number[] = [];
  let responses = 0;
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      a.post(DEFS, definitionBody(`${prefix}-${i}`)).then(
        (r) => {
          responses++;
          if (r.status === 200) acked.push({ id: obj(r.json).id as string, name: `${prefix}-${i}` });
          else refused.push(r.status);
          onResponse(responses);
        },
        () => undefined, // connection cut: never acknowledged
      ),
    ),
  );
  return { acked, refused };
}

async function expectAll(url: string, acked: { id: string; name: string }[]) {
  const b = client(url);
  for (const { id, name } of acked) {
    const r = await b.get(`${DEFS}/${id}`);
    assert.equal(r.status, 200, `acknowledged ${id} lost`);
    assert.equal(obj(r.json).name, name);
  }
}

test("kill -9 during 50 creates loses no acknowledged create; SIGTERM finishes in-flight requests and exits 0", async () => {
  // 1. kill -9 while 50 creates are in flight.
  const first = await startChild();
  const survivor = obj((await client(first.url).post(DEFS, definitionBody("survivor"))).json);
  let killed = false;
  const crash = await fireCreates(first.url, "crash", 50, (n) => {
    if (n >= 25 && !killed) {
      killed = true;
      first.s.child.kill("SIGKILL");
    }
  });
  assert.equal((await first.s.exited).signal, "SIGKILL");
  assert.deepEqual(crash.refused, [], "no create failed before the kill");
  assert.ok(crash.acked.length >= 25, `only ${crash.acked.length} acknowledged`);

  // 2. Restart on the same data: everything acknowledged is there.
  const second = await startChild();
  await expectAll(second.url, [{ id: survivor.id as string, name: "survivor" }, ...crash.acked]);

  // 3. SIGTERM while 30 creates are in flight: accepted ones complete (200) and
  //    persist, later ones are refused (503) or never connect; exit code 0.
  let termed = false;
  const term = await fireCreates(second.url, "term", 30, (n) => {
    if (n >= 5 && !termed) {
      termed = true;
      second.s.child.kill("SIGTERM");
    }
  });
  assert.deepEqual(await second.s.exited, { code: 0, signal: null });
  assert.ok(term.refused.every((st) => st === 503), `unexpected statuses ${term.refused.join(",")}`);
  assert.ok(term.acked.length >= 5);

  const third = await startChild();
  await expectAll(third.url, [...crash.acked, ...term.acked]);
  const list = obj((await client(third.url).get(`${DEFS}?limit=1`)).json);
  assert.ok((obj(list.page).totalCount as number) >= 1 + crash.acked.length + term.acked.length);
  third.s.child.kill("SIGTERM");
  assert.equal((await third.s.exited).code, 0);
});
