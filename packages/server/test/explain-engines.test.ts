/**
 * Explain against the realtime engines over real HTTP (#28, acceptance 1): definitions of every
 * query type, each evaluated continuously (streaming) when its classification allows it and on
 * edge when it is edge-eligible, see the fixture's profiles and events arrive through streaming
 * collection. For each definition and profile, explain's result (and its trace's root, consent
 * aside) equals the membership the streaming engine wrote, and for edge definitions whether the
 * edge's interact answer lists the audience. The batch job's side is test/explain.test.ts.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, EVENT_CLASS, PROFILE_CLASS, profileDataset, xdmMessage, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";
import { LIVE_QUERY_TYPES } from "./helpers/live-query-types.js";

const HOUR = 3_600_000;

let h: Harness;
let a: Client;

/** Attributes, purchases and page views (hours ago: inside the edge's 25 hours) of each profile. */
const PEOPLE = {
  "ann@example.com": { person: { age: 41 }, purchases: [2, 10], views: [5] },
  "bob@example.com": { person: { age: 25 }, purchases: [20], views: [] },
  "cat@example.com": { person: { age: 50 }, purchases: [1], views: [3], consents: { marketing: { preferred: "n" } } },
  "dan@example.com": { person: { age: 33 }, purchases: [], views: [1, 4] },
} as const;

const QUERIES = LIVE_QUERY_TYPES;

describe("explain against streaming and edge evaluation", () => {
  const defs: { kind: string; id: string; streaming: boolean; edge: boolean }[] = [];
  const edgeAnswers = new Map<string, Set<string>>();

  async function create(kind: string, pql: string): Promise<void> {
    const e = await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: pql } });
    assert.equal(e.status, 200, e.text);
    const eligible = obj(obj(e.json).eligible);
    const streaming = eligible.continuous === true;
    const edge = eligible.synchronous === true;
    const evaluationInfo = { batch: { enabled: false }, continuous: { enabled: streaming }, synchronous: { enabled: edge } };
    const d = await a.post(DEFS, definitionBody(`engines ${kind}`, pql, { evaluationInfo }));
    assert.equal(d.status, 200, d.text);
    defs.push({ kind, id: obj(d.json).id as string, streaming, edge });
  }

  before(async () => {
    h = await startHarness("explain-engines");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_CLASS);
    const events = await profileDataset(a, "web", EVENT_CLASS);
    for (const [kind, pql] of Object.entries(QUERIES)) await create(kind, pql);
    const [profileOnly, singleEvent] = [defs[0]!.id, defs[1]!.id];
    await create("segment of segments", `inSegment("${profileOnly}") and inSegment("${singleEvent}")`);

    // The records arrive after the definitions: the streaming engine evaluates each as it is stored.
    const now = Date.now();
    for (const [email, p] of Object.entries(PEOPLE)) {
      const { purchases, views, ...attrs } = p;
      const identityMap = { Email: [{ id: email, primary: true }] };
      const r = await a.post("/collection/engines?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, { identityMap, ...attrs }));
      assert.equal(r.status, 200, r.text);
      const all = [
        ...purchases.map((hours, i) => ({ _id: `${email}-p${i}`, eventType: "commerce.purchases", commerce: { order: { priceTotal: 80 } }, timestamp: new Date(now - hours * HOUR).toISOString() })),
        ...views.map((hours, i) => ({ _id: `${email}-v${i}`, eventType: "web.pageViews", timestamp: new Date(now - hours * HOUR).toISOString() })),
      ];
      for (const body of all) {
        const e = await a.post("/collection/engines?syncValidation=true", xdmMessage(events, EVENT_CLASS, { ...body, identityMap }));
        assert.equal(e.status, 200, e.text);
      }
    }
    await h.server.app.edge!.flush();

    // Edge: a request whose event no definition reads. The first one brings the profile to the
    // location (the hub projects it after the forward); the second is answered with it.
    const ds = await a.post("/data/core/edge/datastreams", { name: "engines", eventDatasetId: events });
    assert.equal(ds.status, 201, ds.text);
    const dataStreamId = obj(ds.json).id as string;
    for (const email of Object.keys(PEOPLE)) {
      let segments = new Set<string>();
      for (let round = 0; round < 2; round++) {
        const r = await fetch(`${h.url}/ee/v2/interact?dataStreamId=${encodeURIComponent(dataStreamId)}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ event: { xdm: { identityMap: { Email: [{ id: email, primary: true }] }, eventType: "test.ping" } } }),
        });
        const body = (await r.json()) as { handle: { type: string; payload: { segments?: { id: string }[] }[] }[] };
        assert.equal(r.status, 200, JSON.stringify(body));
        const pull = body.handle.find((x) => x.type === "activation:pull")!;
        segments = new Set(pull.payload.flatMap((p) => (p.segments ?? []).map((s) => s.id)));
        await h.server.app.edge!.flush();
      }
      edgeAnswers.set(email, segments);
    }
  });
  after(async () => h.close());

  test("each engine evaluates the query types its classification allows", () => {
    const by = (f: (d: (typeof defs)[number]) => boolean) => defs.filter(f).map((d) => d.kind);
    assert.deepEqual(by((d) => !d.streaming), ["segment of segments"], "streaming evaluates every type but audience references alone");
    assert.deepEqual(by((d) => !d.edge), [], "edge evaluates every type here");
  });

  test("explain's result equals the streaming engine's membership and the edge's answer, for every query type and profile", async () => {
    let realized = 0;
    for (const d of defs) {
      for (const email of Object.keys(PEOPLE)) {
        const r = await a.get(`${DEFS}/${d.id}/explain?entityId=${encodeURIComponent(email)}&entityIdNS=Email`);
        assert.equal(r.status, 200, r.text);
        const x = obj(r.json);
        const m = obj(x.membership);
        const where = `${d.kind} / ${email}`;
        assert.equal(obj(x.trace).value === true && !x.excludedByConsent, x.result, `${where}: the trace's root`);
        assert.equal(x.result, m.status === "realized", `${where}: streaming wrote ${String(m.status)}; explain says ${String(x.result)}`);
        if (m.status === "realized") {
          realized++;
          const sources = arr(m.history).map((t) => obj(t).source);
          // A definition saved while its profiles' data arrives may be realized by its own backfill first.
          assert.ok(sources.some((s) => s === "streaming" || s === "edge" || s === "backfill"), `${where}: ${JSON.stringify(m.history)}`);
        }
        if (d.edge) assert.equal(edgeAnswers.get(email)!.has(d.id), x.result, `${where}: the edge answered ${[...edgeAnswers.get(email)!].join(",")}`);
      }
    }
    assert.ok(realized >= 8, `the fixture puts profiles in audiences (${realized})`);
    assert.ok([...edgeAnswers.values()].reduce((n, x) => n + x.size, 0) >= 6, "the edge answers with audiences");
    const consent = obj((await a.get(`${DEFS}/${defs[0]!.id}/explain?entityId=cat%40example.com&entityIdNS=Email`)).json);
    assert.deepEqual([consent.excludedByConsent, obj(consent.trace).value, consent.result], [true, true, false], "cat qualifies by age and is excluded by consent");
  });
});
