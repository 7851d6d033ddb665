/**
 * What the input limits cost per request (docs/reliability.md): CPU per body of the body parser
 * (http/body-parsing.ts: the depth pre-check of the text, JSON.parse, the walk of the value) and
 * of the per-record walk of profiles/validate.ts, against the bare JSON.parse every request pays
 * anyway, measured in the same run.
 *
 *   npm run bench:limits            (= node --conditions=source --import tsx bench/limits.ts)
 *   options: --ms 1500 (time per measurement), --rounds 5 (alternating rounds; the median is printed)
 */
import { parseArgs } from "node:util";
import { parseJsonBody } from "../packages/server/src/http/body-parsing.js";
import { RECORD_LIMITS, findViolation } from "../packages/server/src/platform/limits.js";

const { values: args } = parseArgs({ options: { ms: { type: "string", default: "1500" }, rounds: { type: "string", default: "5" } } });
const MS = Number(args.ms);
const ROUNDS = Number(args.rounds);

/** An edge interact body as the benches send it: one event, an identity map, a few XDM fields. */
const interact = JSON.stringify({
  event: {
    xdm: {
      identityMap: { ECID: [{ id: "12345678901234567890123456789012345678", primary: true, authenticatedState: "ambiguous" }] },
      eventType: "web.webpagedetails.pageViews",
      timestamp: "2026-11-27T06:00:00.000Z",
      web: { webPageDetails: { name: "home", URL: "https://example.com/home?x=1", pageViews: { value: 1 } }, webReferrer: { URL: "https://search.example/" } },
      device: { type: "desktop", screenWidth: 1920, screenHeight: 1080 },
      commerce: { productListViews: { value: 0 } },
    },
  },
  query: { personalization: { schemas: ["https://ns.adobe.com/personalization/default-content-item"] } },
});

/** A streaming ingestion body of 20 profile records with a dozen fields each. */
const collection = JSON.stringify({
  messages: Array.from({ length: 20 }, (_, i) => ({
    header: { datasetId: "5f0c5ad4a5b1a01915a4c4e1", schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } },
    body: { xdmEntity: { identityMap: { ECID: [{ id: `ecid-${i}`, primary: true }], Email: [{ id: `p${i}@example.com` }] }, person: { name: { firstName: "Ann", lastName: "Lee" }, birthDate: "1990-01-01" }, homeAddress: { city: "Paris", countryCode: "FR", postalCode: "75001" }, loyalty: { points: 1200 + i, tier: "gold" } } },
  })),
});

function perOp(fn: () => unknown): number {
  let n = 0;
  const end = performance.now() + MS;
  let sink = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 200; i++) if (fn() !== null) sink++;
    n += 200;
  }
  if (sink < 0) console.log(sink);
  return ((MS * 1000) / n);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

for (const [name, text, perRecord] of [["edge interact body", interact, false], ["/collection/batch, 20 records", collection, true]] as const) {
  const value: unknown = JSON.parse(text);
  const parse: number[] = [];
  const body: number[] = [];
  const records: number[] = [];
  const xdm = name.startsWith("edge") ? [(value as { event: { xdm: unknown } }).event.xdm] : (value as { messages: Array<{ body: { xdmEntity: unknown } }> }).messages.map((m) => m.body.xdmEntity);
  // Alternating rounds, medians: the host's speed drifts between seconds.
  for (let r = 0; r < ROUNDS; r++) {
    parse.push(perOp(() => JSON.parse(text)));
    body.push(perOp(() => parseJsonBody(text, perRecord)));
    records.push(perOp(() => { for (const x of xdm) findViolation(x, RECORD_LIMITS); return null; }));
  }
  const p = median(parse);
  const added = median(body) - p + median(records);
  console.log(`${name} (${text.length} bytes): JSON.parse ${p.toFixed(2)} µs; the body parser with its limits ${median(body).toFixed(2)} µs; the per-record walk ${median(records).toFixed(2)} µs; added by the limits ${added.toFixed(2)} µs per request (${((added / p) * 100).toFixed(0)} % of the parse)`);
}
