/**
 * Issue #41, acceptance 1: the scripted stream and its checks, run in process
 * (computed/equivalence.test.ts) and on streaming workers (workers/computed.workers.test.ts).
 *
 * 25 computed attributes cover every function and every duration unit; each is read by a
 * definition (continuous when streaming-eligible, and always a batch twin). The stream is cut in
 * five parts; after most of a part the clock moves (windows close), then recent events come. At
 * every checkpoint the values the profile access API reports and the members of every definition
 * must equal a from-scratch recomputation (written here independently of computed/values.ts) over
 * the events sent so far. How events reach the server, how the clock moves and how members are
 * read is the deployment's (a `Driver`).
 */
import assert from "node:assert/strict";
import { DEFS, arr, definitionBody, obj, runSegmentJob, type Client } from "./server-harness.js";

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
/** Noon on March 31st: a month back clamps to February 28th. */
export const T0 = Date.parse("2026-03-31T12:00:00.000Z");
/** Clock moves after each part of the stream: across hours, a day, days, weeks and months. */
export const STEPS = [HOUR + 17 * 60_000, 13 * HOUR, 2 * DAY + 5 * HOUR, 9 * DAY, 35 * DAY];
const TYPES = ["t0", "t1", "t2", "t3", "t4"];
/** Records a request. */
const REQUEST = 200;

type Fn = "SUM" | "COUNT" | "MIN" | "MAX" | "MOST_RECENT" | "LIST";
type Unit = "HOURS" | "DAYS" | "WEEKS" | "MONTHS";
export interface Attr { name: string; fn: Fn; type: string | null; field: "price" | "page" | "timestamp"; count: number; unit: Unit; list: number }

const SPEC: Array<[Fn, number, Unit, "price" | "page" | "timestamp"]> = [
  ["SUM", 1, "HOURS", "price"], ["COUNT", 6, "HOURS", "price"], ["MIN", 12, "HOURS", "price"], ["MAX", 23, "HOURS", "price"], ["SUM", 24, "HOURS", "price"],
  ["COUNT", 3, "HOURS", "price"], ["MOST_RECENT", 2, "HOURS", "page"], ["LIST", 4, "HOURS", "page"],
  ["SUM", 7, "DAYS", "price"], ["COUNT", 1, "DAYS", "price"], ["MIN", 3, "DAYS", "price"], ["MAX", 2, "DAYS", "timestamp"], ["MOST_RECENT", 5, "DAYS", "page"], ["LIST", 7, "DAYS", "page"],
  ["SUM", 2, "WEEKS", "price"], ["COUNT", 4, "WEEKS", "price"], ["MIN", 1, "WEEKS", "price"], ["MAX", 3, "WEEKS", "price"], ["MOST_RECENT", 4, "WEEKS", "page"],
  ["SUM", 6, "MONTHS", "price"], ["COUNT", 1, "MONTHS", "price"], ["MIN", 3, "MONTHS", "price"], ["MAX", 2, "MONTHS", "price"], ["MOST_RECENT", 1, "MONTHS", "page"], ["LIST", 6, "MONTHS", "page"],
];
export const ATTRS: Attr[] = SPEC.map(([fn, count, unit, field], i) => ({ name: `ca${i}`, fn, count, unit, field, type: i % 6 === 5 ? null : TYPES[i % TYPES.length]!, list: 1 + (i % 5) }));

function expression(a: Attr): string {
  const events = a.type === null ? "xEvent" : `xEvent[eventType = "${a.type}"]`;
  const field = a.field === "price" ? "commerce.order.priceTotal" : a.field === "page" ? "web.webPageDetails.name" : "timestamp";
  switch (a.fn) {
    case "SUM": return `${events}.sum(${field})`;
    case "COUNT": return `${events}.count()`;
    case "MIN": return `${events}.min(${field})`;
    case "MAX": return `${events}.max(${field})`;
    case "MOST_RECENT": return `${events}.topN(timestamp, 1).map({"timestamp": timestamp, "value": ${field}}).head()`;
    case "LIST": return `${events}.topN(timestamp, ${a.list}).map(${field})`;
  }
}

/** The definition reading an attribute, and the same test over the recomputed value at `now`. */
function reading(a: Attr, tenant: string): { pql: string; holds: (v: unknown, now: number) => boolean } {
  const p = `${tenant}.ComputedAttributes.${a.name}`;
  switch (a.fn) {
    case "SUM": return { pql: `${p} > 400`, holds: (v) => (v as number) > 400 };
    case "COUNT": return { pql: `${p} >= 2`, holds: (v) => (v as number) >= 2 };
    case "MIN": return { pql: `${p} < 100`, holds: (v) => v !== null && (v as number) < 100 };
    case "MAX":
      return a.field === "timestamp"
        ? { pql: `${p} occurs <= 1 day before now`, holds: (v, now) => v !== null && Date.parse(v as string) >= now - DAY }
        : { pql: `${p} > 450`, holds: (v) => v !== null && (v as number) > 450 };
    case "MOST_RECENT": return { pql: `${p}.value = "page1"`, holds: (v) => v !== null && (v as { value: unknown }).value === "page1" };
    case "LIST": return { pql: `"page2" in ${p}`, holds: (v) => (v as unknown[]).includes("page2") };
  }
}

interface Sent { timestamp: string; at: number; eventType: string; price: number; page: string }

/** From scratch: the attribute's value over a profile's events at `now`, by AEP's rules as docs/computed-attributes.md states them. */
function recompute(a: Attr, events: readonly Sent[], now: number): unknown {
  let start: number;
  if (a.unit === "MONTHS") {
    const d = new Date(now);
    const first = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - a.count, 1));
    const lastDay = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 0)).getUTCDate();
    start = Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
  } else {
    start = now - a.count * { HOURS: HOUR, DAYS: DAY, WEEKS: 7 * DAY }[a.unit];
  }
  const inside = events.filter((e) => e.at >= start && e.at < now && (a.type === null || e.eventType === a.type));
  const value = (e: Sent): number | string => (a.field === "price" ? e.price : a.field === "page" ? e.page : e.timestamp);
  const latest = () => [...inside].sort((x, y) => y.at - x.at);
  switch (a.fn) {
    case "SUM": return inside.reduce((s, e) => s + e.price, 0);
    case "COUNT": return inside.length;
    case "MIN":
    case "MAX": {
      if (inside.length === 0) return null;
      const key = (e: Sent) => (a.field === "timestamp" ? e.at : e.price);
      const best = inside.reduce((b, e) => (a.fn === "MIN" ? key(e) < key(b) : key(e) > key(b)) ? e : b);
      return value(best);
    }
    case "MOST_RECENT": {
      const top = latest()[0];
      return top === undefined ? null : { timestamp: top.timestamp, value: value(top) };
    }
    case "LIST": return latest().slice(0, a.list).map(value);
  }
}

export const email = (i: number) => `p${i}@example.com`;

/** The profile records (one per profile, identified by Email), in requests. */
export function profileRequests(profiles: number): Array<Array<Record<string, unknown>>> {
  const out: Array<Array<Record<string, unknown>>> = [];
  for (let i = 0; i < profiles; i += REQUEST) {
    out.push(Array.from({ length: Math.min(REQUEST, profiles - i) }, (_, k) => ({ identityMap: { Email: [{ id: email(i + k), primary: true }] }, person: { name: { firstName: `P${i + k}` } } })));
  }
  return out;
}

export interface ReadingDefinition { attr: Attr; holds: (v: unknown, now: number) => boolean; continuous: string | null; batch: string }

/**
 * Creates the 25 attributes, then for each the definition reading it: continuous when the
 * eligibility API says it is streaming-eligible, and always a batch one.
 */
export async function createAttributesAndDefinitions(c: Client, tenant: string): Promise<ReadingDefinition[]> {
  for (const a of ATTRS) {
    const r = await c.post("/data/core/ca/attributes", { name: a.name, displayName: a.name, description: "", expression: { type: "PQL", format: "pql/text", value: expression(a) }, duration: { count: a.count, unit: a.unit }, status: "NEW" });
    assert.equal(r.status, 200, `${a.name}: ${r.text}`);
  }
  const defs: ReadingDefinition[] = [];
  for (const a of ATTRS) {
    const { pql, holds } = reading(a, tenant);
    const e = await c.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: pql } });
    assert.equal(e.status, 200, e.text);
    const methods = (continuous: boolean) => ({ evaluationInfo: { batch: { enabled: !continuous }, continuous: { enabled: continuous }, synchronous: { enabled: false } } });
    const create = async (name: string, continuous: boolean) => {
      const r = await c.post(DEFS, definitionBody(name, pql, methods(continuous)));
      assert.equal(r.status, 200, `${name}: ${r.text}`);
      return obj(r.json).id as string;
    };
    const continuous = obj(obj(e.json).eligible).continuous === true ? await create(`${a.name} streaming`, true) : null;
    defs.push({ attr: a, holds, continuous, batch: await create(`${a.name} batch`, false) });
  }
  // SUM, COUNT, MIN and MAX under 24 hours are streaming-eligible: 5 of the 25 here.
  assert.equal(defs.filter((d) => d.continuous !== null).length, 5);
  return defs;
}

/** How a deployment takes the stream and answers the checks. */
export interface Driver {
  client: Client;
  /** The tenant's field group name (`_<tenant id>`). */
  tenant: string;
  /** Profile id (as the access API's entityId) → email. */
  pidToEmail: Map<string, string>;
  /** Sends one request of event records: request `index` of `of` in part `part` (0-based), its most or its `recent` events. */
  send(records: Array<Record<string, unknown>>, at: { part: number; recent: boolean; index: number; of: number }): Promise<void>;
  /** After the records of a part are sent. */
  partSent(): Promise<void>;
  /** Moves the clock and closes the windows due. */
  advance(ms: number): Promise<void>;
  /** Everything sent evaluated and the windows due at the clock's time closed. */
  caughtUp(): Promise<void>;
  now(): number;
  /** The emails of a definition's realized members, sorted. */
  members(definitionId: string): Promise<string[]>;
}

/** The scripted stream: a seeded generator (a failure replays) and the events sent, by profile email. */
export class ComputedScript {
  readonly sent = new Map<string, Sent[]>();
  private readonly used = new Set<number>();
  private seed = 41;

  constructor(readonly events: number, readonly profiles: number) {}

  private rnd(): number {
    this.seed = (this.seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return this.seed / 2_147_483_648;
  }

  /**
   * Part `k` of the stream, in requests: `share` of its events for random profiles, stamped up to
   * 7 months before `now` (most recent), or with `recent` within the last 3 hours.
   */
  part(k: number, share: number, recent: boolean, now: number): Array<Array<Record<string, unknown>>> {
    const n = Math.round((this.events / STEPS.length) * share);
    const requests: Array<Array<Record<string, unknown>>> = [];
    for (let i = 0; i < n; i++) {
      const who = Math.floor(this.rnd() * this.profiles);
      const r = this.rnd();
      const back = recent ? this.rnd() * 3 * HOUR : r < 0.5 ? this.rnd() * 30 * HOUR : r < 0.8 ? this.rnd() * 40 * DAY : this.rnd() * 210 * DAY;
      let at = now - 1 - Math.floor(back);
      while (this.used.has(at)) at--; // distinct instants: the latest event of a profile is never a tie
      this.used.add(at);
      const e: Sent = { at, timestamp: new Date(at).toISOString(), eventType: TYPES[Math.floor(this.rnd() * TYPES.length)]!, price: 1 + Math.floor(this.rnd() * 500), page: `page${Math.floor(this.rnd() * 4)}` };
      if (!this.sent.has(email(who))) this.sent.set(email(who), []);
      this.sent.get(email(who))!.push(e);
      if (i % REQUEST === 0) requests.push([]);
      requests[requests.length - 1]!.push({
        _id: `k${k}${recent ? "r" : ""}-${i}`, identityMap: { Email: [{ id: email(who), primary: true }] }, eventType: e.eventType, timestamp: e.timestamp,
        commerce: { order: { priceTotal: e.price } }, web: { webPageDetails: { name: e.page } },
      });
    }
    return requests;
  }
}

/** Reported values by profile email, 50 identities a request. */
async function reportedValues(d: Driver, profiles: number): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>();
  for (let i = 0; i < profiles; i += 50) {
    const ids = Array.from({ length: Math.min(50, profiles - i) }, (_, k) => ({ entityId: email(i + k), entityIdNS: { code: "Email" } }));
    const r = await d.client.post("/data/core/ups/access/entities", { schema: { name: "_xdm.context.profile" }, identities: ids });
    assert.equal(r.status, 200, r.text);
    for (const v of Object.values(obj(r.json))) {
      const who = d.pidToEmail.get(obj(v).entityId as string);
      assert.ok(who !== undefined, `an entity of no profile sent: ${JSON.stringify(v)}`);
      out.set(who, obj(obj(obj(obj(v).entity)[d.tenant]).ComputedAttributes));
    }
  }
  return out;
}

/** Posts one request to the events dataset; every record taken. */
export async function postRecords(c: Client, datasetId: string, records: Array<Record<string, unknown>>): Promise<void> {
  const r = await c.post("/collection/batch/ca-eq", { messages: records.map((xdmEntity) => ({ header: { datasetId }, body: { xdmEntity } })) });
  assert.ok(r.status === 200 || r.status === 207, r.text);
  const refused = arr(obj(r.json).responses ?? []).filter((x) => obj(x).status !== undefined);
  assert.deepEqual(refused, [], "records refused");
}

export interface RunFigures {
  /** Values compared, and how many of them held something. */
  checked: number;
  nonEmpty: number;
  /** Members over all definitions, per checkpoint. */
  memberCounts: number[];
  /** Streaming members that left as windows closed. */
  streamingExits: number;
  /** Time spent (ms) sending the stream and moving the clock, until caught up; in batch jobs; reading and checking values; members. */
  ms: { stream: number; jobs: number; values: number; members: number };
}

/**
 * The stream, part by part, with the checks at every checkpoint: the reported values, then the
 * members of every definition (the batch ones after a batch job), equal the recomputation's.
 * Ends with the checks that they were not vacuous.
 */
export async function runScript(script: ComputedScript, d: Driver, defs: readonly ReadingDefinition[]): Promise<RunFigures> {
  const { profiles } = script;
  const f: RunFigures = { checked: 0, nonEmpty: 0, memberCounts: [], streamingExits: 0, ms: { stream: 0, jobs: 0, values: 0, members: 0 } };
  let t = Date.now();
  const lap = (phase: keyof RunFigures["ms"]) => {
    f.ms[phase] += Date.now() - t;
    t = Date.now();
  };
  const valued = new Set<string>();
  const previous = new Map<string, string[]>();
  const sendPart = async (k: number, share: number, recent: boolean) => {
    const requests = script.part(k, share, recent, d.now());
    for (const [index, request] of requests.entries()) await d.send(request, { part: k, recent, index, of: requests.length });
    await d.partSent();
  };
  for (let k = 0; k < STEPS.length; k++) {
    t = Date.now();
    // Most of the part, then the clock moves (windows close, the sweep exits), then recent events.
    await sendPart(k, 0.8, false);
    await d.advance(STEPS[k]!);
    await sendPart(k, 0.2, true);
    await d.caughtUp();
    lap("stream");
    await runSegmentJob(d.client, 4_800); // up to 4 minutes: 5,000 profiles on PostgreSQL beside the workers
    lap("jobs");
    const now = d.now();
    const at = `checkpoint ${k + 1} (${new Date(now).toISOString()})`;

    const reported = await reportedValues(d, profiles);
    assert.equal(reported.size, profiles, `${at}: every profile answered`);
    for (let i = 0; i < profiles; i++) {
      const mine = script.sent.get(email(i)) ?? [];
      const values = reported.get(email(i))!;
      for (const a of ATTRS) {
        const expected = recompute(a, mine, now);
        assert.deepEqual(values[a.name], expected, `${at}, ${email(i)}, ${a.name} (${a.fn} ${a.count} ${a.unit})`);
        f.checked++;
        if (expected !== null && expected !== 0 && !(Array.isArray(expected) && expected.length === 0)) {
          f.nonEmpty++;
          valued.add(a.name);
        }
      }
    }

    lap("values");
    let total = 0;
    for (const def of defs) {
      const expected = Array.from({ length: profiles }, (_, i) => email(i)).filter((e) => def.holds(recompute(def.attr, script.sent.get(e) ?? [], now), now)).sort();
      total += expected.length;
      assert.deepEqual(await d.members(def.batch), expected, `${at}: ${def.attr.name}'s batch job members`);
      if (def.continuous !== null) {
        assert.deepEqual(await d.members(def.continuous), expected, `${at}: ${def.attr.name}'s streaming members`);
        const was = new Set(previous.get(def.continuous) ?? []);
        f.streamingExits += [...was].filter((e) => !expected.includes(e)).length;
        previous.set(def.continuous, expected);
      }
    }
    f.memberCounts.push(total);
    lap("members");
  }
  // The checks were not vacuous: most values hold something, and every checkpoint has members.
  assert.ok(f.nonEmpty > f.checked / 10, `${f.nonEmpty} of ${f.checked} values non-empty`);
  assert.deepEqual(ATTRS.filter((a) => !valued.has(a.name)).map((a) => a.name), [], "attributes that never held a value");
  assert.ok(f.memberCounts.every((n) => n > 0), `members per checkpoint: ${f.memberCounts.join(", ")}`);
  assert.ok(f.streamingExits > 0, "streaming members left as windows closed");
  return f;
}
