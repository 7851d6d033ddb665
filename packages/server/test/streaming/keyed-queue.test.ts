import { test } from "node:test";
import assert from "node:assert/strict";
import { KeyedQueue } from "../../src/streaming/keyed-queue.js";

test("a key's tasks run one at a time in arrival order; other keys run meanwhile", async () => {
  const q = new KeyedQueue();
  const seen: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const a1 = q.run("a", async () => { await gate; seen.push("a1"); });
  const a2 = q.run("a", async () => { seen.push("a2"); });
  await q.run("b", async () => { seen.push("b"); });
  assert.deepEqual(seen, ["b"]);
  open();
  await Promise.all([a1, a2]);
  assert.deepEqual(seen, ["b", "a1", "a2"]);
  assert.equal(q.busy("a"), false);
});

test("holdIdle holds the idle keys until released, leaves the busy ones, and frees them after", async () => {
  const q = new KeyedQueue();
  let openBusy!: () => void;
  const busyTask = q.run("busy", () => new Promise<void>((r) => (openBusy = r)));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  assert.deepEqual(q.holdIdle(["x", "busy", "y"], released), ["x", "y"]);
  assert.equal(q.busy("x"), true);
  const seen: string[] = [];
  const x = q.run("x", async () => { seen.push("x"); });
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(seen, [], "a held key's task waits for the release");
  release();
  await x;
  assert.deepEqual(seen, ["x"]);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(q.busy("y"), false, "a held key with nothing queued is free after the release");
  assert.equal(q.busy("busy"), true, "the busy key was not taken");
  openBusy();
  await busyTask;
  await q.idle();
  assert.equal(q.busy("busy"), false);
});
