/**
 * Property-based fuzzing of every route (issue #22, acceptance 2): generated hostile bodies,
 * records, PQL, query parameters and path ids from org A, over real HTTP. For every case:
 * no 5xx, a JSON error body for every 4xx, an answer within 10 s, and afterwards the
 * service still serves and org B's data is exactly as it was.
 *
 * Bounded by time: SEGMENTD_FUZZ_SECONDS (default 40 in `npm test`; `npm run test:fuzz`
 * runs longer) and SEGMENTD_FUZZ_SEED to replay a run. Prints the cases tried.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ORG_B, TOKEN_B, arr, client, obj, startHarness, type Client, type Harness } from "../helpers/server-harness.js";

const SECONDS = Number(process.env.SEGMENTD_FUZZ_SECONDS ?? 40);
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
const statuses = new Map<number, number>();

test(`fuzz: ${SECONDS} s of hostile requests at every route; no 5xx, JSON errors, org B unchanged`, { timeout: (SECONDS + 120) * 1000 }, async () => {
  const op = fc.nat({ max: operations.length - 1 }).map((i) => operations[i]!);
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
      const r = await fetch(url, { method: o.method, headers, ...(withBody ? { body: contentType === "" ? new Blob([payload]) : payload } : {}), signal: AbortSignal.timeout(10_000) });
      const text = await r.text();
      tried++;
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      const shown = `${o.method} ${url.slice(0, 300)} body ${(payload ?? "").slice(0, 200)} → ${r.status} ${text.slice(0, 300)}`;
      assert.ok(r.status < 500, shown);
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
  console.log(`fuzz: seed ${SEED}, ${tried} requests over ${operations.length} operations, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((x, y) => x[0] - y[0])))}`);
  assert.ok(tried > 50, `only ${tried} cases ran`);
  assert.equal((await a.get("/healthz")).status, 200);
  assert.equal((await a.get("/readyz")).status, 200);
  assert.equal(await stateOfB(), snapshotB, "org B's data changed");
});
