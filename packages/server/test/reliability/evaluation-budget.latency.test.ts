/**
 * Issue #37, item 2: expressions of polynomial cost never block the server. Over real HTTP on
 * either store, with 300 profiles, one of them with 3,000 events:
 * - three bindings over xEvent (and `exists` nested three deep) are refused at every door that
 *   would evaluate or store them — definition create and PATCH, audience create, draft explain,
 *   preview, builder estimate, edit impact — with 400 SEGMENTD-PQL-400 / PQL_TOO_COSTLY naming the construct, and
 *   eligibility reports it as a diagnostic; nothing is stored; meanwhile `/healthz` and another
 *   organization's definition list keep p99 ≤ 50 ms / ≤ 100 ms;
 * - two bindings (E²) are accepted and evaluate correctly; on the 3,000-event profile the
 *   evaluation stops at the per-profile budget with 422 SEGMENTD-EVALUATION-BUDGET-422, the
 *   server staying responsive;
 * - a definition accepted before the rule (a sandbox whose bound let it in) does not freeze the
 *   server when its batch job runs: the job fails at the per-profile budget with a clear error.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  DEFS,
  EVENT_CLASS,
  ORG_B,
  PROFILE_CLASS,
  TOKEN_B,
  arr,
  client,
  definitionBody,
  obj,
  profileDataset,
  runSegmentJob,
  startHarness,
  xdmMessage,
  type Client,
  type Harness,
} from "../helpers/server-harness.js";
import { p99, probeLatency } from "../helpers/latency-probe.js";

const THREE = 'exists X from xEvent, Y from xEvent, Z from xEvent : X.timestamp < Y.timestamp and Y.timestamp < Z.timestamp and Z.eventType = "zz"';
const NESTED = 'exists X from xEvent : exists Y from xEvent : exists Z from xEvent : X.timestamp < Y.timestamp and Y.timestamp < Z.timestamp and Z.eventType = "zz"';
const TWO = 'exists X from xEvent, Y from xEvent : X.eventType = "view" and Y.eventType = "buy" and X.timestamp < Y.timestamp';
const BIG = "big@example.com";
const BIG_EVENTS = 3000;
const SMALL = 299;
const T0 = Date.UTC(2026, 0, 1);

/** The refusal's item for `text` (its first 117 characters are the construct shown). */
function costlyItem(text: string): { code: string; message: string } {
  const shown = text.length > 120 ? `${text.slice(0, 117)}...` : text;
  const units = (10_000 + 10_000 ** 2 + 10_000 ** 3).toLocaleString("en-US");
  return {
    code: "PQL_TOO_COSTLY",
    message: `line 1, column 1: '${shown}' nests 3 loops over xEvent (E^3), so it may need ${units} units of work per profile at 10,000 events per profile; the limit is 1,000,000,000. Combine the conditions into fewer bindings over xEvent (two are allowed), or split the definition`,
  };
}

function assertRefused(r: { status: number; json: unknown; text: string }, title: string, item: { code: string; message: string }): void {
  assert.equal(r.status, 400, r.text);
  const body = obj(r.json);
  assert.deepEqual([body.type, body.title], ["https://ns.adobe.com/aep/errors/SEGMENTD-PQL-400", title], r.text);
  // The UPS shape carries the diagnostic as the error item, with its position.
  const items = arr(obj(body.errors)["400"]).map(obj);
  assert.deepEqual(items.map((i) => [i.code, i.message, i.line, i.column]), [[item.code, item.message, 1, 1]], r.text);
}

function probe(url: string) {
  const b = client(url, { token: TOKEN_B, org: ORG_B });
  return probeLatency(url, () => b.get(`${DEFS}?limit=10`));
}

/**
 * The probes on the idle server, measured once before the tests and printed beside the loaded
 * figures. This suite runs alone (`npm run test:latency`), so the bounds are the acceptance's own.
 */
let idle: { health: number; other: number } = { health: 0, other: 0 };

/** p99 of /healthz ≤ `health` ms and of org B's list ≤ `other` ms (the acceptance: 50 / 100). */
function assertResponsive(l: { health: number[]; other: number[] }, minSamples: number, health = 50, other = 100): void {
  assert.ok(l.health.length >= minSamples && l.other.length >= minSamples, `too few samples: ${l.health.length} / ${l.other.length}`);
  const show = (xs: number[]) => `p99 ${p99(xs).toFixed(1)} ms over ${xs.length} samples (median ${[...xs].sort((x, y) => x - y)[xs.length >> 1]!.toFixed(1)}, max ${Math.max(...xs).toFixed(1)})`;
  const [hb, ob] = [health, other];
  console.log(`/healthz ${show(l.health)}, bound ${hb.toFixed(1)}; org B's list ${show(l.other)}, bound ${ob.toFixed(1)} (idle p99 ${idle.health.toFixed(1)} / ${idle.other.toFixed(1)})`);
  assert.ok(p99(l.health) <= hb, `/healthz ${show(l.health)}; bound ${hb.toFixed(1)} (idle p99 ${idle.health.toFixed(1)})`);
  assert.ok(p99(l.other) <= ob, `org B's definition list ${show(l.other)}; bound ${ob.toFixed(1)} (idle p99 ${idle.other.toFixed(1)})`);
}

/**
 * A request stopped at the per-profile budget holds the event loop for that budget (50 ms by
 * default), plus the reading of the profile's 3,000 events and (jobs) their row objects, about
 * 100 ms on this project's loaded 2-vCPU host: probes caught behind it wait as long (measured
 * p99 147–170 ms). Before the budget such a request held it for 30 s to minutes.
 */
const STOPPED_STALL_MS = 250;

describe("evaluation budget: polynomial expressions never block the server", () => {
  let h: Harness;
  let a: Client;
  let loose: Client;
  before(async () => {
    // Sandbox dev stands for definitions accepted before the cost model: its bound lets E³ in.
    h = await startHarness("evaluation-budget", {
      patch: (c) => {
        c.organizations[0]!.sandboxes[1]!.limits = { evaluationCost: Number.MAX_SAFE_INTEGER };
      },
    });
    a = client(h.url);
    loose = client(h.url, { sandbox: "dev" });
    const b = client(h.url, { token: TOKEN_B, org: ORG_B });
    for (let i = 0; i < 3; i++) assert.equal((await b.post(DEFS, definitionBody(`org B ${i}`))).status, 200);
    for (const c of [a, loose]) {
      const profiles = await profileDataset(c, "crm", PROFILE_CLASS);
      const events = await profileDataset(c, "web", EVENT_CLASS);
      const id = (email: string) => ({ identityMap: { Email: [{ id: email, primary: true }] } });
      const people = [BIG, ...Array.from({ length: SMALL }, (_, i) => `p${i}@example.com`)];
      const messages = people.map((email) => xdmMessage(profiles, PROFILE_CLASS, { ...id(email), person: { name: email } }));
      // The big profile's events: all "view", none "zz" or "buy", in time order.
      for (let i = 0; i < BIG_EVENTS; i++) messages.push(xdmMessage(events, EVENT_CLASS, { ...id(BIG), _id: `big-${i}`, eventType: "view", timestamp: new Date(T0 + i * 60_000).toISOString() }));
      // p0 viewed then bought (TWO holds); p1 bought then viewed (it does not).
      for (const [email, kinds] of [["p0@example.com", ["view", "buy"]], ["p1@example.com", ["buy", "view"]]] as const) {
        kinds.forEach((eventType, k) => messages.push(xdmMessage(events, EVENT_CLASS, { ...id(email), _id: `${email}-${k}`, eventType, timestamp: new Date(T0 + k * 60_000).toISOString() })));
      }
      for (let i = 0; i < messages.length; i += 1000) {
        const r = await c.post(`/collection/batch/evaluation-budget`, { messages: messages.slice(i, i + 1000) });
        assert.equal(r.status, 207, r.text);
        for (const m of arr(obj(r.json).responses)) assert.ok(obj(m).status === undefined || obj(m).status === 200, JSON.stringify(m));
      }
      const seen = await c.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: 'person.name = "x"' }, entityId: BIG, entityIdNS: "Email" });
      assert.deepEqual(obj(obj(seen.json).events), { read: BIG_EVENTS, truncated: false }, seen.text);
    }
    // The ingestion's own after-work (change feeds, streaming evaluation, the store's writes) settles
    // before anything is measured; then the probes' idle figures.
    await new Promise((r) => setTimeout(r, 2000));
    const quiet = probe(h.url);
    await new Promise((r) => setTimeout(r, 3000));
    const q = await quiet.stop();
    idle = { health: p99(q.health), other: p99(q.other) };
  });
  after(async () => h?.close());

  const explainDraft = (c: Client, value: string, email: string) =>
    c.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value }, entityId: email, entityIdNS: "Email" });

  test("E³ is refused with 400 at every door, nothing is stored, /healthz and org B stay fast", async () => {
    const existing = await a.post(DEFS, definitionBody("innocent", 'person.name = "x"'));
    assert.equal(existing.status, 200, existing.text);
    const innocent = obj(existing.json);
    const before = obj((await a.get(`${DEFS}?limit=100`)).json);
    const p = probe(h.url);
    const t0 = performance.now();
    let rounds = 0;
    // Keep the hostile requests coming for at least 4 s, so that the probes have something to measure
    // (~250 samples each: p99 is not one scheduling hiccup of a loaded host). One client sends them,
    // one every 40 ms, from the server's own process (the harness): each was a request that held
    // the server for 30 s to minutes before the cost model.
    const pace = () => new Promise((res) => setTimeout(res, 40));
    while (rounds < 2 || performance.now() - t0 < 4000) {
      rounds++;
      for (const text of [THREE, NESTED]) {
        const item = costlyItem(text);
        await pace();
        assertRefused(await a.post(DEFS, definitionBody(`hostile ${rounds}`, text)), "The PQL expression is too costly to evaluate", item);
        await pace();
        const audience = { name: `hostile audience ${rounds}`, profileInstanceId: "ups", type: "SegmentDefinition", expression: { type: "PQL", format: "pql/text", value: text }, schema: { name: "_xdm.context.profile" } };
        assertRefused(await a.post("/data/core/ups/audiences", audience), "The PQL expression is too costly to evaluate", item);
        await pace();
        assertRefused(await a.patch(`${DEFS}/${innocent.id as string}`, { ...definitionBody("innocent", text) }), "The PQL expression is too costly to evaluate", item);
        await pace();
        assertRefused(await explainDraft(a, text, BIG), "The PQL expression is too costly to evaluate", item);
        await pace();
        assertRefused(await a.post("/data/core/ups/preview", { predicateExpression: text, predicateType: "pql/text" }), "predicateExpression is too costly to evaluate", item);
        await pace();
        assertRefused(await a.post(`/data/core/ups/segment/builder/estimate`, { expressions: ['person.name = "x"', text] }), "expressions[1] is too costly to evaluate", item);
        await pace();
        assertRefused(await a.post(`${DEFS}/${innocent.id as string}/impact`, { expression: { type: "PQL", format: "pql/text", value: text } }), "The PQL expression is too costly to evaluate", item);
        await pace();
        const elig = await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: text } });
        assert.equal(elig.status, 200, elig.text);
        assert.equal(obj(elig.json).valid, false);
        assert.deepEqual(arr(obj(elig.json).diagnostics).map((d) => [obj(d).code, obj(d).message]), [[item.code, item.message]]);
      }
    }
    const took = performance.now() - t0;
    const latencies = await p.stop();
    assertResponsive(latencies, 100);
    // Every refusal answered at once: 16 requests a round.
    assert.ok(took / rounds < 2000, `${rounds} rounds in ${took.toFixed(0)} ms`);
    const afterList = obj((await a.get(`${DEFS}?limit=100`)).json);
    assert.deepEqual(arr(afterList.segments).map((s) => obj(s).id), arr(before.segments).map((s) => obj(s).id), "no definition was stored");
    const still = obj((await a.get(`${DEFS}/${innocent.id as string}`)).json);
    assert.equal(obj(still.expression).value, 'person.name = "x"', "the PATCH changed nothing");
  });

  test("E² is accepted and evaluates correctly; on 3,000 events it stops at the per-profile budget (422) without stalling", async () => {
    const d = await a.post(DEFS, definitionBody("view then buy", TWO));
    assert.equal(d.status, 200, d.text);
    const yes = await explainDraft(a, TWO, "p0@example.com");
    assert.equal(yes.status, 200, yes.text);
    assert.equal(obj(yes.json).result, true);
    const no = await explainDraft(a, TWO, "p1@example.com");
    assert.equal(no.status, 200, no.text);
    assert.equal(obj(no.json).result, false);
    const est = await a.post(`/data/core/ups/segment/builder/estimate`, { expressions: [TWO] });
    // The big profile makes the estimate stop at its budget: the sample holds every profile.
    assert.equal(est.status, 422, est.text);

    const p = probe(h.url);
    const t0 = performance.now();
    let stops = 0;
    while (stops < 3 || performance.now() - t0 < 3000) {
      const r = await explainDraft(a, TWO, BIG);
      assert.equal(r.status, 422, r.text);
      const e = obj(arr(obj(obj(r.json).errors)["422"])[0]);
      assert.equal(e.code, "SEGMENTD-EVALUATION-BUDGET-422");
      assert.match(e.message as string, /^Evaluation stopped: one profile's evaluation took more than 50 ms \(limits\.evaluationMsPerProfile; stopped at \d+ ms\); the expression is too costly for this profile's data$/);
      stops++;
    }
    assertResponsive(await p.stop(), 10, STOPPED_STALL_MS, STOPPED_STALL_MS + 50);
    assert.equal(obj((await explainDraft(a, 'person.name = "big@example.com"', BIG)).json).result, true, "the server still evaluates");
  });

  test("a stored E³ definition (accepted before the rule) fails its batch job at the per-profile budget without freezing the server", async () => {
    // A first job builds the sandbox's resident snapshot (linear in its data, not this item's
    // subject); the measured job then only refreshes it and evaluates.
    const warm = await loose.post(DEFS, definitionBody("warm-up", 'xEvent.exists(e => e.eventType = "zz")'));
    assert.equal(warm.status, 200, warm.text);
    await runSegmentJob(loose);
    const d = await loose.post(DEFS, definitionBody("accepted before the rule", THREE));
    assert.equal(d.status, 200, d.text);
    const p = probe(h.url);
    const t0 = performance.now();
    const job = await loose.post("/data/core/ups/segment/jobs", { segments: [{ segmentId: obj(d.json).id as string }] });
    assert.equal(job.status, 200, job.text);
    let j: Record<string, unknown> = {};
    for (let i = 0; i < 600; i++) {
      j = obj((await loose.get(`/data/core/ups/segment/jobs/${obj(job.json).id as string}`)).json);
      if (j.status === "FAILED" || j.status === "SUCCEEDED") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const took = performance.now() - t0;
    // Keep probing a little after the job, so that the window covers it whatever its length.
    await new Promise((r) => setTimeout(r, 500));
    const latencies = await p.stop();
    assert.equal(j.status, "FAILED", JSON.stringify(j));
    const [err] = arr(j.errors).map(obj);
    assert.equal(err!.code, "SEGMENTD-JOB-FAILED");
    assert.match(err!.msg as string, new RegExp(`^definition '${obj(d.json).id as string}': Evaluation stopped: one profile's evaluation took more than 50 ms \\(limits\\.evaluationMsPerProfile; stopped at \\d+ ms\\); the expression is too costly for this profile's data$`));
    assert.ok(took < 15_000, `the job took ${took.toFixed(0)} ms to fail`);
    assertResponsive(latencies, 10, STOPPED_STALL_MS, STOPPED_STALL_MS + 50);
  });
});
