/**
 * Issue #37, item 1: segment search never freezes the server. The data — 300 definitions
 * with ~8 KB descriptions of distinct words — and its hostile queries (146 × `qqqq~2`, a
 * 256-character `a…a~2`, `/(.*a){20}/`, a 256-character leading wildcard), each sent while two
 * loops measure `/healthz` and another organization's definition list: their p99 stays within
 * 50 ms and 100 ms, and each hostile request ends within its budget with its correct result or
 * its exact refusal, nothing stored. Before #37 these took 3.6–62.5 s with `/healthz` stalled.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { SEARCH_LIMITS } from "../../src/services/search-budget.js";
import { DEFS, ORG_B, TOKEN_B, client, definitionBody, obj, startHarness, type Client, type Harness } from "../helpers/server-harness.js";

const SEARCH = "/data/core/ups/search";
const HEADERS = { "x-ups-search-version": "1.0" };
const DOCS = 300;
const LONG_A = "a".repeat(255);

let h: Harness;
let a: Client;
let b: Client;
/** What was created: id, name, description (the oracle's input). */
const docs: Array<{ id: string; name: string; description: string }> = [];
let bListBefore: unknown;

/** A seeded generator, so that a failure replays. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * ~8 KB: ~6 KB of words of 3–10 letters, nearly all distinct across the sandbox (the largest
 * vocabulary), then ~2 KB of words of 200–300 letters, mostly `a` (what long terms cost most on).
 */
function description(next: () => number, k: number): string {
  const letter = () => String.fromCharCode(97 + Math.floor(next() * 26));
  const out: string[] = [];
  let size = 0;
  while (size < 5800) {
    const n = 3 + Math.floor(next() * 8);
    let w = "";
    for (let i = 0; i < n; i++) w += letter();
    out.push(w);
    size += n + 1;
  }
  // Descriptions hold at most 8,192 characters; leave room for the planted word.
  while (size < 7500) {
    const n = 200 + Math.floor(next() * 101);
    let w = "";
    for (let i = 0; i < n; i++) w += next() < 0.02 ? letter() : "a";
    out.push(w);
    size += n + 1;
  }
  // Two documents hold a 255-letter word of `a`, for the long fuzzy and wildcard terms to find.
  if (k === 7 || k === 123) out.splice(k, 0, LONG_A);
  return out.join(" ");
}

function levenshtein(x: string, y: string): number {
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[y.length]!;
}

/** The oracle: how many documents hold a word (of name or description), or have an id, that `test` accepts. */
function expectedCount(test: (w: string) => boolean): number {
  const wordsOf = (t: string) => t.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return docs.filter((d) => [...wordsOf(d.name), ...wordsOf(d.description), d.id.toLowerCase()].some(test)).length;
}

function p99(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.ceil(s.length * 0.99) - 1]!;
}

/**
 * Runs `work` while one loop calls `/healthz` and another lists org B's definitions, one request
 * at a time each; returns the work's answer, its duration and both loops' latencies.
 */
async function underProbe<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; health: number[]; list: number[] }> {
  let running = true;
  const health: number[] = [];
  const list: number[] = [];
  const loop = async (path: string, out: number[]) => {
    while (running) {
      const t0 = performance.now();
      const r = await b.get(path);
      out.push(performance.now() - t0);
      assert.equal(r.status, 200, `${path}: ${r.text.slice(0, 200)}`);
      await sleep(5);
    }
  };
  const loops = [loop("/healthz", health), loop(DEFS, list)];
  const t0 = performance.now();
  const result = await work();
  const ms = performance.now() - t0;
  running = false;
  await Promise.all(loops);
  return { result, ms, health, list };
}

before(async () => {
  h = await startHarness("search-budget");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
  const next = rng(37);
  const bodies = Array.from({ length: DOCS }, (_, k) => ({ name: `Audience ${String(k).padStart(3, "0")}`, description: description(next, k) }));
  // Six at a time: the store's writes are the cost, not the HTTP round trips.
  for (let k = 0; k < bodies.length; k += 6) {
    const batch = bodies.slice(k, k + 6);
    const made = await Promise.all(batch.map((d) => a.post(DEFS, { ...definitionBody(d.name), description: d.description })));
    made.forEach((r, i) => {
      assert.equal(r.status, 200, r.text.slice(0, 300));
      docs.push({ id: obj(r.json).id as string, ...batch[i]! });
    });
  }
  for (let k = 0; k < 3; k++) assert.equal((await b.post(DEFS, definitionBody(`B audience ${k}`))).status, 200);
  bListBefore = (await b.get(DEFS)).json;
});
after(async () => h.close());

interface Case {
  name: string;
  s: string;
  path: "namespaces" | "entities";
  /** The right answer: a count of matches, or the exact refusal. */
  expect: { count: number } | { status: number; code: string; message: string };
}

function cases(): Case[] {
  const qqqq = Array.from({ length: 146 }, () => "qqqq~2").join(" ");
  const fuzzyQ = expectedCount((w) => Math.abs(w.length - 4) <= 2 && levenshtein("qqqq", w) <= 2);
  const longA = "a".repeat(256);
  return [
    { name: "146 terms qqqq~2 (namespaces)", s: qqqq, path: "namespaces", expect: { count: fuzzyQ } },
    { name: "146 terms qqqq~2 (entities)", s: qqqq, path: "entities", expect: { count: fuzzyQ } },
    { name: "256-character a…a~2", s: `${longA}~2`, path: "namespaces", expect: { count: expectedCount((w) => Math.abs(w.length - 256) <= 2 && levenshtein(longA, w) <= 2) } },
    { name: "256-character leading wildcard", s: `*${LONG_A}`, path: "namespaces", expect: { count: expectedCount((w) => w.endsWith(LONG_A)) } },
    {
      name: "/(.*a){20}/", s: "/(.*a){20}/", path: "namespaces",
      expect: {
        status: 422, code: "SEGMENTD-SEARCH-TOO-COSTLY-422",
        message: `The search term '/(.*a){20}/' is too costly: matching it needs more than ${SEARCH_LIMITS.maxUnits} units of work, the limit of one search. Use a more specific term`,
      },
    },
  ];
}

test("the issue's hostile searches end within their budget while /healthz and another tenant's list stay fast", async () => {
  const all = cases();
  // The oracle found something for the long terms (at least the planted words): the counts prove matching, not emptiness.
  assert.ok((all[2]!.expect as { count: number }).count >= 2);
  assert.ok((all[3]!.expect as { count: number }).count >= 2);
  // The same probes with nothing else running: the machine's own latency, printed beside the figures.
  const idle = await underProbe(() => sleep(3000));
  console.log(`idle: /healthz p99 ${p99(idle.health).toFixed(1)} ms (${idle.health.length}), list p99 ${p99(idle.list).toFixed(1)} ms (${idle.list.length})`);
  // Every latency measured while a hostile request runs, pooled: p99 over a few hundred samples.
  // Three rounds of the cases: one round gives ~100 samples, whose "p99" is their maximum (one
  // collection pause decides it; CI once saw 54 ms so); three make it the fourth largest.
  const health: number[] = [];
  const list: number[] = [];
  for (const c of [...all, ...all, ...all]) {
    const url = c.path === "namespaces"
      ? `${SEARCH}/namespaces?schema.name=_xdm.context.segmentdefinition&s=${encodeURIComponent(c.s)}`
      : `${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=${encodeURIComponent(c.s)}`;
    const probe = await underProbe(() => a.get(url, HEADERS));
    const r = probe.result;
    const seen = `${c.name}: ${probe.ms.toFixed(0)} ms, /healthz p99 ${p99(probe.health).toFixed(1)} ms (${probe.health.length}), list p99 ${p99(probe.list).toFixed(1)} ms (${probe.list.length})`;
    console.log(seen);
    health.push(...probe.health);
    list.push(...probe.list);
    if ("count" in c.expect) {
      assert.equal(r.status, 200, `${c.name}: ${r.text.slice(0, 300)}`);
      const body = obj(r.json);
      const count = c.path === "namespaces"
        ? (body.namespaces as Array<{ namespace: string; count: number }>).find((n) => n.namespace === "AEPSegments")!.count
        : (body.page as { totalCount: number }).totalCount;
      assert.equal(count, c.expect.count, c.name);
    } else {
      assert.equal(r.status, c.expect.status, `${c.name}: ${r.text.slice(0, 300)}`);
      const body = obj(r.json);
      assert.equal(body.type, `https://ns.adobe.com/aep/errors/${c.expect.code}`);
      assert.equal(body.title, c.expect.message);
      assert.deepEqual(obj(body.errors)[String(c.expect.status)], [{ code: c.expect.code, message: c.expect.message }]);
    }
    assert.ok(probe.ms <= SEARCH_LIMITS.deadlineMs + 1000, `${seen}: over the deadline`);
    // A frozen server answers each probe once, after the search: several answers prove it served
    // meanwhile. A search over in a few probe intervals (it took 16 ms once) leaves no time for
    // several answers; its stall, if any, is in the p99 checked below.
    if (probe.ms >= 150) assert.ok(probe.health.length >= 3 && probe.list.length >= 3, `${seen}: the probes ran`);
  }
  const figures = `/healthz p99 ${p99(health).toFixed(1)} ms, org B's list p99 ${p99(list).toFixed(1)} ms over ${health.length} + ${list.length} requests (idle: ${p99(idle.health).toFixed(1)} / ${p99(idle.list).toFixed(1)} ms)`;
  console.log(figures);
  assert.ok(p99(health) <= 50, `/healthz stalled: ${figures}`);
  assert.ok(p99(list) <= 100, `org B's list stalled: ${figures}`);
  // Nothing stored: org A's sandbox holds what it held, org B's list is byte for byte the same.
  const mine = obj((await a.get(`${DEFS}?limit=1`)).json);
  assert.equal(obj(mine.page).totalCount, DOCS);
  assert.deepEqual((await b.get(DEFS)).json, bListBefore);
});
