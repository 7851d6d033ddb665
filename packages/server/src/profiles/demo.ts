// Deterministic generator of a realistic retail dataset, as plain XDM records
// with identityMap (ECID, Email, CRMID). `segmentd demo` and the dev bootstrap
// send these through the public ingestion API; benchmarks use them too.
//
// Everything derives from (seed, index), so profile i has the same identities
// and attributes however many profiles are generated, and events reference
// profiles by index without holding them in memory: 1M profiles and 10M events
// stream through generators.
import type { DatasetInput, JsonObject } from "./types.js";

export interface DemoOptions {
  profiles: number;
  events: number;
  /** End of the 90-day window (epoch ms); events fall in [now - days, now). */
  now: number;
  seed?: number;
  days?: number;
  /** Share of events from anonymous visitors whose ECID is never linked (default 0.05). */
  anonymousShare?: number;
}

export const DEMO_DATASETS: Readonly<Record<"profiles" | "events", DatasetInput>> = {
  profiles: { name: "Demo retail CRM profiles", schemaClass: "profile", profileEnabled: true, description: "Customers with addresses, consents and loyalty" },
  events: { name: "Demo retail web, commerce and email events", schemaClass: "experienceevent", profileEnabled: true, description: "Page views, product views, cart adds, purchases, email opens" },
};

/** mulberry32: small, fast, good enough for test data, and identical everywhere. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function mix(seed: number, i: number, salt: number): number {
  let h = (seed ^ Math.imul(i + 1, 0x9e3779b1) ^ Math.imul(salt, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  return Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
}

function pick<T>(r: () => number, list: readonly T[]): T {
  return list[Math.floor(r() * list.length)]!;
}

const FIRST = ["Ava", "Liam", "Mia", "Noah", "Emma", "Lucas", "Sofia", "Leo", "Chloe", "Hugo", "Ines", "Omar", "Yuki", "Ravi", "Lena", "Mateo", "Zoe", "Ethan", "Nora", "Ali"];
const LAST = ["Smith", "Martin", "Garcia", "Muller", "Rossi", "Tanaka", "Khan", "Silva", "Dubois", "Novak", "Brown", "Kim", "Jensen", "Lopez", "Weber", "Costa"];
interface Place { countryCode: string; currency: string; cities: ReadonlyArray<[string, string]> }
const PLACES: readonly Place[] = [
  { countryCode: "US", currency: "USD", cities: [["New York", "NY"], ["Austin", "TX"], ["Seattle", "WA"], ["Chicago", "IL"], ["Denver", "CO"]] },
  { countryCode: "GB", currency: "GBP", cities: [["London", "ENG"], ["Manchester", "ENG"], ["Edinburgh", "SCT"]] },
  { countryCode: "DE", currency: "EUR", cities: [["Berlin", "BE"], ["Munich", "BY"], ["Hamburg", "HH"]] },
  { countryCode: "FR", currency: "EUR", cities: [["Paris", "IDF"], ["Lyon", "ARA"], ["Marseille", "PAC"]] },
  { countryCode: "CA", currency: "CAD", cities: [["Toronto", "ON"], ["Vancouver", "BC"]] },
  { countryCode: "AU", currency: "AUD", cities: [["Sydney", "NSW"], ["Melbourne", "VIC"]] },
];
// US-heavy mix, as in a typical retailer's customer base.
const PLACE_WEIGHTS = [0.4, 0.15, 0.13, 0.12, 0.1, 0.1];
const TIERS = ["bronze", "silver", "gold", "platinum"];
const TIER_WEIGHTS = [0.55, 0.28, 0.13, 0.04];
const CATEGORIES = ["shoes", "apparel", "outdoor", "home", "electronics", "beauty"];
const PRODUCTS = Array.from({ length: 40 }, (_, i) => ({
  SKU: `SKU-${String(1000 + i)}`,
  name: `${pick(rng(i + 7), ["Trail", "City", "Classic", "Pro", "Eco", "Cozy"])} ${CATEGORIES[i % CATEGORIES.length]} item ${i + 1}`,
  category: CATEGORIES[i % CATEGORIES.length]!,
  price: Math.round((5 + rng(i + 101)() * 245) * 100) / 100,
}));
const PAGES = ["home", "category", "search", "product", "cart", "checkout", "account", "stores"];

function weighted<T>(r: () => number, list: readonly T[], weights: readonly number[]): T {
  let x = r();
  for (let i = 0; i < list.length; i++) {
    x -= weights[i]!;
    if (x < 0) return list[i]!;
  }
  return list[list.length - 1]!;
}

export function demoEcid(seed: number, i: number): string {
  return `${String(mix(seed, i, 1)).padStart(10, "0")}${String(mix(seed, i, 2)).padStart(10, "0")}`;
}
export function demoEmail(seed: number, i: number): string {
  return `customer${i}.${(mix(seed, i, 3) % 10000).toString(36)}@example.com`;
}
/** Seed 1 keeps its original ids; another seed makes other customers, so that loading it never rewrites seed 1's profiles. */
export function demoCrmId(seed: number, i: number): string {
  return `CRM${seed === 1 ? "" : `${seed}-`}${String(i).padStart(8, "0")}`;
}

export function demoProfile(i: number, opts: Pick<DemoOptions, "now" | "seed">): JsonObject {
  const seed = opts.seed ?? 1;
  const r = rng(mix(seed, i, 10));
  const place = weighted(r, PLACES, PLACE_WEIGHTS);
  const [city, state] = pick(r, place.cities);
  const first = pick(r, FIRST);
  const last = pick(r, LAST);
  const nowYear = new Date(opts.now).getUTCFullYear();
  const birth = new Date(Date.UTC(nowYear - 18 - Math.floor(r() * 60), Math.floor(r() * 12), 1 + Math.floor(r() * 28)));
  const tier = weighted(r, TIERS, TIER_WEIGHTS);
  const optOutMarketing = r() < 0.08;
  const email = demoEmail(seed, i);
  return {
    identityMap: {
      CRMID: [{ id: demoCrmId(seed, i), primary: true, authenticatedState: "authenticated" }],
      Email: [{ id: email }],
      ECID: [{ id: demoEcid(seed, i) }],
    },
    person: { name: { firstName: first, lastName: last, fullName: `${first} ${last}` }, birthDate: birth.toISOString().slice(0, 10) },
    homeAddress: { street1: `${1 + Math.floor(r() * 999)} ${pick(r, ["Main", "Oak", "High", "Park", "Lake"])} Street`, city, stateProvince: state,
      postalCode: String(10000 + Math.floor(r() * 89999)), countryCode: place.countryCode },
    personalEmail: { address: email, primary: true, status: "active" },
    mobilePhone: { number: `+1555${String(mix(seed, i, 4) % 10_000_000).padStart(7, "0")}` },
    loyalty: { tier, points: Math.floor(r() * (tier === "platinum" ? 50000 : tier === "gold" ? 20000 : 5000)),
      joinDate: new Date(opts.now - Math.floor(r() * 5 * 365) * 86_400_000).toISOString().slice(0, 10) },
    consents: {
      marketing: { preferred: optOutMarketing ? "n" : "y", email: { val: optOutMarketing || r() < 0.1 ? "n" : "y" } },
      collect: { val: r() < 0.02 ? "n" : "y" },
    },
    preferredCurrency: place.currency,
  };
}

export function* demoProfiles(opts: DemoOptions): Generator<JsonObject> {
  for (let i = 0; i < opts.profiles; i++) yield demoProfile(i, opts);
}

/** The profile's currency without building the profile: the place is its first random draw. */
function currencyOf(seed: number, i: number): string {
  return weighted(rng(mix(seed, i, 10)), PLACES, PLACE_WEIGHTS).currency;
}

export function demoEvent(k: number, opts: DemoOptions): JsonObject {
  const seed = opts.seed ?? 1;
  const days = opts.days ?? 90;
  const r = rng(mix(seed, k, 20));
  const span = days * 86_400_000;
  const timestamp = new Date(opts.now - 1 - Math.floor(r() * span)).toISOString();
  const anonymous = r() < (opts.anonymousShare ?? 0.05) || opts.profiles === 0;
  // Skewed activity: a few customers generate many events.
  const i = Math.floor(opts.profiles * r() * r());
  const _id = `demo-${seed}-${k}`;
  const ecid = anonymous ? `anon-${(mix(seed, k, 21) % Math.max(1, Math.floor(opts.events / 20) + 1)).toString(36)}` : demoEcid(seed, i);
  const webId = { ECID: [{ id: ecid, primary: true, authenticatedState: anonymous ? "ambiguous" : "authenticated" }] };
  const kind = weighted(r, ["page", "view", "add", "purchase", "email"], [0.45, 0.25, 0.12, 0.06, 0.12]);
  const product = pick(r, PRODUCTS);
  const item = (p: typeof product, quantity: number) => ({ SKU: p.SKU, name: p.name, productCategories: [{ categoryID: p.category }], quantity,
    priceTotal: Math.round(p.price * quantity * 100) / 100, currencyCode: anonymous ? "USD" : currencyOf(seed, i) });
  switch (kind) {
    case "page": {
      const page = pick(r, PAGES);
      return { _id, timestamp, eventType: "web.webpagedetails.pageViews", identityMap: webId,
        web: { webPageDetails: { name: page, URL: `https://shop.example.com/${page}`, pageViews: { value: 1 } } } };
    }
    case "view":
      return { _id, timestamp, eventType: "commerce.productViews", identityMap: webId, commerce: { productViews: { value: 1 } }, productListItems: [item(product, 1)] };
    case "add":
      return { _id, timestamp, eventType: "commerce.productListAdds", identityMap: webId, commerce: { productListAdds: { value: 1 } }, productListItems: [item(product, 1)] };
    case "purchase": {
      const items = [item(product, 1 + Math.floor(r() * 3))];
      if (r() < 0.4) items.push(item(pick(r, PRODUCTS), 1));
      const priceTotal = Math.round(items.reduce((s, x) => s + x.priceTotal, 0) * 100) / 100;
      return { _id, timestamp, eventType: "commerce.purchases", identityMap: webId, productListItems: items,
        commerce: { purchases: { value: 1 }, order: { purchaseID: `ORD-${seed}-${k}`, priceTotal, currencyCode: items[0]!.currencyCode } } };
    }
    default:
      if (anonymous) {
        return { _id, timestamp, eventType: "web.webpagedetails.pageViews", identityMap: webId, web: { webPageDetails: { name: "home", URL: "https://shop.example.com/home", pageViews: { value: 1 } } } };
      }
      return { _id, timestamp, eventType: "directMarketing.emailOpened", identityMap: { Email: [{ id: demoEmail(seed, i), primary: true }] },
        directMarketing: { opens: { value: 1 }, campaign: pick(r, ["spring-sale", "loyalty-bonus", "new-arrivals", "back-in-stock"]) } };
  }
}

export function* demoEvents(opts: DemoOptions): Generator<JsonObject> {
  for (let k = 0; k < opts.events; k++) yield demoEvent(k, opts);
}
