/**
 * Computed attribute values: the from-scratch reference (computed/values.ts) against the
 * rewritten aggregate (computed/rewrite.ts) evaluated by PQL's interpreter, its compiled
 * closures and its columnar engine, for every function and every lookback unit, at checkpoints
 * that move the windows (month ends included), over seeded random events.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compile, compileColumnar, evaluate, format, parse, rowColumnarData, toBoolean } from "@segmentd/pql";
import { computeValue, lookbackStart, referenceDefinition } from "../../src/computed/values.js";
import { attributeNameOf, referencedAttributes, rewriteComputedAttributes } from "../../src/computed/rewrite.js";
import type { ComputedAttributeRecord, DurationUnit } from "../../src/stores/computed-attributes.js";

const TENANT = "acme";
type Attr = Pick<ComputedAttributeRecord, "expression" | "duration">;
const attr = (value: string, count: number, unit: DurationUnit): Attr => ({ expression: { type: "PQL", format: "pql/text", value }, duration: { count, unit } });

const ATTRS = new Map<string, Attr>([
  ["spend24h", attr('xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)', 24, "HOURS")],
  ["spend3d", attr("xEvent.sum(commerce.order.priceTotal)", 3, "DAYS")],
  ["views2w", attr('xEvent[eventType = "commerce.productViews"].count()', 2, "WEEKS")],
  ["visits1h", attr("xEvent.count()", 1, "HOURS")],
  ["minOrder6m", attr("xEvent.min(commerce.order.priceTotal)", 6, "MONTHS")],
  ["maxOrder7d", attr("xEvent.max(commerce.order.priceTotal)", 7, "DAYS")],
  ["lastSeen1m", attr("xEvent.max(timestamp)", 1, "MONTHS")],
  ["firstSeen4w", attr("xEvent.min(timestamp)", 4, "WEEKS")],
  ["lastPage4w", attr('xEvent[eventType = "web.webpagedetails.pageViews"].topN(timestamp, 1).map({"timestamp": timestamp, "value": web.webPageDetails.name}).head()', 4, "WEEKS")],
  ["lastOrders5d", attr('xEvent[eventType = "commerce.purchases"].topN(timestamp, 3).map(commerce.order.priceTotal)', 5, "DAYS")],
  ["pages2m", attr("xEvent.topN(timestamp, 2).map(web.webPageDetails.name)", 2, "MONTHS")],
]);

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const END = Date.parse("2026-03-31T12:00:00.000Z");
const SPAN = 210 * 86_400_000;

function profiles(seed: number, n: number): Record<string, unknown>[][] {
  const r = rng(seed);
  const out: Record<string, unknown>[][] = [];
  for (let p = 0; p < n; p++) {
    const events: Record<string, unknown>[] = [];
    const k = Math.floor(r() * 25);
    let last = 0;
    for (let i = 0; i < k; i++) {
      // Some events share a timestamp with the previous one: ties keep the given order.
      const at = r() < 0.1 && last !== 0 ? last : END - Math.floor(r() * SPAN);
      last = at;
      const kind = r();
      const timestamp = new Date(at).toISOString();
      if (kind < 0.35) events.push({ timestamp, eventType: "commerce.purchases", commerce: { order: { priceTotal: Math.round(r() * 50000) / 100 } } });
      else if (kind < 0.6) events.push({ timestamp, eventType: "commerce.productViews", commerce: { productViews: { value: 1 } } });
      else if (kind < 0.9) events.push({ timestamp, eventType: "web.webpagedetails.pageViews", web: { webPageDetails: { name: `page-${Math.floor(r() * 6)}` } } });
      else events.push({ timestamp, eventType: "commerce.purchases" });
    }
    out.push(events);
  }
  return out;
}

const CHECKPOINTS = [
  END,
  Date.parse("2026-03-31T00:00:00.000Z"),
  Date.parse("2026-03-29T23:00:00.000Z"),
  Date.parse("2026-03-01T00:30:00.000Z"),
  Date.parse("2026-02-28T12:00:00.000Z"),
  Date.parse("2025-12-31T23:59:59.999Z"),
];

test("the lookback starts N units before now; months are calendar months, day clamped", () => {
  const now = Date.parse("2026-03-31T12:00:00.000Z");
  assert.equal(new Date(lookbackStart(now, { count: 1, unit: "MONTHS" })).toISOString(), "2026-02-28T12:00:00.000Z");
  assert.equal(new Date(lookbackStart(now, { count: 6, unit: "MONTHS" })).toISOString(), "2025-09-30T12:00:00.000Z");
  assert.equal(new Date(lookbackStart(now, { count: 2, unit: "WEEKS" })).toISOString(), "2026-03-17T12:00:00.000Z");
  assert.equal(new Date(lookbackStart(now, { count: 24, unit: "HOURS" })).toISOString(), "2026-03-30T12:00:00.000Z");
  assert.equal(new Date(lookbackStart(now, { count: 7, unit: "DAYS" })).toISOString(), "2026-03-24T12:00:00.000Z");
});

test("the reference by hand: window ends, ties, empty windows", () => {
  const now = Date.parse("2026-03-10T00:00:00.000Z");
  const ev = (iso: string, extra: Record<string, unknown> = {}) => ({ timestamp: iso, ...extra });
  const events = [
    ev("2026-03-09T00:00:00.000Z", { eventType: "commerce.purchases", commerce: { order: { priceTotal: 10 } } }), // exactly 24h before: inside
    ev("2026-03-10T00:00:00.000Z", { eventType: "commerce.purchases", commerce: { order: { priceTotal: 1000 } } }), // at now: outside
    ev("2026-03-09T12:00:00.000Z", { eventType: "commerce.purchases", commerce: { order: { priceTotal: 5 } } }),
    ev("2026-03-09T12:00:00.000Z", { eventType: "commerce.purchases", commerce: { order: { priceTotal: 7 } } }),
    ev("2026-03-08T23:59:59.999Z", { eventType: "commerce.purchases", commerce: { order: { priceTotal: 100 } } }), // just before: outside
  ];
  assert.equal(computeValue(referenceDefinition(ATTRS.get("spend24h")!), events, now), 22);
  assert.deepEqual(computeValue(referenceDefinition(attr('xEvent.topN(timestamp, 3).map(commerce.order.priceTotal)', 24, "HOURS")), events, now), [5, 7, 10]);
  assert.deepEqual(computeValue(referenceDefinition(attr('xEvent.topN(timestamp, 1).map({"timestamp": timestamp, "value": commerce.order.priceTotal}).head()', 1, "HOURS")), events, now), null);
  assert.equal(computeValue(referenceDefinition(attr("xEvent.min(commerce.order.priceTotal)", 1, "HOURS")), events, now), null);
  assert.equal(computeValue(referenceDefinition(attr("xEvent.sum(commerce.order.priceTotal)", 1, "HOURS")), events, now), 0);
});

test("paths: the tenant's, with or without the underscore, and AEP's SystemComputedAttributes; another tenant's is left alone", () => {
  assert.equal(attributeNameOf("_acme.ComputedAttributes.spend3d", TENANT), "spend3d");
  assert.equal(attributeNameOf("acme.ComputedAttributes.spend3d", TENANT), "spend3d");
  assert.equal(attributeNameOf("_acme.SystemComputedAttributes.spend3d", TENANT), "spend3d");
  assert.equal(attributeNameOf("_other.ComputedAttributes.spend3d", TENANT), null);
  const q = parse("_acme.ComputedAttributes.spend3d > 10 and _other.ComputedAttributes.x > 1 and acme.ComputedAttributes.views2w >= 1");
  assert.deepEqual(referencedAttributes(q, TENANT), ["spend3d", "views2w"]);
  const r = rewriteComputedAttributes(q, TENANT, ATTRS);
  assert.equal(format(r),
    "xEvent[timestamp occurs <= 3 days before now].sum(commerce.order.priceTotal) > 10 and _other.ComputedAttributes.x > 1 and " +
    'xEvent[eventType = "commerce.productViews" and timestamp occurs <= 2 weeks before now].count() >= 1');
  const none = parse('homeAddress.countryCode = "US"');
  assert.equal(rewriteComputedAttributes(none, TENANT, ATTRS), none);
});

test("every function and unit: the rewritten aggregate equals the reference in the interpreter and the compiled closures", () => {
  const all = profiles(41, 400);
  let nonEmpty = 0;
  for (const [name, a] of ATTRS) {
    let mine = 0;
    const def = referenceDefinition(a);
    const q = rewriteComputedAttributes(parse(`_acme.ComputedAttributes.${name}`), TENANT, ATTRS);
    const closure = compile(q);
    for (const now of CHECKPOINTS) {
      for (const events of all) {
        const want = computeValue(def, events, now);
        const ctx = { profile: {}, events, now };
        assert.deepEqual(evaluate(q, ctx), want, `${name} interpreter at ${new Date(now).toISOString()}`);
        assert.deepEqual(closure(ctx), want, `${name} closures at ${new Date(now).toISOString()}`);
        if (want !== null && want !== 0 && !(Array.isArray(want) && want.length === 0)) mine++;
      }
    }
    assert.ok(mine > 0, `${name} is empty for every profile at every checkpoint`);
    nonEmpty += mine;
  }
  // The data exercises the windows: a good part of the values are not empty.
  assert.ok(nonEmpty > ATTRS.size * CHECKPOINTS.length * 400 * 0.25, `only ${nonEmpty} non-empty values`);
});

test("definitions over computed attributes: the columnar engine's members equal the reference's", () => {
  const all = profiles(7, 300);
  const data = rowColumnarData(all.map((events) => ({ profile: {}, events })));
  const ref = (name: string, events: Record<string, unknown>[], now: number) => computeValue(referenceDefinition(ATTRS.get(name)!), events, now);
  const defs: [string, (events: Record<string, unknown>[], now: number) => boolean][] = [
    ["_acme.ComputedAttributes.spend24h > 100", (e, n) => (ref("spend24h", e, n) as number) > 100],
    ["_acme.ComputedAttributes.spend3d >= 250 and _acme.ComputedAttributes.views2w >= 1", (e, n) => (ref("spend3d", e, n) as number) >= 250 && (ref("views2w", e, n) as number) >= 1],
    ["_acme.ComputedAttributes.minOrder6m < 20", (e, n) => { const v = ref("minOrder6m", e, n); return v !== null && (v as number) < 20; }],
    ["_acme.ComputedAttributes.visits1h > 0 or _acme.ComputedAttributes.maxOrder7d > 400", (e, n) => (ref("visits1h", e, n) as number) > 0 || ((ref("maxOrder7d", e, n) as number | null) ?? -1) > 400],
    ['_acme.ComputedAttributes.lastPage4w.value = "page-3"', (e, n) => (ref("lastPage4w", e, n) as { value: unknown } | null)?.value === "page-3"],
  ];
  for (const [text, want] of defs) {
    const q = rewriteComputedAttributes(parse(text), TENANT, ATTRS);
    for (const now of CHECKPOINTS) {
      const out = new Uint8Array(all.length);
      compileColumnar(q, { now }).run(data, out);
      const closure = compile(q);
      let members = 0;
      all.forEach((events, i) => {
        const expected = want(events, now);
        assert.equal(out[i] === 1, expected, `${text} columnar, profile ${i} at ${new Date(now).toISOString()}`);
        assert.equal(toBoolean(closure({ profile: {}, events, now })), expected, `${text} closures, profile ${i}`);
        if (expected) members++;
      });
      assert.ok(members < all.length, `${text} does not take everyone`);
    }
  }
});
