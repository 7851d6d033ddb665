/**
 * Property-based fuzzing of every route (issue #22, acceptance 2): generated hostile bodies,
 * records, PQL, query parameters and path ids from org A, over real HTTP. For every case:
 * no 5xx, a JSON error body for every 4xx, an answer within 2 s (SEGMENTD_FUZZ_MAX_MS), and afterwards the
 * service still serves and org B's data is exactly as it was.
 *
 * Bounded by time: SEGMENTD_FUZZ_SECONDS (default 40 in `npm test`; `npm run test:fuzz`
 * runs longer) and SEGMENTD_FUZZ_SEED to replay a run. Prints the cases tried.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ORG_B, TOKEN_B, arr, client, definitionBody, obj, startHarness, xdmMessage, type Client, type Harness } from "../helpers/server-harness.js";
import { luceneQuery, pqlBindings } from "./fuzz-arbitraries.js";

const SECONDS = Number(process.env.SEGMENTD_FUZZ_SECONDS ?? 40);
/** No request may take longer (issue #37): the body limits and budgets bound every route's work. */
const MAX_MS = Number(process.env.SEGMENTD_FUZZ_MAX_MS ?? 2_000);
const SEED = process.env.SEGMENTD_FUZZ_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.SEGMENTD_FUZZ_SEED);
const PROFILE_SCHEMA = "https://ns.adobe.com/xdm/context/profile";
const EVENT_SCHEMA = "https://ns.adobe.com/xdm/context/experienceevent";

let h: Harness;
let a: Client;
let b: Client;
let operations: Array<{ method: string; path: string }> = [];
/** Org B's own ids, offered to org A's requests as path parameters. */
const foreignIds: string[] = [];
let snapshotB = "";
let datasetA = "";

async function dataset(c: Client, name: string, schema: string): Promise<string> {
  const r = await c.post("/data/foundation/catalog/dataSets", {
    name, schemaRef: { id: schema, contentType: "application/vnd.adobe.xed+json;version=1" },
    tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
  });
  assert.equal(r.status, 201, r.text);
  return (arr(r.json)[0] as string).replace("@/dataSets/", "");
}

/**
 * What makes search and evaluation costly (issue #37): 40 definitions with ~8 KB descriptions of
 * distinct words, and a profile with 300 events.
 */
async function costlyData(): Promise<void> {
  const rand = fc.sample(fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz"), minLength: 3, maxLength: 10 }), { seed: SEED, numRuns: 1_200 });
  for (let i = 0; i < 40; i++) {
    const description = Array.from({ length: 1_000 }, (_, k) => rand[(i * 37 + k) % rand.length]).join(" ").slice(0, 8_000);
    const r = await a.post("/data/core/ups/segment/definitions", definitionBody(`fz costly ${i}`, 'homeAddress.countryCode = "US"', { description }));
    assert.equal(r.status, 200, r.text);
  }
  const events = await dataset(a, "fuzz-events", EVENT_SCHEMA);
  const profile = await a.post("/collection/fz?syncValidation=true", xdmMessage(datasetA, PROFILE_SCHEMA, { identityMap: { Email: [{ id: "heavy@fz.test", primary: true }] }, person: { name: { firstName: "heavy" } } }));
  assert.equal(profile.status, 200, profile.text);
  const t0 = Date.now() - 3 * 86_400_000;
  for (let batch = 0; batch < 3; batch++) {
    const messages = Array.from({ length: 100 }, (_, k) => xdmMessage(events, EVENT_SCHEMA, {
      _id: `heavy-${batch}-${k}`, timestamp: new Date(t0 + (batch * 100 + k) * 60_000).toISOString(), eventType: k % 2 === 0 ? "commerce.purchases" : "web.webpagedetails.pageViews",
      identityMap: { Email: [{ id: "heavy@fz.test", primary: true }] },
    }));
    const r = await a.post("/collection/batch/fz", { messages });
    assert.equal(r.status, 207, r.text);
    assert.ok(arr(obj(r.json).responses).every((x) => obj(x).status === undefined || obj(x).status === 200), r.text.slice(0, 500));
  }
}

/** Everything org B can read of its own data, as one string. */
async function stateOfB(): Promise<string> {
  const parts: string[] = [];
  for (const p of [
    "/data/core/ups/segment/definitions",
    "/data/core/ups/config/mergePolicies",
    "/data/foundation/catalog/dataSets",
    "/data/core/edge/datastreams",
    "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=b-1&entityIdNS=ECID",
    "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=b-2&entityIdNS=ECID",
  ]) {
    const r = await b.get(p);
    assert.equal(r.status, 200, `${p}: ${r.text}`);
    parts.push(JSON.stringify(r.json));
  }
  return parts.join("\n");
}

before(async () => {
  h = await startHarness("fuzz");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
  datasetA = await dataset(a, "fuzz-profiles", PROFILE_SCHEMA);
  const dsB = await dataset(b, "b-profiles", PROFILE_SCHEMA);
  const evB = await dataset(b, "b-events", EVENT_SCHEMA);
  foreignIds.push(dsB, evB);
  for (const id of ["b-1", "b-2"]) {
    const r = await b.post("/collection/conn?syncValidation=true", { header: { datasetId: dsB, schemaRef: { id: PROFILE_SCHEMA } }, body: { xdmEntity: { identityMap: { ECID: [{ id, primary: true }] }, person: { name: { firstName: id } } } } });
    assert.equal(r.status, 200, r.text);
  }
  const def = await b.post("/data/core/ups/segment/definitions", { name: "b-def", schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: 'person.name.firstName = "b-1"' } });
  assert.equal(def.status, 200, def.text);
  foreignIds.push(obj(def.json).id as string);
  const stream = await b.post("/data/core/edge/datastreams", { name: "b-web", eventDatasetId: evB });
  assert.equal(stream.status, 201, stream.text);
  foreignIds.push(obj(stream.json).id as string);
  snapshotB = await stateOfB();

  await costlyData();

  const spec = obj((await a.get("/openapi.json")).json);
  for (const [path, ops] of Object.entries(obj(spec.paths))) {
    for (const method of Object.keys(obj(ops))) {
      if (["get", "post", "put", "patch", "delete"].includes(method)) operations.push({ method: method.toUpperCase(), path });
    }
  }
  // Skip nothing the API offers, except the documentation pages themselves.
  operations = operations.filter((o) => !o.path.startsWith("/docs"));
  assert.ok(operations.length > 40, `only ${operations.length} operations found in /openapi.json`);
});
after(async () => h.close());

// Characters that break stores, parsers and patterns.
const hostileChar = fc.constantFrom("\u0000", "\ud800", "\udfff", "%", "_", "\\", '"', "'", "*", "(", ")", "[", "{", "😀", "a", "é", "\n", "$", ".", "/");
const hostileString = fc.oneof(
  fc.string({ unit: hostileChar, maxLength: 40 }),
  fc.string({ maxLength: 20 }),
  fc.nat({ max: 6_000 }).map((n) => "a".repeat(n)),
  fc.constantFrom("1e309", "-1", "NaN", "Infinity", "9007199254740993", "0x10", "", " ", "null", "true", "../../etc/passwd", "%00"),
);

/** PQL that is deep, long or pattern-heavy. */
const hostilePql = fc.oneof(
  fc.nat({ max: 3_000 }).map((n) => `${"(".repeat(n)}a = 1${")".repeat(n)}`),
  fc.tuple(fc.nat({ max: 30_000 }), fc.nat({ max: 5 })).map(([n, k]) => `person.name.firstName like "${"%a".repeat(k)}${"%".repeat(Math.min(n, 2000))}${"a".repeat(n)}b"`),
  fc.constantFrom(
    'person.name.firstName matches "(a+)+$"', 'person.name.firstName matches "(a|aa)*b"', 'person.name.firstName matches "\\\\1"',
    'person.name.firstName matches "' + "(".repeat(500) + '"', "not ".repeat(5_000) + "true", "a.b.c".repeat(10_000),
    'xEvent[type = "x"].count() > 99999999999999999999', "inSegment(\"" + "x".repeat(300) + "\")",
  ),
  fc.string({ unit: hostileChar, maxLength: 200 }),
);

/** encodeURIComponent, except that a lone surrogate goes out as its (invalid) UTF-8 bytes. */
function encodeSegment(s: string): string {
  let out = "";
  for (const ch of s) out += ch.length === 1 && ch >= "\ud800" && ch <= "\udfff" ? "%ED%A0%80" : encodeURIComponent(ch);
  return out;
}

function deepJson(levels: number): string {
  return "[".repeat(levels) + "]".repeat(levels);
}

const jsonValue = fc.jsonValue({ maxDepth: 4 });
const record = fc.record({
  identityMap: fc.oneof(fc.constant({ ECID: [{ id: "fz", primary: true }] }), jsonValue),
  person: fc.oneof(jsonValue, fc.record({ note: hostileString })),
  timestamp: fc.oneof(hostileString, fc.integer(), fc.constant(1e308)),
  _id: hostileString,
});

/** A raw body: text that may not even be JSON. */
const body: fc.Arbitrary<string | undefined> = fc.oneof(
  fc.constant(undefined),
  jsonValue.map((v) => JSON.stringify(v)),
  fc.nat({ max: 6_000 }).map(deepJson),
  fc.nat({ max: 600 }).map((n) => `{"a":${deepJson(n)}}`),
  hostileString.map((s) => JSON.stringify({ name: s, description: s, predicateExpression: s })),
  fc.nat({ max: 300_000 }).map((n) => JSON.stringify({ name: "a".repeat(n), description: "b" })),
  hostilePql.map((q) => JSON.stringify({ name: "fz", schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: q }, predicateExpression: q, predicateType: "pql/text" })),
  record.map((r) => JSON.stringify({ header: { datasetId: datasetA, schemaRef: { id: PROFILE_SCHEMA } }, body: { xdmEntity: r }, messages: [{ header: { datasetId: datasetA }, body: { xdmEntity: r } }], event: { xdm: r } })),
  fc.constantFrom('{"a":1e309}', '{"a":"\\ud800"}', '{"a":"\\u0000"}', "{", "[1,2", "null", '"x"', "{}".repeat(1000), `{"k":"${"x".repeat(900_000)}"}`),
  fc.record({ action: fc.constantFrom("delete_identity", "update_identity"), datasetId: fc.oneof(fc.constant(datasetA), hostileString), identities: fc.array(jsonValue, { maxLength: 3 }), fieldUpdates: jsonValue }).map((v) => JSON.stringify(v)),
);

const pathId = fc.oneof(hostileString, fc.constantFrom(...["x", "00000000-0000-0000-0000-000000000000"]), fc.nat({ max: 3 }).map((i) => foreignIds[i] ?? "x"));
const query = fc.dictionary(fc.constantFrom("start", "limit", "offset", "page", "orderBy", "property", "name", "syncValidation", "dataStreamId", "schema.name", "entityId", "entityIdNS", "startTime", "endTime", "quotaType", "status", "search", "fields"), hostileString, { maxKeys: 4 });

let tried = 0;
let slowest = { ms: 0, what: "" };
let lastEnded = performance.now();
const statuses = new Map<number, number>();

test(`fuzz: ${SECONDS} s of hostile requests at every route; no 5xx, JSON errors, org B unchanged`, { timeout: (SECONDS + 120) * 1000 }, async () => {
  const op = fc.nat({ max: operations.length - 1 }).map((i) => operations[i]!);
  lastEnded = performance.now();
  // A failure's message is cut short: counterexamples can hold megabytes of generated text.
  await fc.assert(
    fc.asyncProperty(op, fc.array(pathId, { minLength: 4, maxLength: 4 }), query, body, fc.constantFrom("application/json", "application/x-ndjson", "text/plain", ""), async (o, ids, q, payload, contentType) => {
      let i = 0;
      const path = o.path.replace(/\{[^}]+\}|\*/g, () => encodeSegment(ids[i++ % ids.length]!));
      const qs = new URLSearchParams(q).toString();
      const url = `${h.url}${path}${qs === "" ? "" : `?${qs}`}`;
      const headers: Record<string, string> = { authorization: "Bearer token-org-a", "x-api-key": "test-api-key", "x-gw-ims-org-id": "AAAAAAAAAAAAAAAAAAAAAAAA@AdobeOrg", "x-sandbox-name": "prod" };
      const withBody = payload !== undefined && o.method !== "GET" && o.method !== "DELETE";
      if (withBody && contentType !== "") headers["content-type"] = contentType;
      const started = performance.now();
      assert.ok(started - lastEnded <= MAX_MS, `the event loop was held ${Math.round(started - lastEnded)} ms after the previous request`);
      const r = await fetch(url, { method: o.method, headers, ...(withBody ? { body: contentType === "" ? new Blob([payload]) : payload } : {}), signal: AbortSignal.timeout(10_000) });
      const text = await r.text();
      const ms = performance.now() - started;
      tried++;
      if (ms > slowest.ms) slowest = { ms, what: `${o.method} ${o.path}` };
      lastEnded = performance.now();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      const shown = `${o.method} ${url.slice(0, 300)} body ${(payload ?? "").slice(0, 200)} → ${r.status} ${text.slice(0, 300)}`;
      assert.ok(r.status < 500, shown);
      assert.ok(ms <= MAX_MS, `${shown} took ${Math.round(ms)} ms, over ${MAX_MS} ms`);
      if (r.status >= 400) {
        assert.match(r.headers.get("content-type") ?? "", /json/, shown);
        JSON.parse(text);
      }
    }),
    { seed: SEED, numRuns: 1_000_000, interruptAfterTimeLimit: SECONDS * 1000, markInterruptAsFailure: false, endOnFailure: true },
  ).catch((err: unknown) => {
    const e = err as Error & { cause?: Error };
    throw new Error(`${e.message.slice(0, 1500)}\ncause: ${String(e.cause?.message ?? "").slice(0, 1500)}`);
  });
  console.log(`fuzz: seed ${SEED}, ${tried} requests over ${operations.length} operations, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((x, y) => x[0] - y[0])))}, slowest ${Math.round(slowest.ms)} ms (${slowest.what})`);
  assert.ok(tried > 50, `only ${tried} cases ran`);
  assert.equal((await a.get("/healthz")).status, 200);
  assert.equal((await a.get("/readyz")).status, 200);
  assert.equal(await stateOfB(), snapshotB, "org B's data changed");
});

/** Requests whose cost grows with data: segment search and PQL with several bindings over events. */
const costly: fc.Arbitrary<{ method: string; path: string; body?: unknown }> = fc.oneof(
  fc.tuple(fc.constantFrom("namespaces", "entities"), luceneQuery).map(([route, s]) => ({
    method: "GET", path: `/data/core/ups/search/${route}?schema.name=_xdm.context.segmentdefinition&namespace=AEPSegments&s=${encodeURIComponent(s)}`,
  })),
  pqlBindings.map((q) => ({ method: "POST", path: "/data/core/ups/segment/definitions/explain", body: { expression: { type: "PQL", format: "pql/text", value: q }, entityId: "heavy@fz.test", entityIdNS: "Email" } })),
  pqlBindings.map((q) => ({ method: "POST", path: "/data/core/ups/preview", body: { predicateExpression: q, predicateType: "pql/text", graphType: "none" } })),
  fc.array(pqlBindings, { minLength: 1, maxLength: 3 }).map((expressions) => ({ method: "POST", path: "/data/core/ups/segment/builder/estimate", body: { expressions } })),
  pqlBindings.map((q) => ({ method: "POST", path: "/data/core/ups/segment/definitions", body: definitionBody("fz bindings", q) })),
);

test(`fuzz: ${Math.round(SECONDS / 2)} s of costly searches and multi-binding PQL; no 5xx, none over ${MAX_MS} ms`, { timeout: (SECONDS + 120) * 1000 }, async () => {
  let n = 0;
  const seen = new Map<number, number>();
  let worst = { ms: 0, what: "" };
  // The server shares this process's event loop: work it does after answering (a preview, a
  // definition's first evaluation) shows as a gap before the next request starts.
  let previous = { ended: performance.now(), what: "start" };
  await fc.assert(
    fc.asyncProperty(costly, async (c) => {
      const started = performance.now();
      assert.ok(started - previous.ended <= MAX_MS, `the event loop was held ${Math.round(started - previous.ended)} ms after ${previous.what}`);
      const r = await a.call(c.method, c.path, c.body);
      const ms = performance.now() - started;
      n++;
      seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
      if (ms > worst.ms) worst = { ms, what: `${c.method} ${c.path.slice(0, 200)}` };
      previous = { ended: performance.now(), what: `${c.method} ${c.path.slice(0, 300)} ${JSON.stringify(c.body ?? "").slice(0, 300)} → ${r.status}` };
      const shown = `${c.method} ${c.path.slice(0, 300)} ${JSON.stringify(c.body ?? "").slice(0, 300)} → ${r.status} ${r.text.slice(0, 300)}`;
      assert.ok(r.status < 500, shown);
      assert.ok(ms <= MAX_MS, `${shown} took ${Math.round(ms)} ms, over ${MAX_MS} ms`);
      if (r.status >= 400) assert.match(r.headers.get("content-type") ?? "", /json/, shown);
    }),
    { seed: SEED, numRuns: 1_000_000, interruptAfterTimeLimit: (SECONDS / 2) * 1000, markInterruptAsFailure: false, endOnFailure: true },
  ).catch((err: unknown) => {
    const e = err as Error & { cause?: Error };
    throw new Error(`${e.message.slice(0, 1500)}\ncause: ${String(e.cause?.message ?? "").slice(0, 1500)}`);
  });
  console.log(`fuzz (costly): seed ${SEED}, ${n} requests, statuses ${JSON.stringify(Object.fromEntries([...seen].sort((x, y) => x[0] - y[0])))}, slowest ${Math.round(worst.ms)} ms (${worst.what})`);
  assert.ok(n > 10, `only ${n} cases ran`);
  assert.equal((await a.get("/healthz")).status, 200);
  assert.equal(await stateOfB(), snapshotB, "org B's data changed");
});
