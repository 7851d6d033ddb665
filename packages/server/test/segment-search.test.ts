/**
 * Segment search (#27): the Lucene query syntax over the sandbox's definitions, and the three
 * `/search/*` operations over real HTTP as Adobe's Postman collection sends them.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { compileSearch, type SearchDoc } from "../src/services/segment-search.js";
import { SearchBudget, SearchDeadlineError, SearchTooCostlyError } from "../src/services/search-budget.js";
import { SearchIndex, SearchIndexCache } from "../src/services/search-index.js";
import { globMatch, globSteps, runSearch, withinEdits } from "../src/services/search-match.js";
import { DEFS, ORG_B, TOKEN_B, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const DOCS: SearchDoc[] = [
  { id: "d-1", namespace: "AEPSegments", name: "Fast cars buyers", description: "People who bought red cars on the west coast", parentFolderId: "root" },
  { id: "d-2", namespace: "AEPSegments", name: "Slow boats", description: "Sailing fans", parentFolderId: "root" },
  { id: "d-3", namespace: "AEPSegments", name: "Red car fans", description: "Visited the car page twice", parentFolderId: "root" },
  { id: "d-4", namespace: "AEPSegments", name: "Gold loyalty (2024)", description: "", parentFolderId: "root" },
];

/** The ids of `docs` matching `s`, in the order of `docs`, through the index and the matcher the routes use. */
async function search(s: string | undefined, docs: SearchDoc[] = DOCS): Promise<string[]> {
  const plan = compileSearch(s);
  const index = new SearchIndex();
  await index.sync(docs, () => false, async () => {});
  const found = await runSearch(plan, index, new SearchBudget());
  return docs.filter((d) => found.has(d.id)).map((d) => d.id);
}

describe("the query language", () => {
  test("terms, fields, phrases, wildcards, fuzzy, regex, ranges and boolean logic", async () => {
    const cases: Array<[string | undefined, string[]]> = [
      [undefined, ["d-1", "d-2", "d-3", "d-4"]],
      ["*", ["d-1", "d-2", "d-3", "d-4"]],
      ["cars", ["d-1"]],
      ["CARS", ["d-1"]],
      ["car*", ["d-1", "d-3"]],
      ["c?r", ["d-3"]],
      ["segmentName:red", ["d-3"]],
      ["segmentDescription:red", ["d-1"]],
      ["red", ["d-1", "d-3"]],
      ['"red cars"', ["d-1"]],
      ['segmentName:"red fans"', []],
      ['segmentName:"red fans"~1', ["d-3"]],
      ["boat~1", ["d-2"]],
      ["boat~", ["d-1", "d-2"]],
      ["boat~2", ["d-1", "d-2"]],
      ["boats~0", ["d-2"]],
      ["boat~0.8", ["d-2"]],
      ["boat", []],
      ["segmentName:/c.r/", ["d-3"]],
      ["segmentName:/c.rs?/", ["d-1", "d-3"]],
      ["segmentName:[a TO c]", ["d-1", "d-2"]],
      ["segmentName:{buyers TO fans}", ["d-1", "d-3"]],
      ["segmentName:/C.R/", ["d-3"]],
      ["red AND fans", ["d-3"]],
      ["red && fans", ["d-3"]],
      ["red OR boats", ["d-1", "d-2", "d-3"]],
      ["red boats", ["d-1", "d-2", "d-3"]],
      ["red NOT fans", ["d-1"]],
      ["red AND NOT fans", ["d-1"]],
      ["+red -fans", ["d-1"]],
      ["NOT red", ["d-2", "d-4"]],
      ["(red OR boats) AND sailing", ["d-2"]],
      ["segmentName:(slow OR gold)", ["d-2", "d-4"]],
      ["2024", ["d-4"]],
      ["segmentId:d-2", ["d-2"]],
      ["segmentId:D-2", ["d-2"]],
      ["segmentId:d*", ["d-1", "d-2", "d-3", "d-4"]],
      ["parentFolderId:root AND gold", ["d-4"]],
      ["folderId:x", []],
      // The search objects' property names, as Adobe's examples write them (`s=name:test`).
      ["name:cars", ["d-1"]],
      ["description:sailing", ["d-2"]],
      ["id:D-3", ["d-3"]],
      ["name:(slow OR gold) AND NOT description:fans", ["d-4"]],
    ];
    for (const [s, expected] of cases) assert.deepEqual(await search(s), expected, String(s));
  });

  test("hostile and invalid queries are refused with a message", async () => {
    const cases: Array<[string, RegExp]> = [
      ["title:cars", /^Unknown search field 'title': use one of segmentName, segmentDescription, segmentId, folderId, folderLocation, parentFolderId$/],
      ["(cars", /^Invalid search query: /],
      ["segmentName:/(a/", /^Invalid regular expression \/\(a\/: /],
      ["segmentName:/(?=a)b/", /^Invalid regular expression \/\(\?=a\)b\/: /],
      ["(".repeat(17) + "a" + ")".repeat(17), /^The search query nests parentheses deeper than the limit of 16$/],
      ["a".repeat(1025), /^The search query is 1025 characters long, over the limit of 1024$/],
    ];
    for (const [s, message] of cases) assert.throws(() => compileSearch(s), { message }, s.slice(0, 40));
    // A catastrophic pattern for a backtracking engine runs in linear time here.
    const t0 = performance.now();
    assert.deepEqual(await search("segmentName:/(a+)+b/", [{ ...DOCS[0]!, name: "a".repeat(200) }]), []);
    assert.ok(performance.now() - t0 < 500);
  });

  test("glob and edit distance helpers", () => {
    assert.equal(globMatch("a*b*c", "axxbyyc"), true);
    assert.equal(globMatch("a*b*c", "axxbyy"), false);
    assert.equal(globMatch("*".repeat(50) + "b", "a".repeat(1000)), false);
    assert.equal(withinEdits("kitten", "sitting", 2), false);
    assert.equal(withinEdits("kitten", "sittin", 2), true);
  });
});

/** `n` documents whose descriptions hold 200 distinct words each (w0-0 … w{n-1}-199). */
function manyWords(n: number): SearchDoc[] {
  return Array.from({ length: n }, (_, k) => ({
    id: `m-${k}`, namespace: "AEPSegments", name: `Many ${k}`, parentFolderId: "root",
    description: Array.from({ length: 200 }, (_, j) => `w${k}x${j}`).join(" "),
  }));
}

async function indexOf(docs: SearchDoc[]): Promise<SearchIndex> {
  const index = new SearchIndex();
  await index.sync(docs, () => false, async () => {});
  return index;
}

describe("the index and the budget", () => {
  test("each distinct term is matched once, against the vocabulary", async () => {
    const index = await indexOf(manyWords(20));
    const once = new SearchBudget();
    await runSearch(compileSearch("segmentDescription:qqqq~2"), index, once);
    const repeated = new SearchBudget();
    await runSearch(compileSearch(`segmentDescription:(${Array.from({ length: 140 }, () => "qqqq~2").join(" ")})`), index, repeated);
    // One scan each; the 140 copies add only their group's combining of 140 bitmaps of 20 slots (20 × 141 units).
    assert.ok(once.units > 4000, `one scan of 4,000 words: ${once.units}`);
    assert.equal(repeated.units, once.units + 20 * 141);
  });

  test("a term past the units of work is refused with its name; one regex match that gives up too", async () => {
    const index = await indexOf(manyWords(20));
    const budget = new SearchBudget({ maxUnits: 10_000, deadlineMs: 60_000, sliceMs: 8 });
    await assert.rejects(runSearch(compileSearch("red OR segmentDescription:/(.*w){3}/"), index, budget), (err: unknown) => {
      assert.ok(err instanceof SearchTooCostlyError);
      assert.equal(err.message, "The search term 'segmentDescription:/(.*w){3}/' is too costly: matching it needs more than 10000 units of work, the limit of one search. Use a more specific term");
      return true;
    });
    const long = await indexOf([{ id: "l", namespace: "AEPSegments", name: "Long", parentFolderId: "root", description: "a".repeat(8000) }]);
    await assert.rejects(runSearch(compileSearch("/(.*a){20}/"), long, new SearchBudget({ maxUnits: 1e12, deadlineMs: 60_000, sliceMs: 8 })), {
      message: "The search term '/(.*a){20}/' is too costly: matching it needs more than 250000 units of work on one word, the limit of one regular expression match. Use a more specific term",
    });
  });

  test("a search past its deadline is refused, naming the term it was at", async () => {
    const index = await indexOf(manyWords(200));
    await assert.rejects(runSearch(compileSearch("segmentDescription:/.*q.*/"), index, new SearchBudget({ maxUnits: 1e12, deadlineMs: 0, sliceMs: 8 })), (err: unknown) => {
      assert.ok(err instanceof SearchDeadlineError);
      assert.equal(err.message, "The search did not finish within its deadline of 0 ms (at the term 'segmentDescription:/.*q.*/'). Retry later, or use a more specific query");
      return true;
    });
  });

  test("a long search yields the event loop between slices", async () => {
    const index = await indexOf(manyWords(200));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const started = performance.now();
    await runSearch(compileSearch("segmentDescription:/.*q.*/ segmentDescription:*x1*9"), index, new SearchBudget({ maxUnits: 1e12, deadlineMs: 60_000, sliceMs: 1 }));
    clearInterval(timer);
    const ms = performance.now() - started;
    // Timers ran while it worked: at least one per 50 ms of it (each slice is 1 ms of work).
    assert.ok(ticks >= Math.max(1, Math.floor(ms / 50)), `${ticks} timer ticks in ${ms.toFixed(0)} ms`);
  });

  test("the index follows its documents: changed, removed and new ones", async () => {
    const docs = DOCS.map((d) => ({ ...d }));
    const index = await indexOf(docs);
    const ids = async (s: string) => [...(await runSearch(compileSearch(s), index, new SearchBudget()))].sort();
    assert.deepEqual(await ids("red"), ["d-1", "d-3"]);
    docs[0] = { ...docs[0]!, description: "blue" };
    docs.splice(2, 1);
    docs.push({ id: "d-5", namespace: "AEPSegments", name: "Red shoes", description: "", parentFolderId: "root" });
    await index.sync(docs, () => false, async () => {});
    assert.deepEqual(await ids("red"), ["d-5"]);
    assert.deepEqual(await ids("blue OR sailing"), ["d-1", "d-2"]);
    assert.deepEqual(await ids('"red shoes"'), ["d-5"]);
    assert.equal(index.docCount, 4);
  });

  test("the cache runs one search of a sandbox at a time and drops the least recently used past its size", async () => {
    const cache = new SearchIndexCache(10_000);
    const order: string[] = [];
    const first = cache.exclusive("s1", async (index) => {
      order.push("first:start");
      await index.sync(manyWords(2), () => true, async () => new Promise((r) => setTimeout(r, 20)));
      order.push("first:end");
      return index;
    });
    const second = cache.exclusive("s1", async (index) => {
      order.push("second");
      return index;
    });
    const [a, b] = await Promise.all([first, second]);
    assert.deepEqual(order, ["first:start", "first:end", "second"]);
    assert.equal(a, b);
    await cache.exclusive("s2", (index) => index.sync(manyWords(3), () => false, async () => {}));
    // s1 (2 × ~1,300 characters), s2 and s3 (3 × ~1,300 each) are over 10,000: s1, the least recently used, goes.
    await cache.exclusive("s3", (index) => index.sync(manyWords(3), () => false, async () => {}));
    assert.equal(cache.size, 2);
    assert.notEqual(await cache.exclusive("s1", async (index) => index), a);
  });

  test("glob steps: one star costs at most the pattern", () => {
    assert.deepEqual(globSteps(`*${"a".repeat(255)}`, "a".repeat(8000)), { match: true, steps: 256 });
    assert.equal(globSteps("*b*c*d", `${"b".repeat(3000)}c`).match, false);
  });
});

describe("/search over HTTP", () => {
  let h: Harness;
  let a: Client;
  let b: Client;
  const SEARCH = "/data/core/ups/search";
  const POSTMAN = { "x-ups-search-version": "1.0", Accept: "application/json" };
  const created: Record<string, string> = {};

  before(async () => {
    h = await startHarness("search");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    for (const [name, description] of [["Fast cars buyers", "red cars"], ["Slow boats", "sailing"], ["Red car fans", "car page"]]) {
      created[name!] = obj((await a.post(DEFS, { ...definitionBody(name!, 'homeAddress.countryCode = "US"'), description })).json).id as string;
    }
    await b.post(DEFS, definitionBody("Other org's red cars", 'homeAddress.countryCode = "US"'));
  });
  after(async () => h.close());

  test("namespaces: the count of matches in AEPSegments", async () => {
    const r = await a.get(`${SEARCH}/namespaces?schema.name=_xdm.context.segmentdefinition&s=red`, POSTMAN);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { namespaces: [{ namespace: "AEPSegments", displayName: "AEPSegments", count: 2 }], totalCount: "1", status: { message: "Success" } });
  });

  test("entities: matches by name, paged, this sandbox's only", async () => {
    const r = await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=${encodeURIComponent("red OR boats")}&limit=2&page=0`, POSTMAN);
    assert.equal(r.status, 200);
    const body = obj(r.json);
    assert.deepEqual(body.page, { totalCount: 3, totalPages: 2, pageOffset: 0, pageSize: 2 });
    const entities = body.entities as Array<Record<string, unknown>>;
    assert.deepEqual(entities.map((e) => e.name), ["Fast cars buyers", "Red car fans"]);
    assert.deepEqual(entities[0], {
      id: created["Fast cars buyers"], base64EncodedSourceId: Buffer.from(JSON.stringify({ namespace: "AEPSegments", id: created["Fast cars buyers"] })).toString("base64"),
      sourceId: { namespace: "AEPSegments", id: created["Fast cars buyers"] }, isFolder: false, parentFolderId: "root", name: "Fast cars buyers", description: "red cars",
    });
    const next = obj((await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=${encodeURIComponent("red OR boats")}&limit=2&page=1`, POSTMAN)).json);
    assert.deepEqual((next.entities as Array<{ name: string }>).map((e) => e.name), ["Slow boats"]);
    const other = obj((await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AAMSegments`, POSTMAN)).json);
    assert.deepEqual(other.entities, []);
  });

  test("taxonomy: root-level objects have no folders; an unknown id says so", async () => {
    const r = await a.get(`${SEARCH}/taxonomy?schema.name=_xdm.context.segmentdefinition&namespace=AEPSegments&entityId=${created["Slow boats"]}`, POSTMAN);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { taxonomy: [], status: { message: "Success" } });
    const unknown = await a.get(`${SEARCH}/taxonomy?schema.name=_xdm.context.segmentdefinition&namespace=AEPSegments&entityId=nope`, POSTMAN);
    assert.deepEqual(unknown.json, { taxonomy: [], status: { message: "Cannot find entityId nope." } });
  });

  test("bad requests: 400 in the UPS shape with the reason", async () => {
    const cases: Array<[string, Record<string, string>, string]> = [
      [`${SEARCH}/namespaces`, POSTMAN, "The query parameter schema.name (or schemaClass) is required"],
      [`${SEARCH}/namespaces?schema.name=_xdm.context.profile`, POSTMAN, "Unsupported schema '_xdm.context.profile': only _xdm.context.segmentdefinition is searchable"],
      [`${SEARCH}/namespaces?schema.name=_xdm.context.segmentdefinition`, { "x-ups-search-version": "2.0" }, "Unsupported x-ups-search-version '2.0': the only supported version is 1.0"],
      [`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition`, POSTMAN, "The query parameter namespace is required"],
      [`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=title:x`, POSTMAN, "Unknown search field 'title': use one of segmentName, segmentDescription, segmentId, folderId, folderLocation, parentFolderId"],
      [`${SEARCH}/taxonomy?schema.name=_xdm.context.segmentdefinition&namespace=AEPSegments`, POSTMAN, "The query parameter entityId is required"],
    ];
    for (const [url, headers, message] of cases) {
      const r = await a.get(url, headers);
      assert.equal(r.status, 400, url);
      const body = obj(r.json);
      assert.equal(body.type, "https://ns.adobe.com/aep/errors/SEGMENTD-SEARCH-400", url);
      assert.equal(body.title, message);
    }
    const big = await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&limit=51`, POSTMAN);
    assert.equal(big.status, 400);
  });

  test("Adobe's example query `s=name:test` (segmentation.yaml), sent verbatim, answers", async () => {
    const id = obj((await a.post(DEFS, { ...definitionBody("test audience", 'homeAddress.countryCode = "US"'), description: "made for the example" })).json).id as string;
    try {
      const ns = await a.get(`${SEARCH}/namespaces?schema.name=_xdm.context.segmentdefinition&s=name:test`, POSTMAN);
      assert.equal(ns.status, 200);
      assert.deepEqual(ns.json, { namespaces: [{ namespace: "AEPSegments", displayName: "AEPSegments", count: 1 }], totalCount: "1", status: { message: "Success" } });
      const ents = await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=name:test&limit=10&page=0`, POSTMAN);
      assert.equal(ents.status, 200);
      assert.deepEqual((obj(ents.json).entities as Array<{ id: string }>).map((e) => e.id), [id]);
      // `name` is the name only: a description holding the word does not match.
      const none = await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=name:example`, POSTMAN);
      assert.deepEqual(obj(none.json).entities, []);
    } finally {
      await a.delete(`${DEFS}/${id}`);
    }
  });

  test("another organization's token sees its own sandbox only", async () => {
    const r = await b.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=AEPSegments&s=red`, POSTMAN);
    assert.deepEqual((obj(r.json).entities as Array<{ name: string }>).map((e) => e.name), ["Other org's red cars"]);
  });

  test("external audiences are searched in their own namespace", async () => {
    const ext = obj((await a.post("/data/core/ups/audiences", { name: "Uploaded red list", type: "ExternalSegment", audienceId: "red-upload" })).json);
    await a.post("/data/core/ups/audiences", { name: "Uploaded blue list", type: "ExternalSegment", audienceId: "blue-upload" });
    const ns = await a.get(`${SEARCH}/namespaces?schema.name=_xdm.context.segmentdefinition&s=red`, POSTMAN);
    assert.deepEqual(obj(ns.json).namespaces, [
      { namespace: "AEPSegments", displayName: "AEPSegments", count: 2 },
      { namespace: "CustomerAudienceUpload", displayName: "CustomerAudienceUpload", count: 1 },
    ]);
    const r = obj((await a.get(`${SEARCH}/entities?schemaClass=_xdm.context.segmentdefinition&namespace=CustomerAudienceUpload&s=red`, POSTMAN)).json);
    assert.deepEqual((r.entities as Array<{ id: string }>).map((e) => e.id), [ext.id]);
    const tax = await a.get(`${SEARCH}/taxonomy?schema.name=_xdm.context.segmentdefinition&namespace=CustomerAudienceUpload&entityId=${ext.id as string}`, POSTMAN);
    assert.deepEqual(tax.json, { taxonomy: [], status: { message: "Success" } });
    const wrongNs = await a.get(`${SEARCH}/taxonomy?schema.name=_xdm.context.segmentdefinition&namespace=AEPSegments&entityId=${ext.id as string}`, POSTMAN);
    assert.deepEqual(wrongNs.json, { taxonomy: [], status: { message: `Cannot find entityId ${ext.id as string}.` } });
  });
});
