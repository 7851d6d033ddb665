/**
 * Edit impact over real HTTP (#28): for an expression edit (with an inSegment reference) and a
 * consent-rule edit, the profiles impact says would enter, leave and stay are exactly those a
 * batch job before and one after saving the edit put in, take out of and keep in the audience;
 * nothing is stored by asking; bad requests get their status, code and message, and another
 * organization sees nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, EVENT_CLASS, PROFILE_CLASS, profileDataset, runSegmentJob, xdmMessage, ORG_B, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const DAY = 86_400_000;
const PEOPLE = 40;

let h: Harness;
let a: Client;

/** The emails of an audience's realized members. */
async function members(id: string): Promise<Set<string>> {
  const out = new Set<string>();
  const r = await a.get(`${DEFS}/${id}/members?limit=100`);
  assert.equal(r.status, 200, r.text);
  assert.equal(obj(obj(r.json)._page).next, null, "one page holds the fixture");
  for (const m of arr(obj(r.json).children)) for (const x of arr(obj(m).identities)) if (isEmail(x)) out.add(obj(x).id as string);
  return out;
}

/** Namespaces are stored as their lower-case codes. */
const isEmail = (x: unknown) => obj(x).namespace === "email";

function emailsOf(group: unknown): string[] {
  return arr(obj(group).sample).flatMap((s) => arr(obj(s).identities).filter(isEmail).map((x) => obj(x).id as string));
}

const minus = (x: Set<string>, y: Set<string>) => [...x].filter((e) => !y.has(e)).sort();
const both = (x: Set<string>, y: Set<string>) => [...x].filter((e) => y.has(e)).sort();

/** Impact's groups against the members a job wrote before and after the edit. */
function assertMatchesJobs(impact: Record<string, unknown>, was: Set<string>, now: Set<string>): void {
  const expected = { enter: minus(now, was), leave: minus(was, now), stay: both(was, now) };
  for (const [name, emails] of Object.entries(expected)) {
    const g = obj(impact[name]);
    assert.equal(g.count, emails.length, `${name}: ${JSON.stringify(g)} vs ${JSON.stringify(emails)}`);
    const sample = emailsOf(g);
    assert.equal(sample.length, Math.min(emails.length, 100));
    for (const e of sample) assert.ok(emails.includes(e), `${name} sample ${e}`);
  }
  assert.equal(obj(impact.before).qualified, was.size);
  assert.equal(obj(impact.after).qualified, now.size);
}

describe("edit impact", () => {
  let audience = "";
  let buyers = "";
  before(async () => {
    h = await startHarness("impact");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_CLASS);
    const events = await profileDataset(a, "web", EVENT_CLASS);
    const now = Date.now();
    for (let i = 0; i < PEOPLE; i++) {
      const email = `p${i}@example.com`;
      const identityMap = { Email: [{ id: email, primary: true }] };
      const consents = i % 10 === 5 ? { consents: { marketing: { preferred: "n" } } } : {};
      const r = await a.post("/collection/impact?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, { identityMap, person: { age: 20 + i }, ...consents }));
      assert.equal(r.status, 200, r.text);
      if (i % 3 === 0) {
        const e = await a.post("/collection/impact?syncValidation=true", xdmMessage(events, EVENT_CLASS, { _id: `buy-${i}`, eventType: "commerce.purchases", timestamp: new Date(now - 2 * DAY).toISOString(), identityMap }));
        assert.equal(e.status, 200, e.text);
      }
    }
    const d = await a.post(DEFS, definitionBody("impact: over 30", "person.age > 30"));
    assert.equal(d.status, 200, d.text);
    audience = obj(d.json).id as string;
    const b = await a.post(DEFS, definitionBody("impact: buyers", 'xEvent.exists(e => e.eventType = "commerce.purchases")'));
    assert.equal(b.status, 200, b.text);
    buyers = obj(b.json).id as string;
    await runSegmentJob(a);
  });
  after(async () => h.close());

  test("an expression edit: enter, leave and stay equal a batch job before and after saving it", async () => {
    const was = await members(audience);
    const stored = (await a.get(`${DEFS}/${audience}`)).json;
    const edited = `person.age > 45 or inSegment("${buyers}")`;
    const r = await a.post(`${DEFS}/${audience}/impact`, { expression: { type: "PQL", format: "pql/text", value: edited }, sampleSize: 100 });
    assert.equal(r.status, 200, r.text);
    const impact = obj(r.json);
    assert.equal(impact.exact, true);
    assert.equal(impact.profiles, PEOPLE);
    assert.equal(obj(impact.before).expression, "person.age > 30");
    assert.equal(obj(obj(impact.eligibility).eligible).batch, true, JSON.stringify(impact.eligibility));
    assert.deepEqual((await a.get(`${DEFS}/${audience}`)).json, stored, "asking stores nothing");

    const patched = await a.patch(`${DEFS}/${audience}`, definitionBody("impact: over 30", edited));
    assert.equal(patched.status, 200, patched.text);
    await runSegmentJob(a);
    const now = await members(audience);
    assertMatchesJobs(impact, was, now);
    assert.ok(obj(impact.enter).count as number > 0 && (obj(impact.leave).count as number) > 0 && (obj(impact.stay).count as number) > 0, "the fixture exercises every group");
  });

  test("a consent-rule edit: opted-out profiles enter, as the job after saving it puts them in", async () => {
    const was = await members(audience);
    const expression = obj(obj((await a.get(`${DEFS}/${audience}`)).json).expression).value as string;
    const r = await a.post(`${DEFS}/${audience}/impact`, { dataGovernancePolicy: { excludeOptOut: false }, sampleSize: 3 });
    assert.equal(r.status, 200, r.text);
    const impact = obj(r.json);
    assert.equal(obj(impact.after).excludeOptOut, false);
    assert.equal(arr(obj(impact.stay).sample).length, 3, "sampleSize bounds each sample");
    const patched = await a.patch(`${DEFS}/${audience}`, definitionBody("impact: over 30", expression, { dataGovernancePolicy: { excludeOptOut: false } }));
    assert.equal(patched.status, 200, patched.text);
    await runSegmentJob(a);
    const now = await members(audience);
    const expected = minus(now, was);
    assert.ok(expected.length > 0);
    assert.equal(obj(impact.enter).count, expected.length);
    assert.equal(obj(impact.leave).count, 0);
    assert.equal(obj(impact.stay).count, was.size);
  });

  test("evaluation methods: a method the edit enables but the edited definition is not eligible for is reported as saving would refuse it", async () => {
    const edit = { expression: { type: "PQL", format: "pql/text", value: 'xEvent.exists(e => e.eventType = "commerce.purchases")' }, evaluationInfo: { batch: { enabled: false }, synchronous: { enabled: true } } };
    const r = await a.post(`${DEFS}/${buyers}/impact`, edit);
    assert.equal(r.status, 200, r.text);
    const impact = obj(r.json);
    assert.deepEqual(obj(impact.after).evaluationInfo, { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } });
    assert.deepEqual(obj(obj(impact.before).evaluationInfo).batch, { enabled: true });
    const refused = arr(impact.refused).map(obj);
    assert.ok(refused.length > 0 && refused.every((x) => x.method === "synchronous"), r.text);
    const saved = await a.patch(`${DEFS}/${buyers}`, definitionBody("impact: buyers", edit.expression.value, { evaluationInfo: edit.evaluationInfo }));
    assert.equal(saved.status, 400, saved.text);
    assert.deepEqual(arr(obj(obj(saved.json).errors)["400"]).map((x) => obj(x).message), refused.map((x) => `edge (synchronous): ${String(x.message)}`), "the save refuses exactly what impact reported");
    const batchOnly = await a.post(`${DEFS}/${buyers}/impact`, { evaluationInfo: { batch: { enabled: true } } });
    assert.equal(batchOnly.status, 200, batchOnly.text);
    assert.deepEqual(obj(batchOnly.json).refused, []);
  });

  test("bad requests: status, code and message; nothing stored; another organization sees nothing", async () => {
    const stored = (await a.get(`${DEFS}/${audience}`)).json;
    const expr = (value: string) => ({ expression: { type: "PQL", format: "pql/text", value } });
    const cases: [Client, string, unknown, number, string, string][] = [
      [a, "no-such", expr("person.age > 1"), 404, "SEGMENTD-NOT-FOUND-404", "Segment definition with id 'no-such' was not found"],
      [a, audience, expr("person.age >"), 400, "SEGMENTD-PQL-400", "The PQL expression is invalid (1 error)"],
      [a, audience, {}, 400, "SEGMENTD-BAD-REQUEST-400", "Send the edit to measure: an expression, a mergePolicyId, a dataGovernancePolicy or an evaluationInfo"],
      [a, audience, { mergePolicyId: "no-such-policy" }, 400, "SEGMENTD-MERGE-POLICY-400", "merge policy 'no-such-policy' does not exist in sandbox 'prod'"],
      [a, audience, { ...expr("person.age > 1"), sampleSize: 101 }, 400, "UPLIB-101206-500", "Invalid request: sampleSize must be <= 100"],
      [a, audience, { ...expr("person.age > 1"), save: true }, 400, "UPLIB-101206-500", "Invalid request: save is not allowed"],
      [client(h.url, { token: TOKEN_B, org: ORG_B }), audience, expr("person.age > 1"), 404, "SEGMENTD-NOT-FOUND-404", `Segment definition with id '${audience}' was not found`],
    ];
    for (const [c, id, body, status, code, title] of cases) {
      const r = await c.post(`${DEFS}/${id}/impact`, body);
      assert.equal(r.status, status, r.text);
      const e = obj(r.json);
      assert.deepEqual([e.type, e.title], [`https://ns.adobe.com/aep/errors/${code}`, title], r.text);
    }
    assert.deepEqual((await a.get(`${DEFS}/${audience}`)).json, stored);
  });
});
