/**
 * #25's scripted stream and the deployments it runs on: an all-in-one process, or a hub with
 * streaming workers (`segmentd serve --workers`, `segmentd worker`), each a process over
 * PostgreSQL (a schema of its own) and, for workers, a nats-server of its own. The hub's clock is
 * a test clock (SEGMENTD_TEST_CLOCK) that only the script moves (`POST /admin/clock`, which also
 * closes the windows due), so every run sees the same times and must give the same result.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { partitionFilter, PARTITION_STREAM } from "../../src/cluster/partition-wire.js";
import { rng } from "../../src/profiles/demo.js";
import { REPO_ROOT, spawnTs, waitFor, type Spawned } from "./spawn.js";
import { testDatabaseUrl } from "./test-store.js";

export const ORG = "WORKERS000000000000000000@AdobeOrg";
export const TOKEN = "workers-token";
export const KEY = "workers-key";
const OPERATOR = "workers-operator";
const CLI = path.join(REPO_ROOT, "packages/server/src/cli/main.ts");
/** The script's first instant (the test clock's start). */
export const T0 = Date.UTC(2026, 10, 2, 8, 0, 0);

export interface Scale {
  profiles: number;
  events: number;
  definitions: number;
  /** Events per request. */
  batch: number;
}

export interface Script {
  definitions: Array<{ name: string; pql: string }>;
  /** Profile records, in requests. */
  profiles: Array<Array<Record<string, unknown>>>;
  /** Event requests; each is sent at its own time (the clock moves STEP_MS before it). */
  steps: Array<Array<Record<string, unknown>>>;
}

export const STEP_MS = 20_000;
const TYPES = 20;

/** The definitions: windows of 5 to 45 minutes over 20 event types, counts, pairs, and a profile attribute. */
export function scriptOf(scale: Scale, seed = 25): Script {
  const definitions: Script["definitions"] = [];
  for (let k = 0; k < scale.definitions; k++) {
    const a = `shop.e${k % TYPES}`;
    const b = `shop.e${(k * 7 + 3) % TYPES}`;
    const w = [5, 10, 20, 45][k % 4]!;
    const c = 1 + (k % 3);
    const within = (t: string) => `xEvent[eventType = "${t}" and timestamp occurs < ${w} minutes before now]`;
    const pql = [
      `${within(a)}.count() >= ${c}`,
      `xEvent[(eventType = "${a}" or eventType = "${b}") and timestamp occurs < ${w} minutes before now].count() >= ${c + 1}`,
      `${within(a)}.count() >= 1 and ${within(b)}.count() >= 1`,
      `loyalty.tier = "gold" and ${within(a)}.count() >= ${c}`,
      `${within(a)}.count() >= ${c + 1} or ${within(b)}.count() >= ${c + 2}`,
    ][k % 5]!;
    definitions.push({ name: `w${String(k).padStart(3, "0")}`, pql });
  }
  const r = rng(seed);
  const profiles: Script["profiles"] = [];
  for (let i = 0; i < scale.profiles; i += 1000) {
    const chunk: Array<Record<string, unknown>> = [];
    for (let j = i; j < Math.min(scale.profiles, i + 1000); j++) {
      chunk.push({ identityMap: { ECID: [{ id: `p${j}`, primary: true }] }, loyalty: { tier: ["gold", "silver", "bronze"][j % 3] }, person: { name: { firstName: `P${j}` } } });
    }
    profiles.push(chunk);
  }
  const steps: Script["steps"] = [];
  let n = 0;
  for (let s = 0; n < scale.events; s++) {
    const step: Array<Record<string, unknown>> = [];
    const t = T0 + (s + 1) * STEP_MS;
    for (let k = 0; k < scale.batch && n < scale.events; k++, n++) {
      // A few profiles are busy (they qualify often), the rest are spread thin.
      const pid = r() < 0.3 ? Math.floor(r() * Math.max(1, scale.profiles / 20)) : Math.floor(r() * scale.profiles);
      // Within the step (after the previous step's time): the evaluation of a step never sees a later one's events.
      const ts = t - Math.floor(r() * (STEP_MS - 1));
      step.push({ _id: `ev-${n}`, identityMap: { ECID: [{ id: `p${pid}`, primary: true }] }, eventType: `shop.e${Math.floor(r() * TYPES)}`, timestamp: new Date(ts).toISOString() });
    }
    steps.push(step);
  }
  return { definitions, profiles, steps };
}

export interface Proc {
  url: string;
  readonly proc: Spawned;
  kill(): Promise<void>;
  stop(): Promise<void>;
  start(env?: NodeJS.ProcessEnv): Promise<void>;
}

function proc(args: string[], ready: RegExp, baseEnv: NodeJS.ProcessEnv): Proc {
  let current: Spawned | null = null;
  const p: Proc = {
    url: "",
    get proc() {
      return current!;
    },
    async start(env = {}) {
      current = spawnTs(CLI, args, { ...baseEnv, ...env });
      p.url = (await waitFor(current, ready, 90_000))[1] ?? "";
    },
    async kill() {
      if (current && current.child.exitCode === null && current.child.signalCode === null) current.child.kill("SIGKILL");
      await current?.exited;
    },
    async stop() {
      if (current && current.child.exitCode === null && current.child.signalCode === null) current.child.kill("SIGTERM");
      const r = await current?.exited;
      assert.equal(r?.code, 0, `exited ${r?.code}/${r?.signal}:\n${current?.stderr().slice(-3000)}`);
    },
  };
  return p;
}

export interface Deployment {
  kind: "all-in-one" | "workers";
  dir: string;
  schema: string;
  databaseUrl: string;
  nats: RunningNatsServer | null;
  hub: Proc;
  workers: Map<string, Proc>;
  /** The hub's clock (what the script last set it to). */
  now: number;
  call(method: string, url: string, body?: unknown, operator?: boolean): Promise<{ status: number; json: unknown }>;
  startWorker(id: string): Promise<Proc>;
  close(): Promise<void>;
}

/**
 * `opts.config`: more top-level keys of the config file (e.g. `activation`); `opts.testClock:
 * false` runs the hub on the real clock (deliveries: retries and signature timestamps need it);
 * `opts.clockStart`: the test clock's first instant (default T0).
 */
export async function deploy(kind: Deployment["kind"], label: string, partitions = 64, opts: { config?: Record<string, unknown>; testClock?: boolean; clockStart?: number } = {}): Promise<Deployment> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `segmentd-workers-${label}-`));
  const schema = `t_w_${label}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const u = new URL(testDatabaseUrl());
  u.searchParams.set("options", `-c search_path=${schema}`);
  const databaseUrl = u.toString();
  const config = path.join(dir, "segmentd.config.json");
  writeFileSync(config, JSON.stringify({
    host: "127.0.0.1",
    port: 0,
    logLevel: "warn",
    auth: { staticTokens: [{ token: TOKEN, orgs: [ORG] }], apiKeys: [KEY], operatorTokens: [OPERATOR] },
    organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }],
    ...opts.config,
  }));
  mkdirSync(path.join(dir, "hub"));
  const nats = kind === "workers" ? await startNatsServer({ dir: path.join(dir, "nats"), domain: "hub" }) : null;
  const hubArgs = ["serve", "-c", config, "-d", path.join(dir, "hub"), "--database-url", databaseUrl, "--no-demo", ...(nats ? ["--nats", nats.url, "--workers", "--partitions", String(partitions)] : [])];
  const hub = proc(hubArgs, /listening on (http:\/\/\S+)/, {});
  const d: Deployment = {
    kind,
    dir,
    schema,
    databaseUrl,
    nats,
    hub,
    workers: new Map(),
    now: opts.clockStart ?? T0,
    async call(method, url, body, operator = false) {
      const headers: Record<string, string> = operator
        ? { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" }
        : { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };
      const r = await fetch(hub.url + url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      const text = await r.text();
      return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) };
    },
    async startWorker(id) {
      const w = proc(["worker", "-c", config, "--nats", nats!.url, "--database-url", databaseUrl, "--id", id, "-d", path.join(dir, "workers")], /segmentd worker (\S+) started/, {});
      await w.start();
      d.workers.set(id, w);
      return w;
    },
    async close() {
      for (const w of d.workers.values()) await w.kill();
      await hub.kill();
      await nats?.kill();
      const a = new pg.Client({ connectionString: adminUrl() });
      await a.connect();
      for (const s of ["", "_profiles", "_metadata", "_batch", "_hygiene"]) await a.query(`DROP SCHEMA IF EXISTS ${schema}${s} CASCADE`);
      await a.end();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await hub.start(opts.testClock === false ? {} : { SEGMENTD_TEST_CLOCK: String(d.now) });
  return d;
}

function adminUrl(): string {
  return withUser(testDatabaseUrl());
}

export function withUser(url: string): string {
  const u = new URL(url);
  if (u.username === "") u.username = process.env.PGUSER || "postgres";
  return u.toString();
}

/** Retries a call while the hub is away (restarting): connection errors and 5xx. */
async function retrying<T>(what: string, f: () => Promise<{ status: number; json: unknown }>, ok: (r: { status: number; json: unknown }) => T | undefined): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await f();
      const v = ok(r);
      if (v !== undefined) return v;
      if (r.status < 500) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.json).slice(0, 500)}`);
    } catch (err) {
      if (!(err instanceof TypeError) && !/fetch failed|ECONNREFUSED|socket/i.test(String(err))) throw err;
    }
    if (Date.now() - t0 > 120_000) throw new Error(`${what}: the hub did not answer for 2 minutes`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface DriveHooks {
  /** Called before step `i` is sent (faults, a worker joining). */
  beforeStep?(i: number): Promise<void>;
  /** At least this long between steps (an offered load below capacity); default as fast as the hub answers. */
  stepEveryMs?: number;
  /**
   * Wait for the definitions' own backfills (#40) before the stream, so that every deployment starts
   * from the same state; needs a worker running (a workers hub's backfill waits for the partitions).
   */
  backfillsFirst?: boolean;
}

/**
 * Creates the datasets and definitions, sends the profiles and the steps (the middle one as a
 * completed batch, the others streamed); ends with an hour of ticks (the windows close).
 */
export async function drive(d: Deployment, script: Script, hooks: DriveHooks = {}): Promise<{ sentMs: number }> {
  const dataset = async (name: string, schema: string) => {
    const r = await d.call("POST", "/data/foundation/catalog/dataSets", {
      name,
      schemaRef: { id: `https://ns.adobe.com/xdm/context/${schema}`, contentType: "application/vnd.adobe.xed+json;version=1" },
      tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
    });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return (r.json as string[])[0]!.replace("@/dataSets/", "");
  };
  const profileDs = await dataset("Profiles", "profile");
  const eventDs = await dataset("Events", "experienceevent");
  const created: string[] = [];
  for (const def of script.definitions) {
    const r = await d.call("POST", "/data/core/ups/segment/definitions", {
      name: def.name,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: def.pql },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
    });
    assert.equal(r.status, 200, `${def.name}: ${JSON.stringify(r.json)}`);
    created.push((r.json as { id: string }).id);
  }
  // Every deployment starts the stream from the same state: the definitions' own backfills (#40, over the
  // empty store) done — with workers each one waits for every partition to apply its messages, minutes
  // for 100. Left queued, a hub killed mid-stream resumes them over a populated store beside the live
  // stream: that race is backfill.workers.test.ts's; this suite compares streaming evaluation.
  if (hooks.backfillsFirst === true) process.stdout.write(`# the definitions' backfills done ${await waitBackfills(d, created)} ms after the last was created\n`);
  const send = (datasetId: string, records: Array<Record<string, unknown>>, what: string) =>
    retrying(what, () => d.call("POST", "/collection/batch/inlet", { messages: records.map((xdmEntity) => ({ header: { datasetId }, body: { xdmEntity } })) }), (r) => {
      if (r.status !== 207) return undefined;
      const bad = (r.json as { responses: Array<{ status?: number; message?: string }> }).responses.filter((x) => x.status !== undefined);
      if (bad.some((x) => (x.status ?? 0) >= 500)) return undefined;
      assert.deepEqual(bad, [], `${what}: records refused`);
      return true;
    });
  const sendBatch = async (datasetId: string, records: Array<Record<string, unknown>>, what: string) => {
    const b = await d.call("POST", "/data/foundation/import/batches", { datasetId, inputFormat: { format: "json" } });
    assert.equal(b.status, 201, `${what}: ${JSON.stringify(b.json)}`);
    const id = (b.json as { id: string }).id;
    const up = await d.call("PUT", `/data/foundation/import/batches/${id}/datasets/${datasetId}/files/step.json`, records);
    assert.equal(up.status, 200, `${what}: ${JSON.stringify(up.json)}`);
    const done = await d.call("POST", `/data/foundation/import/batches/${id}?action=COMPLETE`);
    assert.equal(done.status, 200, `${what}: ${JSON.stringify(done.json)}`);
    assert.equal((done.json as { status: string }).status, "success", what);
  };
  const advance = (ms: number) =>
    retrying("the clock", () => d.call("POST", "/admin/clock", { advanceMs: ms }, true), (r) => (r.status === 200 ? true : undefined)).then(() => {
      d.now += ms;
    });
  for (let i = 0; i < script.profiles.length; i++) await send(profileDs, script.profiles[i]!, `profiles ${i}`);
  const t0 = Date.now();
  for (let i = 0; i < script.steps.length; i++) {
    const due = t0 + i * (hooks.stepEveryMs ?? 0);
    if (Date.now() < due) await new Promise((r) => setTimeout(r, due - Date.now()));
    await hooks.beforeStep?.(i);
    await advance(STEP_MS);
    // The middle step comes as a batch (the batch API, completed): its profiles are evaluated when it completes.
    if (i === Math.floor(script.steps.length / 2)) await sendBatch(eventDs, script.steps[i]!, `step ${i} (a batch)`);
    else await send(eventDs, script.steps[i]!, `step ${i}`);
  }
  // An hour more, a tick a minute: the windows (< 1 h) close.
  for (let m = 0; m < 60; m++) await advance(60_000);
  return { sentMs: Date.now() - t0 };
}

/** Waits until the definitions' own backfills (#40) succeeded (a definition without one answers 404); resolves with how long that took (ms). */
export async function waitBackfills(d: Deployment, ids: readonly string[]): Promise<number> {
  const t1 = Date.now();
  for (const id of ids) {
    for (;;) {
      const r = await d.call("GET", `/data/core/ups/segment/definitions/${id}/backfill`);
      const state = (r.json as { state?: string } | null)?.state;
      assert.ok(r.status === 200 || r.status === 404, `the backfill of ${id}: ${r.status} ${JSON.stringify(r.json)}`);
      assert.notEqual(state, "failed", `the backfill of ${id}: ${JSON.stringify(r.json)}`);
      if (r.status === 404 || state === "succeeded") break;
      assert.ok(Date.now() - t1 < 600_000, `the definitions' backfills not done within 10 minutes: ${id} ${JSON.stringify(r.json)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  return Date.now() - t1;
}

export interface Outcome {
  /** `<ECID> <definition name> <status> <lastQualificationTime>`, sorted. */
  memberships: string[];
  /** `<ECID> <definition name> <from>→<to> <source> <at>`, sorted. */
  transitions: string[];
  /**
   * The transition log of each (profile, definition) pair, in the order the store wrote it:
   * `<ECID> <definition name>: none→realized realized→exited …`, sorted by pair.
   */
  histories: string[];
}

/** The memberships and transitions a deployment stored, by identity and definition name. */
export async function outcomeOf(d: Deployment): Promise<Outcome> {
  const defs = await d.call("GET", "/data/core/ups/segment/definitions?limit=1000");
  assert.equal(defs.status, 200);
  const names = new Map(((defs.json as { segments: Array<{ id: string; name: string }> }).segments).map((s) => [s.id, s.name]));
  const c = new pg.Client({ connectionString: withUser(d.databaseUrl) });
  await c.connect();
  try {
    // Statistics first: after a run's bulk writes the planner would take the tables for empty and
    // walk the (definition, profile) index once per identity.
    await c.query("ANALYZE identities, memberships, transitions");
    const m = await c.query<{ idv: string; def: string; status: string; lqt: string }>(`SELECT i.idv, m.def, m.status, m.lqt FROM memberships m JOIN identities i ON i.tid = m.tid AND i.pid = m.pid AND lower(i.ns) = 'ecid'`);
    // In the order written (seq): a pair's log is read in that order below.
    const t = await c.query<{ idv: string; def: string; from_status: string | null; to_status: string; source: string; at: string }>(`SELECT i.idv, t.def, t.from_status, t.to_status, t.source, t.at FROM transitions t JOIN identities i ON i.tid = t.tid AND i.pid = t.pid AND lower(i.ns) = 'ecid' ORDER BY t.seq`);
    const name = (id: string) => names.get(id) ?? `?${id}`;
    const logs = new Map<string, string[]>();
    for (const r of t.rows) {
      const k = `${r.idv} ${name(r.def)}`;
      const log = logs.get(k);
      const step = `${r.from_status ?? "none"}→${r.to_status}`;
      if (log) log.push(step);
      else logs.set(k, [step]);
    }
    return {
      memberships: m.rows.map((r) => `${r.idv} ${name(r.def)} ${r.status} ${r.lqt}`).sort(),
      transitions: t.rows.map((r) => `${r.idv} ${name(r.def)} ${r.from_status ?? "none"}→${r.to_status} ${r.source} ${r.at}`).sort(),
      histories: [...logs].map(([k, steps]) => `${k}: ${steps.join(" ")}`).sort(),
    };
  } finally {
    await c.end();
  }
}

/** How an outcome compares with the reference's (the all-in-one's). */
export interface Comparison {
  /** Transitions of the reference and of the other. */
  transitions: [number, number];
  /** Transitions by kind (`none→realized`, `realized→exited`, …) where the two differ: [reference, other]. */
  kinds: Record<string, [number, number]>;
  /** (profile, definition) pairs whose transition logs differ (a pair missing on one side counts). */
  differingPairs: number;
  /** The first few: `<ECID> <definition> | <reference's log> | <other's log>`. */
  examples: string[];
  /** Memberships, transitions (with sources and times) and every pair's log all equal. */
  same: boolean;
}

export function compareOutcomes(reference: Outcome, got: Outcome): Comparison {
  const byPair = (o: Outcome) => new Map(o.histories.map((h) => {
    const at = h.indexOf(": ");
    return [h.slice(0, at), h.slice(at + 2)] as const;
  }));
  const a = byPair(reference);
  const b = byPair(got);
  const examples: string[] = [];
  let differingPairs = 0;
  for (const k of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(k) ?? "(none)";
    const y = b.get(k) ?? "(none)";
    if (x === y) continue;
    differingPairs++;
    if (examples.length < 10) examples.push(`${k} | ${x} | ${y}`);
  }
  const kindsOf = (o: Outcome) => {
    const m = new Map<string, number>();
    for (const t of o.transitions) {
      const kind = t.split(" ")[2]!;
      m.set(kind, (m.get(kind) ?? 0) + 1);
    }
    return m;
  };
  const ka = kindsOf(reference);
  const kb = kindsOf(got);
  const kinds: Record<string, [number, number]> = {};
  for (const k of new Set([...ka.keys(), ...kb.keys()])) if (ka.get(k) !== kb.get(k)) kinds[k] = [ka.get(k) ?? 0, kb.get(k) ?? 0];
  const equal = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return {
    transitions: [reference.transitions.length, got.transitions.length],
    kinds,
    differingPairs,
    examples,
    same: differingPairs === 0 && equal(reference.transitions, got.transitions) && equal(reference.memberships, got.memberships),
  };
}

/** Count per definition and per source, and the first differences: what an assertion message shows. */
export function difference(a: Outcome, b: Outcome): string {
  const count = (xs: string[], key: (x: string) => string) => {
    const m = new Map<string, number>();
    for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
    return m;
  };
  const perDef = (o: Outcome) => count(o.transitions, (x) => x.split(" ")[1]!);
  const perSource = (o: Outcome) => count(o.transitions, (x) => x.split(" ")[3]!);
  const onlyIn = (x: string[], y: string[]) => {
    const ys = new Set(y);
    return x.filter((v) => !ys.has(v)).slice(0, 5);
  };
  return JSON.stringify({
    memberships: [a.memberships.length, b.memberships.length],
    transitions: [a.transitions.length, b.transitions.length],
    perSource: [Object.fromEntries(perSource(a)), Object.fromEntries(perSource(b))],
    defsDiffering: [...perDef(a)].filter(([k, v]) => perDef(b).get(k) !== v).slice(0, 10),
    onlyInFirst: onlyIn(a.transitions, b.transitions),
    onlyInSecond: onlyIn(b.transitions, a.transitions),
    membershipsOnlyInFirst: onlyIn(a.memberships, b.memberships),
    membershipsOnlyInSecond: onlyIn(b.memberships, a.memberships),
  }, null, 1);
}

/**
 * One batch-collection request of messages to the hub; sent again while some of its records
 * answer 503 (stored, not yet on the workers' stream: events are stored once by their id, profile
 * records rewrite the same values).
 */
export async function postInlet(url: string, messages: readonly Record<string, unknown>[]): Promise<void> {
  const headers = { "content-type": "application/json", authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod" };
  for (let attempt = 1; ; attempt++) {
    const r = await fetch(`${url}/collection/batch/inlet`, { method: "POST", headers, body: JSON.stringify({ messages }) });
    const text = await r.text();
    assert.equal(r.status, 207, text.slice(0, 500));
    const bad = (JSON.parse(text) as { responses: Array<{ status?: number }> }).responses.filter((x) => (x.status ?? 200) !== 200);
    if (bad.length === 0) return;
    assert.ok(bad.every((x) => x.status === 503) && attempt < 10, text.slice(0, 500));
    await new Promise((res) => setTimeout(res, 500));
  }
}

/**
 * Waits until every partition applied the last message the stream holds for it (whatever it is:
 * ticks at one time count once, so the last may be a record); resolves with how long that took (ms).
 */
export async function waitApplied(d: Deployment, partitions: number, ms = 300_000): Promise<number> {
  const nc = await connect({ servers: d.nats!.url });
  const c = new pg.Client({ connectionString: withUser(d.databaseUrl) });
  await c.connect();
  try {
    const jsm = await jetstreamManager(nc);
    const last = new Map<string, number>();
    for (let p = 0; p < partitions; p++) {
      const m = await jsm.streams.getMessage(PARTITION_STREAM, { last_by_subj: partitionFilter(p) }).catch(() => null);
      if (m !== null) last.set(`pev.${p}`, m.seq);
    }
    const t0 = Date.now();
    for (;;) {
      const rows = (await c.query<{ part: string; seq: string }>("SELECT part, seq FROM partition_positions")).rows;
      const at = new Map(rows.map((r) => [r.part, Number(r.seq)]));
      const behind = [...last].filter(([part, seq]) => (at.get(part) ?? 0) < seq);
      if (behind.length === 0) return Date.now() - t0;
      if (Date.now() - t0 > ms) throw new Error(`partitions not applied within ${ms} ms: ${JSON.stringify(behind.slice(0, 5))}\n${[...d.workers].map(([id, w]) => `${id}: ${w.proc.stderr().slice(-2000)}`).join("\n")}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await c.end();
    await nc.close();
  }
}

/**
 * Waits until every partition applied its last message (the script's final tick, which every
 * partition gets last); resolves with how long that took (ms).
 */
export async function waitCaughtUp(d: Deployment, partitions: number, ms = 180_000): Promise<number> {
  const nc = await connect({ servers: d.nats!.url });
  const c = new pg.Client({ connectionString: withUser(d.databaseUrl) });
  await c.connect();
  try {
    const last = (await (await jetstreamManager(nc)).streams.info("SEGMENTD_PEV")).state.last_seq;
    const t0 = Date.now();
    for (;;) {
      const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM partition_positions WHERE seq >= $1`, [last - partitions + 1]);
      if (Number(r.rows[0]!.n) === partitions) return Date.now() - t0;
      if (Date.now() - t0 > ms) {
        const all = await c.query(`SELECT part, seq FROM partition_positions ORDER BY seq LIMIT 5`);
        throw new Error(`the workers did not catch up within ${ms} ms (last ${last}): ${JSON.stringify(all.rows)}\n${[...d.workers.values()].map((w) => w.proc.stderr().slice(-1500)).join("\n")}`);
      }
      await new Promise((res) => setTimeout(res, 200));
    }
  } finally {
    await c.end();
    await nc.close();
  }
}
