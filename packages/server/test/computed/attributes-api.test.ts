/**
 * AEP's computed attributes API over HTTP (/data/core/ca/attributes): create, get, list with
 * limit/offset/sortBy/property/status, PATCH under AEP's status rules, delete of drafts; every
 * bad input with its exact status, code and message and nothing stored; the per-sandbox limit;
 * another org's or sandbox's id answered 404 without its data. Runs on both stores.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../src/platform/clock.js";
import { ORG_A, ORG_B, TOKEN_B, arr, client, obj, startHarness, type Client, type Harness, type Res } from "../helpers/server-harness.js";

const CA = "/data/core/ca/attributes";
const T0 = Date.parse("2026-03-01T00:00:00Z");

let h: Harness;
let a: Client;
let dev: Client;
let b: Client;
const clock = new ManualClock(T0);

const SUM_EXPR = 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)';

function body(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    displayName: `Display ${name}`,
    description: `About ${name}`,
    expression: { type: "PQL", format: "pql/text", value: SUM_EXPR },
    duration: { count: 7, unit: "DAYS" },
    status: "DRAFT",
    ...extra,
  };
}

function expr(value: string): Record<string, unknown> {
  return { type: "PQL", format: "pql/text", value };
}

/** The UPS error's status, code (the end of its type) and message (title). */
function err(r: Res): { status: number; code: unknown; message: unknown } {
  const e = obj(r.json);
  assert.equal(e.status, r.status);
  return { status: r.status, code: String(e.type).split("/").pop(), message: e.title };
}

async function names(c: Client = a): Promise<string[]> {
  const r = await c.get(`${CA}?limit=40`);
  assert.equal(r.status, 200, r.text);
  return arr(obj(r.json).computedAttributes).map((x) => obj(x).name as string).sort();
}

before(async () => {
  h = await startHarness("ca-api", {
    clock,
    patch: (c) => {
      c.organizations[0]!.sandboxes[1]!.limits = { computedAttributes: 2 };
    },
  });
  // Published attributes stay NEW here (the status rules of NEW are tested); processing.test.ts lets them run.
  h.server.app.computed!.processor!.pause();
  a = client(h.url);
  dev = client(h.url, { sandbox: "dev" });
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
});
after(async () => h.close());

describe("computed attributes API", () => {
  test("create returns AEP's object; get returns the same", async () => {
    const r = await a.post(CA, body("totalSpend", { keepCurrent: true }));
    assert.equal(r.status, 200, r.text);
    const ca = obj(r.json);
    assert.match(ca.id as string, /^[0-9a-f-]{36}$/);
    assert.equal(ca.type, "ComputedAttribute");
    assert.equal(ca.name, "totalSpend");
    assert.equal(ca.displayName, "Display totalSpend");
    assert.equal(ca.description, "About totalSpend");
    assert.equal(ca.imsOrgId, ORG_A);
    assert.deepEqual(ca.sandbox, { sandboxId: obj(ca.sandbox).sandboxId, sandboxName: "prod", type: "production", isDefault: true });
    assert.equal(ca.path, "_aaaaaaaaaaaaaaaaaaaaaaaa/ComputedAttributes");
    assert.deepEqual(ca.positionPath, ["_aaaaaaaaaaaaaaaaaaaaaaaa", "ComputedAttributes"]);
    assert.equal(ca.keepCurrent, true);
    assert.deepEqual(ca.expression, expr(SUM_EXPR));
    assert.deepEqual(ca.duration, { count: 7, unit: "DAYS" });
    assert.deepEqual(ca.mergeFunction, { value: "SUM" });
    assert.equal(ca.status, "DRAFT");
    assert.deepEqual(ca.schema, { name: "_xdm.context.profile" });
    assert.deepEqual(ca.returnSchema, { "meta:xdmType": "number" });
    assert.deepEqual(ca.definedOn, [{ "meta:resourceType": "unions", "meta:containerId": "tenant", $ref: "https://ns.adobe.com/xdm/context/profile__union" }]);
    assert.equal(ca.createEpoch, T0);
    assert.equal(ca.updateEpoch, T0);
    const g = await a.get(`${CA}/${ca.id as string}`);
    assert.equal(g.status, 200);
    assert.deepEqual(g.json, ca);
  });

  test("every function is recognised, with its return type", async () => {
    const cases: [string, string, string, string][] = [
      ["countViews", 'xEvent[eventType = "commerce.productViews"].count()', "COUNT", "integer"],
      ["minOrder", "xEvent.min(commerce.order.priceTotal)", "MIN", "number"],
      ["lastSeen", "xEvent.max(timestamp)", "MAX", "date-time"],
      ["lastProduct", 'xEvent[eventType = "commerce.productViews"].topN(timestamp, 1).map({"timestamp": timestamp, "value": productListItems.name}).head()', "MOST_RECENT", "object"],
      ["lastOrders", "xEvent.topN(timestamp, 50).map(commerce.order.purchaseID)", "LIST", "array"],
    ];
    for (const [name, value, fn, type] of cases) {
      clock.advance(1000);
      const r = await a.post(CA, body(name, { expression: expr(value), duration: { count: 24, unit: "HOURS" }, status: "NEW" }));
      assert.equal(r.status, 200, `${name}: ${r.text}`);
      assert.deepEqual(obj(r.json).mergeFunction, { value: fn }, name);
      assert.deepEqual(obj(r.json).returnSchema, { "meta:xdmType": type }, name);
      assert.equal(obj(r.json).status, "NEW");
    }
  });

  test("list: default order -updateEpoch, limit/offset pages and links, sortBy, property and status filters", async () => {
    const all = await a.get(CA);
    assert.equal(all.status, 200);
    const page = obj(obj(all.json)._page);
    assert.deepEqual(page, { offset: 0, limit: 20, count: 6, totalCount: 6 });
    const order = arr(obj(all.json).computedAttributes).map((x) => obj(x).name);
    assert.deepEqual(order, ["lastOrders", "lastProduct", "lastSeen", "minOrder", "countViews", "totalSpend"]);

    const p1 = await a.get(`${CA}?limit=2&offset=2&sortBy=name`);
    const j1 = obj(p1.json);
    assert.deepEqual(arr(j1.computedAttributes).map((x) => obj(x).name), ["lastProduct", "lastSeen"]);
    assert.deepEqual(j1._page, { offset: 2, limit: 2, count: 2, totalCount: 6 });
    assert.deepEqual(j1._links, {
      self: { href: `${CA}?offset=2&limit=2&sortBy=name` },
      next: { href: `${CA}?offset=4&limit=2&sortBy=name` },
      prev: { href: `${CA}?offset=0&limit=2&sortBy=name` },
    });
    const last = obj((await a.get(`${CA}?limit=2&offset=4&sortBy=name`)).json);
    assert.equal(obj(last._links).next, undefined);

    const desc = await a.get(`${CA}?sortBy=-name`);
    assert.deepEqual(arr(obj(desc.json).computedAttributes).map((x) => obj(x).name), ["totalSpend", "minOrder", "lastSeen", "lastProduct", "lastOrders", "countViews"]);

    const q = (s: string) => a.get(`${CA}?${s}`).then((r) => arr(obj(r.json).computedAttributes).map((x) => obj(x).name as string).sort());
    assert.deepEqual(await q("property=name=totalSpend"), ["totalSpend"]);
    assert.deepEqual(await q("property=name!=totalSpend"), ["countViews", "lastOrders", "lastProduct", "lastSeen", "minOrder"]);
    assert.deepEqual(await q(`property=${encodeURIComponent("name=contains(last)")}`), ["lastOrders", "lastProduct", "lastSeen"]);
    assert.deepEqual(await q(`property=${encodeURIComponent("name=!contains(last)")}`), ["countViews", "minOrder", "totalSpend"]);
    assert.deepEqual(await q("property=mergeFunction.value=MAX"), ["lastSeen"]);
    assert.deepEqual(await q(`property=${encodeURIComponent(`createEpoch>=${T0 + 3000}`)}`), ["lastOrders", "lastProduct", "lastSeen"]);
    assert.deepEqual(await q(`property=${encodeURIComponent(`updateEpoch<=${T0 + 1000}`)}`), ["countViews", "totalSpend"]);
    assert.deepEqual(await q(`property=${encodeURIComponent(`createEpoch>=${T0 + 1000}`)}&property=${encodeURIComponent("name=contains(Order)")}`), ["lastOrders", "minOrder"]);
    assert.deepEqual(await q("status=draft"), ["totalSpend"]);
    assert.deepEqual(await q("status=NEW"), ["countViews", "lastOrders", "lastProduct", "lastSeen", "minOrder"]);
    assert.deepEqual(await q("property=status=DRAFT"), ["totalSpend"]);
    // status and mergeFunction.value: any case, contains(...) a comma list (the guide's status=contains(new,processing,disabled)).
    assert.deepEqual(await q("property=status=draft"), ["totalSpend"]);
    assert.deepEqual(await q(`property=${encodeURIComponent("status=contains(draft,disabled)")}`), ["totalSpend"]);
    assert.deepEqual(await q(`property=${encodeURIComponent("status=!contains(new,processing)")}`), ["totalSpend"]);
    assert.deepEqual(await q(`property=${encodeURIComponent("mergeFunction.value=contains(min,max)")}`), ["lastSeen", "minOrder"]);
    assert.deepEqual(await q("property=name=totalspend"), [], "a name compares as written");
  });

  test("bad list parameters: 400 with the parameter named", async () => {
    const cases: [string, string, string][] = [
      ["sortBy=size", "SEGMENTD-CA-400", 'Invalid sortBy "size": use name, status, updateEpoch or createEpoch, with a leading - for descending order'],
      ["property=size=3", "SEGMENTD-CA-400", 'Invalid property filter "size=3": use name, mergeFunction.value or status with =, !=, =contains(...) or =!contains(...), or createEpoch or updateEpoch with >= or <='],
      ["status=running", "SEGMENTD-CA-400", 'Invalid status "running": use draft, new, processing, processed, failed or disabled'],
      ["limit=41", "UPLIB-101206-500", "Invalid request: querystring limit must be <= 40"],
      ["limit=0", "UPLIB-101206-500", "Invalid request: querystring limit must be >= 1"],
    ];
    for (const [qs, code, message] of cases) {
      const r = await a.get(`${CA}?${qs}`);
      assert.deepEqual(err(r), { status: 400, code, message }, qs);
    }
  });

  test("bad create bodies: exact 400s, nothing stored", async () => {
    const before = await names();
    const cases: [Record<string, unknown>, string, string][] = [
      [body("x", { expression: expr("xEvent.average(commerce.order.priceTotal)") }), "SEGMENTD-CA-400",
        "Unknown function 'average': a computed attribute's function is SUM (.sum(field)), COUNT (.count()), MIN (.min(field)), MAX (.max(field)), MOST_RECENT (.topN(timestamp, 1).map({\"timestamp\": timestamp, \"value\": field}).head()) or LIST (.topN(timestamp, N).map(field))"],
      [body("x", { expression: expr('homeAddress.countryCode = "US"') }), "SEGMENTD-CA-400",
        "The expression must be xEvent[condition] followed by one function: SUM (.sum(field)), COUNT (.count()), MIN (.min(field)), MAX (.max(field)), MOST_RECENT (.topN(timestamp, 1).map({\"timestamp\": timestamp, \"value\": field}).head()) or LIST (.topN(timestamp, N).map(field))"],
      [body("x", { expression: expr("xEvent.sum(eventType)") }), "SEGMENTD-CA-400", "SUM needs a numeric field; 'eventType' is a string"],
      [body("x", { expression: expr('xEvent.sum("12")') }), "SEGMENTD-PQL-400", "The PQL expression is invalid (1 error)"],
      [body("x", { expression: expr("xEvent.sum(web.webPageDetails.name)") }), "SEGMENTD-CA-400", "SUM needs a numeric field; 'web.webPageDetails.name' is a string"],
      [body("x", { expression: expr("xEvent.sum(timestamp)") }), "SEGMENTD-CA-400", "SUM needs a numeric field; 'timestamp' is a timestamp"],
      [body("x", { expression: expr("xEvent.min(eventType)") }), "SEGMENTD-CA-400", "MIN needs a numeric or timestamp field; 'eventType' is a string"],
      [body("x", { expression: expr("xEvent.max(commerce.order.currencyCode)") }), "SEGMENTD-CA-400", "MAX needs a numeric or timestamp field; 'commerce.order.currencyCode' is a string"],
      [body("x", { expression: expr("xEvent.topN(timestamp, 51).map(commerce.order.purchaseID)") }), "SEGMENTD-CA-400", "LIST keeps from 1 to 50 values (got 51)"],
      [body("x", { expression: expr("xEvent.topN(timestamp, 2).map({\"timestamp\": timestamp, \"value\": eventType}).head()") }), "SEGMENTD-CA-400",
        'MOST_RECENT is written xEvent[condition].topN(timestamp, 1).map({"timestamp": timestamp, "value": field}).head()'],
      [body("x", { expression: expr("xEvent.count(eventType)") }), "SEGMENTD-PQL-400", "The PQL expression is invalid (1 error)"],
      [body("x", { expression: expr("xEvent[_aaaaaaaaaaaaaaaaaaaaaaaa.ComputedAttributes.totalSpend > 10].count()") }), "SEGMENTD-CA-400",
        "A computed attribute cannot be built on another computed attribute ('_aaaaaaaaaaaaaaaaaaaaaaaa.ComputedAttributes.totalSpend'): its expression reads experience events only"],
      [body("x", { expression: expr("xEvent[eventType = ") }), "SEGMENTD-PQL-400", "The PQL expression is invalid (1 error)"],
      [body("x", { expression: { type: "SQL", format: "pql/text", value: "xEvent.count()" } }), "SEGMENTD-CA-400", 'expression.type must be "PQL" (got "SQL")'],
      [body("x", { expression: { type: "PQL", format: "pql/json", value: "xEvent.count()" } }), "SEGMENTD-CA-400", 'expression.format must be "pql/text" (got "pql/json")'],
      [body("x", { duration: { count: 25, unit: "HOURS" } }), "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 24 for HOURS (got 25)"],
      [body("x", { duration: { count: 8, unit: "DAYS" } }), "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 7 for DAYS (got 8)"],
      [body("x", { duration: { count: 5, unit: "WEEKS" } }), "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 4 for WEEKS (got 5)"],
      [body("x", { duration: { count: 7, unit: "MONTHS" } }), "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 6 for MONTHS (got 7)"],
      [body("x", { duration: { count: 0, unit: "DAYS" } }), "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 7 for DAYS (got 0)"],
      [body("x", { duration: { count: 1, unit: "YEARS" } }), "SEGMENTD-CA-400", 'duration.unit must be HOURS, DAYS, WEEKS or MONTHS (got "YEARS")'],
      [body("my_attr"), "SEGMENTD-CA-400", 'name may hold only letters and digits, a letter first, at most 100 (no spaces or underscores): got "my_attr"'],
      [body("two words"), "SEGMENTD-CA-400", 'name may hold only letters and digits, a letter first, at most 100 (no spaces or underscores): got "two words"'],
      [body("x", { status: "PROCESSED" }), "SEGMENTD-CA-400", 'status must be DRAFT or NEW when a computed attribute is created (got "PROCESSED")'],
      [body("totalSpend"), "SEGMENTD-CA-DUPLICATE-400", "Function with the same name already exists for the specified schema or definedOn"],
      [{ ...body("x"), duration: undefined }, "UPLIB-101206-500", "Invalid request: duration is required"],
      [{ ...body("x"), extra: 1 }, "UPLIB-101206-500", "Invalid request: extra is not allowed"],
    ];
    for (const [b0, code, message] of cases) {
      const r = await a.post(CA, b0);
      assert.deepEqual(err(r), { status: 400, code, message }, JSON.stringify(b0));
    }
    // The PQL diagnostics name the problem and its place.
    const sumString = await a.post(CA, body("x", { expression: expr('xEvent.sum("12")') }));
    assert.deepEqual(arr(obj(obj(sumString.json).errors)["400"]).map((i) => obj(i).code), ["PQL_ARGUMENT_TYPE"]);
    assert.deepEqual(await names(), before);
  });

  test("PATCH follows AEP's status rules", async () => {
    const created = obj((await a.post(CA, body("patchMe"))).json);
    const id = created.id as string;
    clock.advance(5000);
    // DRAFT: anything but the name, and status NEW.
    const p1 = await a.patch(`${CA}/${id}`, { description: "new words", expression: expr("xEvent.count()"), duration: { count: 2, unit: "WEEKS" } });
    assert.equal(p1.status, 200, p1.text);
    assert.equal(obj(p1.json).description, "new words");
    assert.deepEqual(obj(p1.json).mergeFunction, { value: "COUNT" });
    assert.deepEqual(obj(p1.json).duration, { count: 2, unit: "WEEKS" });
    assert.equal(obj(p1.json).updateEpoch, clock.now());
    assert.equal(obj(p1.json).createEpoch, created.createEpoch);
    const bad = async (patch: Record<string, unknown>, code: string, message: string) => {
      const before = (await a.get(`${CA}/${id}`)).json;
      assert.deepEqual(err(await a.patch(`${CA}/${id}`, patch)), { status: 400, code, message }, JSON.stringify(patch));
      assert.deepEqual((await a.get(`${CA}/${id}`)).json, before, "nothing changed");
    };
    await bad({ status: "DISABLED" }, "SEGMENTD-CA-STATUS-400", 'A computed attribute in status DRAFT can only change to NEW (got "DISABLED")');
    await bad({ status: "DONE" }, "SEGMENTD-CA-400", 'status must be one of DRAFT, NEW, PROCESSING, PROCESSED, FAILED, DISABLED (got "DONE")');
    await bad({ expression: expr("xEvent.sum(eventType)") }, "SEGMENTD-CA-400", "SUM needs a numeric field; 'eventType' is a string");
    await bad({ duration: { count: 9, unit: "DAYS" } }, "SEGMENTD-CA-400", "duration.count must be an integer from 1 to 7 for DAYS (got 9)");
    await bad({}, "SEGMENTD-CA-400", "The request changes nothing: send displayName, description, status, expression, duration or keepCurrent");
    await bad({ name: "renamed" }, "UPLIB-101206-500", "Invalid request: name is not allowed");
    const p2 = await a.patch(`${CA}/${id}`, { status: "NEW", displayName: "Published" });
    assert.equal(p2.status, 200, p2.text);
    assert.equal(obj(p2.json).status, "NEW");
    // NEW: displayName, description and status DISABLED.
    await bad({ expression: expr("xEvent.count()"), duration: { count: 3, unit: "WEEKS" } }, "SEGMENTD-CA-STATUS-400",
      "duration cannot be changed while the computed attribute is NEW: only displayName, description and the status can change");
    await bad({ keepCurrent: true }, "SEGMENTD-CA-STATUS-400", "keepCurrent cannot be changed while the computed attribute is NEW: only displayName, description and the status can change");
    await bad({ status: "DRAFT" }, "SEGMENTD-CA-STATUS-400", 'A computed attribute in status NEW can only change to DISABLED (got "DRAFT")');
    const p3 = await a.patch(`${CA}/${id}`, { description: "still editable" });
    assert.equal(obj(p3.json).description, "still editable");
    // Deleting a published attribute is refused (AEP deletes drafts only).
    const del = await a.delete(`${CA}/${id}`);
    assert.deepEqual(err(del), { status: 422, code: "SEGMENTD-CA-DELETE-422", message: 'Only a DRAFT computed attribute can be deleted; this one is NEW (disable it with PATCH {"status": "DISABLED"})' });
    const p4 = await a.patch(`${CA}/${id}`, { status: "DISABLED" });
    assert.equal(obj(p4.json).status, "DISABLED");
    await bad({ description: "x" }, "SEGMENTD-CA-STATUS-400", "description cannot be changed while the computed attribute is DISABLED: only the status can change");
    await bad({ status: "NEW" }, "SEGMENTD-CA-STATUS-400", 'A computed attribute in status DISABLED cannot change any more (got "NEW")');
  });

  test("delete: a draft, 202 with the deleted attribute; then 404", async () => {
    const created = obj((await a.post(CA, body("deleteMe"))).json);
    const id = created.id as string;
    const d = await a.delete(`${CA}/${id}`);
    assert.equal(d.status, 202);
    assert.deepEqual(d.json, created);
    assert.deepEqual(err(await a.get(`${CA}/${id}`)), { status: 404, code: "SEGMENTD-NOT-FOUND-404", message: `Computed attribute with id '${id}' was not found` });
    assert.deepEqual(err(await a.delete(`${CA}/${id}`)), { status: 404, code: "SEGMENTD-NOT-FOUND-404", message: `Computed attribute with id '${id}' was not found` });
  });

  test("another org's or sandbox's id is 404 and its data is untouched", async () => {
    const mine = obj((await a.post(CA, body("privateOne"))).json);
    const id = mine.id as string;
    const missing = { status: 404, code: "SEGMENTD-NOT-FOUND-404", message: `Computed attribute with id '${id}' was not found` };
    for (const c of [b, dev]) {
      assert.deepEqual(err(await c.get(`${CA}/${id}`)), missing);
      const p = await c.patch(`${CA}/${id}`, { description: "stolen" });
      assert.deepEqual(err(p), missing);
      assert.equal(p.text.includes("privateOne"), false);
      assert.deepEqual(err(await c.delete(`${CA}/${id}`)), missing);
      assert.equal((await names(c)).includes("privateOne"), false);
    }
    assert.deepEqual((await a.get(`${CA}/${id}`)).json, mine);
    // The same name is free in another org.
    const theirs = await b.post(CA, body("privateOne"));
    assert.equal(theirs.status, 200, theirs.text);
    assert.equal(obj(theirs.json).path, "_bbbbbbbbbbbbbbbbbbbbbbbb/ComputedAttributes");
  });

  test("the per-sandbox limit counts attributes that are not disabled; nothing stored past it", async () => {
    const one = obj((await dev.post(CA, body("first"))).json);
    assert.equal((await dev.post(CA, body("second"))).status, 200);
    const over = await dev.post(CA, body("third"));
    assert.deepEqual(err(over), { status: 400, code: "SEGMENTD-LIMIT-400", message: "This sandbox has 2 computed attributes that are not disabled, its limit; disable or delete one first" });
    assert.deepEqual(await names(dev), ["first", "second"]);
    // A disabled attribute frees its place.
    await dev.patch(`${CA}/${one.id as string}`, { status: "NEW" });
    await dev.patch(`${CA}/${one.id as string}`, { status: "DISABLED" });
    assert.equal((await dev.post(CA, body("third"))).status, 200);
  });

  test("concurrent creates of one name: exactly one succeeds", async () => {
    const rs = await Promise.all(Array.from({ length: 6 }, () => a.post(CA, body("raced"))));
    assert.deepEqual(rs.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400]);
    assert.equal((await names()).filter((n) => n === "raced").length, 1);
  });

  test("the headers are checked as on every route", async () => {
    const r = await client(h.url, { sandbox: null }).get(CA);
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error_code: "400003", message: "Missing header: x-sandbox-name" });
    const t = await client(h.url, { token: null }).get(CA);
    assert.deepEqual(t.json, { error_code: "403010", message: "Oauth token is missing" });
  });
});
