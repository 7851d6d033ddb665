/**
 * Explain over real HTTP (#28): after a batch job, for each kind of query
 * (profile-only, single event, event with profile, multiple events, chain, count
 * and sum in a window, segment of segments, consent-excluded) and each profile, the explanation's result equals the membership the job wrote,
 * its trace's root is that result, and the history shows the job's transition;
 * consent exclusion, draft expressions, and bad requests (status, code,
 * message; another organization sees nothing).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, EVENT_CLASS, ORG_B, PROFILE_CLASS, profileDataset, runSegmentJob, xdmMessage, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const DAY = 86_400_000;

let h: Harness;
let a: Client;

async function explain(id: string, email: string, c: Client = a) {
  return c.get(`${DEFS}/${id}/explain?entityId=${encodeURIComponent(email)}&entityIdNS=Email`);
}

/** Attributes, purchases and page views (days ago) of each profile. */
const PEOPLE = {
  "ann@example.com": { person: { age: 41 }, purchases: [2, 10], views: [5] },
  "bob@example.com": { person: { age: 25 }, purchases: [40], views: [] },
  "cat@example.com": { person: { age: 50 }, purchases: [1], views: [3], consents: { marketing: { preferred: "n" } } },
} as const;

const QUERIES = {
  "profile-only": "person.age > 30",
  "single event": 'xEvent.exists(e => e.eventType = "commerce.purchases" and e.timestamp occurs <= 7 days before now)',
  "count in a window": 'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 2',
  "event with profile": 'person.age > 20 and xEvent.exists(e => e.eventType = "commerce.purchases")',
  "multiple events": 'xEvent.exists(e => e.eventType = "commerce.purchases") and xEvent.exists(e => e.eventType = "web.pageViews")',
  "chain": 'chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews"), B: WHAT(eventType = "commerce.purchases")])',
  "sum in a window": 'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].sum(commerce.order.priceTotal) > 100',
};

describe("explain", () => {
  const ids: Record<string, string> = {};
  before(async () => {
    h = await startHarness("explain");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_CLASS);
    const events = await profileDataset(a, "web", EVENT_CLASS);
    const now = Date.now();
    for (const [email, p] of Object.entries(PEOPLE)) {
      const { purchases, views, ...attrs } = p;
      const r = await a.post("/collection/explain?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, { identityMap: { Email: [{ id: email, primary: true }] }, ...attrs }));
      assert.equal(r.status, 200, r.text);
      const all = [
        ...purchases.map((days, i) => ({ _id: `${email}-p${i}`, eventType: "commerce.purchases", commerce: { order: { priceTotal: 80 } }, timestamp: new Date(now - days * DAY).toISOString() })),
        ...views.map((days, i) => ({ _id: `${email}-v${i}`, eventType: "web.pageViews", timestamp: new Date(now - days * DAY).toISOString() })),
      ];
      for (const body of all) {
        const e = await a.post("/collection/explain?syncValidation=true", xdmMessage(events, EVENT_CLASS, { ...body, identityMap: { Email: [{ id: email, primary: true }] } }));
        assert.equal(e.status, 200, e.text);
      }
    }
    for (const [kind, pql] of Object.entries(QUERIES)) {
      const d = await a.post(DEFS, definitionBody(`explain ${kind}`, pql));
      assert.equal(d.status, 200, d.text);
      ids[kind] = obj(d.json).id as string;
    }
    const child = await a.post(DEFS, definitionBody("explain segment of segments", `inSegment("${ids["profile-only"]!}") and inSegment("${ids["single event"]!}")`));
    ids["segment of segments"] = obj(child.json).id as string;
    await runSegmentJob(a);
  });
  after(async () => h.close());

  test("for every query type and profile: the result is the membership the batch job wrote, the trace's root is the result", async () => {
    let realized = 0;
    for (const [kind, id] of Object.entries(ids)) {
      for (const email of Object.keys(PEOPLE)) {
        const r = await explain(id, email);
        assert.equal(r.status, 200, r.text);
        const x = obj(r.json);
        const m = obj(x.membership);
        assert.equal(x.result, m.status === "realized", `${kind} / ${email}: ${JSON.stringify(x)}`);
        const root = obj(x.trace);
        assert.equal(root.kind, "Query");
        assert.equal(root.value === true && !x.excludedByConsent, x.result, `${kind} / ${email}: the trace's root`);
        if (m.status === "realized") {
          realized++;
          const last = obj(arr(m.history).at(-1));
          assert.deepEqual([last.from, last.to, last.source], [null, "realized", "batch"]);
        }
      }
    }
    assert.ok(realized >= 8, "the fixture puts profiles in audiences");
  });

  test("the trace shows the attribute read, the events that matched, inSegment references and consent exclusion", async () => {
    const single = obj((await explain(ids["single event"]!, "ann@example.com")).json);
    const exists = obj(arr(obj(single.trace).children)[0]);
    assert.equal(exists.kind, "Method:exists");
    const items = obj(exists.items);
    assert.equal(items.held, 1);
    assert.deepEqual(Object.keys(obj(arr(items.first)[0])).sort(), ["_id", "eventType", "timestamp"]);
    assert.equal(obj(single.events).read, 3);
    // The 2-day-old purchase holds the 7-day window. A window inside a lambda has no static size,
    // so the sweep re-checks it at each UTC midnight: out at the first midnight after it leaves.
    const held = Date.parse(obj(arr(items.first)[0]).timestamp as string);
    assert.equal(single.exitsAt, new Date((Math.floor((held + 7 * DAY) / DAY) + 1) * DAY).toISOString());
    const counted = obj((await explain(ids["count in a window"]!, "ann@example.com")).json);
    const filter = obj(arr(obj(arr(obj(arr(obj(counted.trace).children)[0]).children)[0]).children)[0]);
    assert.equal(filter.kind, "Filter");
    const older = Math.min(...arr(obj(filter.items).first).map((e) => Date.parse(obj(e).timestamp as string)));
    assert.equal(counted.exitsAt, new Date(older + 30 * DAY + 1).toISOString(), "two purchases in 30 days: out when the older one leaves");
    assert.equal(obj((await explain(ids["profile-only"]!, "ann@example.com")).json).exitsAt, null, "no window, no exit");

    const age = obj((await explain(ids["profile-only"]!, "bob@example.com")).json);
    const cmp = obj(arr(obj(age.trace).children)[0]);
    assert.deepEqual([cmp.text, cmp.value], ["person.age > 30", false]);
    assert.deepEqual(obj(arr(cmp.children)[0]).value, 25, "the attribute's value");
    const [attr] = arr(age.attributes).map(obj);
    assert.deepEqual([attr!.path, attr!.value, attr!.rule, obj(attr!.source).recordId], ["person.age", 25, "timestampOrdered", "email:bob@example.com"]);
    assert.equal(arr(age.attributes).length, 1);
    assert.deepEqual(single.attributes, [], "event fields are not profile attributes");

    const sos = obj((await explain(ids["segment of segments"]!, "ann@example.com")).json);
    assert.deepEqual(sos.references, [{ id: ids["profile-only"], status: "realized" }, { id: ids["single event"], status: "realized" }]);

    const cat = obj((await explain(ids["profile-only"]!, "cat@example.com")).json);
    assert.equal(cat.excludedByConsent, true);
    assert.equal(cat.result, false);
    assert.equal(obj(cat.trace).value, true, "the expression holds; consent excludes the profile");
  });

  test("a draft expression is explained without saving anything", async () => {
    const before = obj(obj((await a.get(`${DEFS}?limit=1`)).json).page).totalCount;
    const r = await a.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: "person.age > 40" }, entityId: "ann@example.com", entityIdNS: "Email" });
    assert.equal(r.status, 200, r.text);
    const x = obj(r.json);
    assert.equal(x.segmentId, null);
    assert.equal(x.result, true);
    assert.deepEqual(obj(x.membership), { status: null, lastQualificationTime: null, history: [] });
    assert.equal(obj(obj((await a.get(`${DEFS}?limit=1`)).json).page).totalCount, before);
  });

  test("members: a page at a time, with identities and the transition that set the status", async () => {
    const id = ids["event with profile"]!;
    const seen: string[] = [];
    let start = "";
    for (let i = 0; i < 5; i++) {
      const r = await a.get(`${DEFS}/${id}/members?limit=1${start === "" ? "" : `&start=${start}`}`);
      assert.equal(r.status, 200, r.text);
      const page = obj(r.json);
      assert.equal(obj(page._page).totalCount, 2);
      for (const c of arr(page.children).map(obj)) {
        seen.push(...arr(c.identities).map((x) => obj(x).id as string));
        assert.equal(c.status, "realized");
        assert.equal(obj(c.since).source, "batch");
        assert.equal(typeof c.lastQualificationTime, "string");
      }
      const next = obj(page._page).next;
      if (next === null) break;
      start = next as string;
    }
    assert.deepEqual(seen.sort(), ["ann@example.com", "bob@example.com"], "cat is excluded by consent");
    const exited = obj((await a.get(`${DEFS}/${id}/members?status=exited`)).json);
    assert.deepEqual(exited.children, []);
    const cases: [string, Client, number, string][] = [
      [`${DEFS}/no-such/members`, a, 404, "Segment definition with id 'no-such' was not found"],
      [`${DEFS}/${id}/members?limit=101`, a, 400, "Invalid request: querystring limit must be <= 100"],
      [`${DEFS}/${id}/members?start=abc`, a, 400, 'Invalid request: querystring start must match pattern "^[0-9]{1,18}$"'],
      [`${DEFS}/${id}/members`, client(h.url, { token: TOKEN_B, org: ORG_B }), 404, `Segment definition with id '${id}' was not found`],
    ];
    for (const [url, c, status, title] of cases) {
      const r = await c.get(url);
      assert.equal(r.status, status, r.text);
      assert.equal(obj(r.json).title, title);
    }
  });

  test("bad requests: unknown definition or profile, missing identity, invalid PQL, another organization", async () => {
    const cases: [Promise<{ status: number; json: unknown }>, number, string][] = [
      [explain("no-such-definition", "ann@example.com"), 404, "Segment definition with id 'no-such-definition' was not found"],
      [explain(ids["profile-only"]!, "nobody@example.com"), 404, "Profile with id 'Email:nobody@example.com' was not found"],
      [a.get(`${DEFS}/${ids["profile-only"]!}/explain?entityId=ann%40example.com`), 400, "Invalid request: querystring entityIdNS is required"],
      [a.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: "person.age >" }, entityId: "ann@example.com", entityIdNS: "Email" }), 400, "The PQL expression is invalid (1 error)"],
      [explain(ids["profile-only"]!, "ann@example.com", client(h.url, { token: TOKEN_B, org: ORG_B })), 404, `Segment definition with id '${ids["profile-only"]!}' was not found`],
    ];
    for (const [p, status, title] of cases) {
      const r = await p;
      assert.equal(r.status, status, JSON.stringify(r.json));
      assert.equal(obj(r.json).title, title);
    }
  });
});
