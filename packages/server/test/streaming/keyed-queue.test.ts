import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { KeyedQueue } from "../../src/streaming/keyed-queue.js";

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("keyed queue holds", () => {
  it("holds idle keys until released: their tasks wait, others run; busy and already held keys are answered back", async () => {
    const q = new KeyedQueue();
    const ran: string[] = [];
    let finishA!: () => void;
    void q.run("a", () => new Promise<void>((r) => (finishA = r)));
    const first = q.hold(["a", "b", "c", "b"]);
    assert.deepEqual(first.busy, [0, 3], "a is running, b is listed twice");
    const second = q.hold(["c", "d"]);
    assert.deepEqual(second.busy, [0], "c is held by the first");
    const b = q.run("b", async () => void ran.push("b"));
    const d = q.run("d", async () => void ran.push("d"));
    const e = q.run("e", async () => void ran.push("e"));
    await e;
    await tick();
    assert.deepEqual(ran, ["e"]);
    assert.equal(q.busy("b"), true, "a task waiting for the release is queued");
    first.release();
    await b;
    assert.deepEqual(ran, ["e", "b"]);
    second.release();
    second.release();
    await d;
    assert.deepEqual(ran, ["e", "b", "d"]);
    finishA();
    await q.idle();
    assert.deepEqual(q.hold(["a", "b", "c", "d"]).busy, [], "nothing held or running any more");
  });
});

describe("keyed queue settled", () => {
  it("waits for the tasks of its prefix queued when called, not for later ones nor other prefixes", async () => {
    const q = new KeyedQueue();
    const finish = new Map<string, () => void>();
    const task = (k: string) => q.run(k, () => new Promise<void>((r) => finish.set(k, r)));
    void task("t1\u0000a");
    void task("t2\u0000a");
    let settled = false;
    const s = q.settled("t1\u0000").then(() => (settled = true));
    void task("t1\u0000b");
    await tick();
    finish.get("t2\u0000a")!();
    await tick();
    assert.equal(settled, false, "t1's task queued before is still running");
    finish.get("t1\u0000a")!();
    await s;
    assert.equal(settled, true, "the task queued later (t1 b) is not waited for");
    finish.get("t1\u0000b")!();
    await q.idle();
  });
});
