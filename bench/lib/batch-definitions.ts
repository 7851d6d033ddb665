/**
 * bench:batch's 100 definitions (audiences of 0.2–14 % over the demo data) and the hand-written
 * SQL of each, shared by bench/batch.ts and bench/shards.ts. NOW is the benches' evaluation instant.
 */
export const NOW = Date.UTC(2026, 10, 21);
export const DAY = 86_400_000;

export interface BenchDefinition {
  id: string;
  pql: string;
  /** The same audience over the hand-written query's aliases: f (profile attributes), ev (event measures). */
  sql: string;
}

/**
 * The hand-written query's building blocks: profile attributes extracted once per fragment (f),
 * event measures aggregated once per profile in one pass over the events (ev).
 */
export const F_COLUMNS: Record<string, string> = {
  tier: "$.loyalty.tier",
  points: "$.loyalty.points",
  joinDate: "$.loyalty.joinDate",
  country: "$.homeAddress.countryCode",
  city: "$.homeAddress.city",
  birthDate: "$.person.birthDate",
  mpref: "$.consents.marketing.preferred",
  collect: "$.consents.collect.val",
};
export const E_COLUMNS: Record<string, string> = {
  et: "$.eventType",
  camp: "$.directMarketing.campaign",
  page: "$.web.webPageDetails.name",
  total: "$.commerce.order.priceTotal",
};
export const NOT_OPTED_OUT = "NOT (coalesce(f.mpref, '') = 'n' OR coalesce(f.collect, '') = 'n')";

export function definitions(): { defs: BenchDefinition[]; measures: string[] } {
  const defs: BenchDefinition[] = [];
  const measures: string[] = [];
  const add = (pql: string, sql: string): BenchDefinition => {
    const d = { id: `bench-${String(defs.length).padStart(3, "0")}`, pql, sql };
    defs.push(d);
    return d;
  };
  /** An aggregate over the profile's events (e0 columns), as `coalesce(ev.mK, 0)`. */
  const measure = (aggregate: string): string => {
    measures.push(aggregate);
    return `coalesce(ev.m${measures.length - 1}, 0)`;
  };
  const inWindow = (days: number) => `e0.ts > ${NOW - days * DAY} AND e0.ts < ${NOW}`;
  const count = (where: string, days: number | null) => measure(`sum(CASE WHEN ${where}${days === null ? "" : ` AND ${inWindow(days)}`} THEN 1 ELSE 0 END)`);
  const sum = (where: string, days: number) => measure(`total(CASE WHEN ${where} AND ${inWindow(days)} THEN e0.total END)`);
  const types = ["commerce.purchases", "commerce.productViews", "commerce.productListAdds", "web.webpagedetails.pageViews", "directMarketing.emailOpened"];

  // Profile attributes (25).
  for (const t of ["gold", "platinum"]) add(`loyalty.tier = "${t}"`, `f.tier = '${t}'`);
  for (const c of ["GB", "DE", "FR", "CA", "AU"]) add(`homeAddress.countryCode = "${c}"`, `f.country = '${c}'`);
  add(`homeAddress.countryCode = "US" and loyalty.tier = "silver"`, `f.country = 'US' AND f.tier = 'silver'`);
  for (const n of [10000, 15000, 20000, 30000, 40000]) add(`loyalty.points > ${n}`, `f.points > ${n}`);
  for (const city of ["New York", "Austin", "Seattle", "Chicago", "Denver", "London", "Berlin", "Paris", "Toronto", "Sydney"]) {
    add(`homeAddress.city = "${city}" and loyalty.tier in ["gold", "platinum"]`, `f.city = '${city}' AND f.tier IN ('gold', 'platinum')`);
  }
  add(`homeAddress.city = "Munich" and loyalty.points >= 2500`, `f.city = 'Munich' AND f.points >= 2500`);
  add(`homeAddress.city = "Lyon" or homeAddress.city = "Marseille"`, `f.city IN ('Lyon', 'Marseille')`);
  // Dates as strings (compared as instants by PQL; ISO dates sort the same as text) (8).
  for (const y of [1950, 1960, 1970, 1980, 1990]) {
    add(`person.birthDate >= "${y}-01-01" and person.birthDate < "${y + 5}-01-01"`, `f.birthDate >= '${y}-01-01' AND f.birthDate < '${y + 5}-01-01'`);
  }
  for (const d of ["2026-06-01", "2026-10-01", "2026-03-01"]) add(`loyalty.joinDate >= "${d}"`, `f.joinDate >= '${d}'`);
  // Purchases counted in windows (10).
  const purchase = "e0.et = 'commerce.purchases'";
  const purchasesIn: Record<string, BenchDefinition> = {};
  for (const [d, k] of [[7, 1], [14, 1], [30, 1], [30, 2], [30, 3], [60, 2], [60, 3], [90, 2], [90, 3], [90, 4]] as const) {
    purchasesIn[`${d}/${k}`] = add(`xEvent[eventType = "commerce.purchases" and timestamp occurs < ${d} days before now].count() >= ${k}`, `${count(purchase, d)} >= ${k}`);
  }
  // Spend (sums) in windows (5).
  for (const [d, n] of [[30, 150], [30, 400], [60, 300], [90, 500], [90, 1000]] as const) {
    add(`xEvent[eventType = "commerce.purchases" and timestamp occurs < ${d} days before now].sum(commerce.order.priceTotal) > ${n}`, `${sum(purchase, d)} > ${n}`);
  }
  // One-step chains (15).
  for (const t of types) {
    for (const d of [1, 2, 5]) add(`chain(xEvent, timestamp, [A: WHAT(eventType = "${t}") WHEN(< ${d} days before now)])`, `${count(`e0.et = '${t}'`, d)} >= 1`);
  }
  // Negation: engaged customers without a recent conversion (8).
  for (const tier of ["gold", "platinum"]) {
    for (const [t, d] of [["commerce.purchases", 30], ["commerce.productListAdds", 14], ["directMarketing.emailOpened", 30], ["commerce.productViews", 7]] as const) {
      add(`loyalty.tier = "${tier}" and not (exists X from xEvent : (X.eventType = "${t}" and X.timestamp occurs < ${d} days before now))`,
        `f.tier = '${tier}' AND ${count(`e0.et = '${t}'`, d)} = 0`);
    }
  }
  // Tier × activity in 14 days (10).
  for (const tier of ["gold", "platinum"]) {
    for (const t of types) add(`loyalty.tier = "${tier}" and xEvent[eventType = "${t}" and timestamp occurs < 14 days before now].count() > 0`, `f.tier = '${tier}' AND ${count(`e0.et = '${t}'`, 14)} > 0`);
  }
  // Campaigns and pages (8).
  for (const c of ["spring-sale", "loyalty-bonus", "new-arrivals", "back-in-stock"]) {
    add(`xEvent[eventType = "directMarketing.emailOpened" and directMarketing.campaign = "${c}" and timestamp occurs < 30 days before now].count() > 0`,
      `${count(`e0.et = 'directMarketing.emailOpened' AND e0.camp = '${c}'`, 30)} > 0`);
  }
  for (const p of ["checkout", "cart", "account", "stores"]) {
    add(`xEvent[eventType = "web.webpagedetails.pageViews" and web.webPageDetails.name = "${p}" and timestamp occurs < 7 days before now].count() > 0`,
      `${count(`e0.et = 'web.webpagedetails.pageViews' AND e0.page = '${p}'`, 7)} > 0`);
  }
  // Country × recent purchase (5).
  for (const c of ["US", "GB", "DE", "FR", "CA"]) {
    add(`homeAddress.countryCode = "${c}" and xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() > 0`,
      `f.country = '${c}' AND ${count(purchase, 30)} > 0`);
  }
  // inSegment: segments of segments (6).
  const recent = purchasesIn["30/1"]!;
  const gold = defs[0]!;
  for (const c of ["US", "GB", "DE"]) add(`inSegment("${recent.id}") and homeAddress.countryCode = "${c}"`, `(${recent.sql}) AND ${NOT_OPTED_OUT} AND f.country = '${c}'`);
  for (const t of ["silver", "platinum"]) add(`inSegment("${recent.id}") and loyalty.tier = "${t}"`, `(${recent.sql}) AND ${NOT_OPTED_OUT} AND f.tier = '${t}'`);
  add(`inSegment("${gold.id}") and not inSegment("${recent.id}")`, `(${gold.sql}) AND ${NOT_OPTED_OUT} AND NOT ((${recent.sql}) AND ${NOT_OPTED_OUT})`);
  if (defs.length !== 100) throw new Error(`expected 100 definitions, built ${defs.length}`);
  return { defs, measures };
}

