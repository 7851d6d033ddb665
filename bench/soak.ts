/**
 * Soak test (issue #22, acceptance 4): does sustained load grow the server's memory without bound?
 *
 *   npm run soak                      (= node --conditions=source --import tsx bench/soak.ts)
 *   options: --minutes 5 --rate 400 (offered requests per second, all kinds together)
 *            --connections 16 --report-s 60 (RSS printed every N s; the reference is the first)
 *            --idle-s 10 (after the load, RSS again once the server has been idle that long)
 *            --heap-snapshot file.heapsnapshot (of the server, after the idle period)
 *            --edge-profiles auto|default|N --streaming-profiles auto|default|N (the server's cache
 *            bounds; auto = what 30 s of the offered load fills, so that the caches are full
 *            within the first minute and what is measured is growth beyond them)
 *
 * A real server (startServer, embedded store, a temp data dir) runs in a child process, so that
 * the load client's memory is not counted; this process sets it up over HTTP (an event and a
 * profile dataset, a datastream, edge and streaming definitions) and drives a steady open-loop
 * mix: `/ee/v2/interact` with a new identity each request (60 %), streaming ingest
 * `POST /collection/{inlet}` of an event with a new identity (30 %) and definition reads
 * `GET /data/core/ups/segment/definitions` (10 %). It prints the server's RSS at start, at each
 * report and at the end, with the request and error counts, and the sizes of the structures a
 * request can grow (edge locations, hub forwarder, streaming engine). PASS when the RSS at every
 * report after the first, and at the end, stays within 1.5x the RSS at the first report.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startMixedLoad, type KindCounts } from "./lib/mixed-load.js";

const { values: args } = parseArgs({
  options: {
    server: { type: "boolean", default: false },
    minutes: { type: "string", default: "5" },
    rate: { type: "string", default: "400" },
    connections: { type: "string", default: "16" },
    "report-s": { type: "string", default: "60" },
    "idle-s": { type: "string", default: "10" },
    // Cache bounds of the server (edge location profiles, streaming profile states): "auto" = what
    // 30 s of the offered load fills, so that the caches are full within the first minute and the
    // test looks at what grows beyond them; "default" = the server's defaults (100,000 / 200,000).
    "edge-profiles": { type: "string", default: "auto" },
    "streaming-profiles": { type: "string", default: "auto" },
    // A V8 heap snapshot of the server after the idle period (what holds the memory).
    "heap-snapshot": { type: "string", default: "" },
  },
});

/** What the server process answers to a sample request. */
interface Sample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  structures: Record<string, number>;
}

type ToServer = { type: "sample"; gc?: boolean } | { type: "stop" } | { type: "snapshot"; file: string };
type FromServer = { type: "ready"; url: string; headers: Record<string, string> } | { type: "sample"; sample: Sample };

// ---------------------------------------------------------------- server process
async function runServer(): Promise<void> {
  const bench = await startSoakServer(JSON.parse(process.env["SOAK_EDGE"] ?? "{}") as Record<string, number>);
  const send = (m: FromServer) => process.send!(m);
  process.on("message", (m: ToServer) => {
    if (m.type === "snapshot") {
      void (async () => {
        const v8 = await import("node:v8");
        v8.writeHeapSnapshot(m.file);
        // The embedded hub's worker thread has its own heap (a private field: diagnostics only).
        const worker = (bench.server.profiles as unknown as { worker?: { getHeapSnapshot?(): Promise<NodeJS.ReadableStream> } }).worker;
        if (worker?.getHeapSnapshot) {
          const { createWriteStream } = await import("node:fs");
          const { pipeline } = await import("node:stream/promises");
          await pipeline(await worker.getHeapSnapshot(), createWriteStream(`${m.file}.worker`));
        }
        send({ type: "sample", sample: { rss: 0, heapUsed: 0, heapTotal: 0, external: 0, arrayBuffers: 0, structures: {} } });
      })();
      return;
    }
    if (m.type === "stop") {
      void bench.close().then(() => process.exit(0), () => process.exit(1));
      return;
    }
    const mem = process.memoryUsage();
    const rt = bench.server.app.edge;
    send({ type: "sample", sample: { rss: mem.rss, heapUsed: mem.heapUsed, heapTotal: mem.heapTotal, external: mem.external, arrayBuffers: mem.arrayBuffers, structures: rt ? rt.memoryStats() : {} } });
  });
  send({ type: "ready", url: bench.server.url, headers: bench.headers });
}

/** bench/lib/server.ts's server, with the edge section of the configuration given (its cache bounds). */
async function startSoakServer(edgeBounds: Record<string, number>) {
  const { startBenchServer } = await import("./lib/server.js");
  const { DEFAULT_EDGE_LOCATIONS } = await import("../packages/server/src/edge/locations.js");
  return startBenchServer({ definitions: 100 }, (c) => {
    c.edge = { ...DEFAULT_EDGE_LOCATIONS, ...edgeBounds };
  });
}

// ---------------------------------------------------------------- driver (this process)
const MB = (n: number) => `${(n / 1024 / 1024).toFixed(0)} MB`;

function startChild(edgeBounds: Record<string, number>): Promise<{ child: ChildProcess; url: string; headers: Record<string, string> }> {
  const child = fork(fileURLToPath(import.meta.url), ["--server"], { execArgv: ["--conditions=source", "--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"], env: { ...process.env, SOAK_EDGE: JSON.stringify(edgeBounds) } });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the server process exited (code ${code}) before it was ready`)));
    child.once("message", (m: FromServer) => {
      if (m.type === "ready") resolve({ child, url: m.url, headers: m.headers });
    });
  });
}

function sample(child: ChildProcess): Promise<Sample> {
  return new Promise((resolve) => {
    const on = (m: FromServer) => {
      if (m.type !== "sample") return;
      child.off("message", on);
      resolve(m.sample);
    };
    child.on("message", on);
    child.send({ type: "sample" } satisfies ToServer);
  });
}

function snapshot(child: ChildProcess, file: string): Promise<void> {
  return new Promise((resolve) => {
    child.once("message", () => resolve());
    child.send({ type: "snapshot", file } satisfies ToServer);
  });
}

async function setUp(url: string, headers: Record<string, string>): Promise<{ dataStreamId: string; events: string }> {
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(url + path, { method, headers: { ...headers, "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return JSON.parse(text) as unknown;
  };
  const dataset = async (name: string, schema: string) => {
    const ids = (await call("POST", "/data/foundation/catalog/dataSets", {
      name,
      schemaRef: { id: `https://ns.adobe.com/xdm/context/${schema}`, contentType: "application/vnd.adobe.xed+json;version=1" },
      tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
    })) as string[];
    return ids[0]!.replace("@/dataSets/", "");
  };
  const events = await dataset("soak events", "experienceevent");
  await dataset("soak profiles", "profile");
  const define = (name: string, pql: string, method: "continuous" | "synchronous") =>
    call("POST", "/data/core/ups/segment/definitions", {
      name,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: pql },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: method === "continuous" }, synchronous: { enabled: method === "synchronous" } },
    });
  for (let i = 0; i < 5; i++) await define(`edge ${i}`, `chain(xEvent, timestamp, [C0: WHAT(eventType = "type.${i}") WHEN(< ${i + 1} hours before now)])`, "synchronous");
  await define("edge two events", `chain(xEvent, timestamp, [C0: WHAT(eventType = "type.0") WHEN(< 1 hours before now), C1: WHAT(eventType = "type.1") WHEN(< 1 hours before now)])`, "synchronous");
  for (let i = 0; i < 3; i++) await define(`streaming ${i}`, `xEvent[eventType = "type.${i}" and timestamp occurs < ${i + 1} hours before now].count() >= 1`, "continuous");
  const ds = (await call("POST", "/data/core/edge/datastreams", { name: "soak", eventDatasetId: events })) as { id: string };
  return { dataStreamId: ds.id, events };
}

function countsLine(counts: Record<string, KindCounts>, skipped: number): string {
  const parts = Object.entries(counts).map(([k, c]) => `${k} ${c.sent} sent, ${c.ok} ok, ${c.non2xx} non-2xx${Object.keys(c.statuses).length > 0 ? ` ${JSON.stringify(c.statuses)}` : ""}, ${c.errors} errors`);
  return `${parts.join("; ")}${skipped > 0 ? `; ${skipped} not sent (client backlog)` : ""}`;
}

function structuresLine(s: Sample): string {
  return Object.entries(s.structures).map(([k, v]) => `${k} ${v}`).join(", ");
}

async function runDriver(): Promise<void> {
  const minutes = Number(args.minutes);
  const rate = Number(args.rate);
  const reportS = Number(args["report-s"]);
  const idleS = Number(args["idle-s"]);
  if (!(minutes > 0) || !(rate > 0) || !(reportS > 0)) throw new Error("--minutes, --rate and --report-s must be positive numbers");
  // 60 % of the requests are interact with a new profile; streaming states come from the ingested
  // events and the forwarded interact events of the types the streaming definitions read.
  const bound = (arg: string | undefined, perSecond: number): number | undefined => (arg === "default" ? undefined : arg === "auto" ? Math.max(1000, Math.round(perSecond * 30)) : Number(arg));
  const edgeBounds: Record<string, number> = {};
  const maxProfiles = bound(args["edge-profiles"], 0.6 * rate);
  const streamingMaxProfiles = bound(args["streaming-profiles"], 0.45 * rate);
  if (maxProfiles !== undefined) edgeBounds["maxProfiles"] = maxProfiles;
  if (streamingMaxProfiles !== undefined) edgeBounds["streamingMaxProfiles"] = streamingMaxProfiles;
  const { child, url, headers } = await startChild(edgeBounds);
  try {
    const { dataStreamId, events } = await setUp(url, headers);
    let n = 0;
    const id = () => `soak-${process.pid}-${++n}`;
    const now = () => new Date(Date.now() - 50).toISOString();
    const start = await sample(child);
    console.log(`soak: ${minutes} min at ${rate} req/s offered (60 % interact with new identities, 30 % streaming ingest, 10 % definition reads), ${args.connections} connections; server pid ${child.pid}`);
    console.log(`server cache bounds: edge location profiles ${maxProfiles ?? "default (100,000)"}, streaming profile states ${streamingMaxProfiles ?? "default (200,000)"}`);
    console.log(`RSS at start: ${MB(start.rss)} (heap ${MB(start.heapUsed)} of ${MB(start.heapTotal)}, external ${MB(start.external)}) — ${structuresLine(start)}`);
    const load = startMixedLoad({
      url,
      headers,
      rate,
      seconds: minutes * 60,
      connections: Number(args.connections),
      kinds: [
        {
          name: "interact",
          weight: 6,
          method: "POST",
          path: `/ee/v2/interact?dataStreamId=${dataStreamId}`,
          body: () => ({ event: { xdm: { identityMap: { ECID: [{ id: id(), primary: true }] }, eventType: `type.${n % 7}`, timestamp: now() } } }),
        },
        {
          name: "ingest",
          weight: 3,
          method: "POST",
          path: "/collection/soak-inlet",
          body: () => ({
            header: { datasetId: events, schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent" } },
            body: { xdmEntity: { _id: id(), eventType: `type.${n % 5}`, timestamp: now(), identityMap: { ECID: [{ id: id(), primary: true }] } } },
          }),
        },
        { name: "definitions", weight: 1, method: "GET", path: "/data/core/ups/segment/definitions?limit=10" },
      ],
    });
    const marks: Array<{ at: number; rss: number }> = [];
    const t0 = Date.now();
    let finished = false;
    void load.done.then(() => (finished = true));
    for (let k = 1; ; k++) {
      const due = t0 + k * reportS * 1000;
      while (!finished && Date.now() < due) await new Promise((resolve) => setTimeout(resolve, Math.min(250, due - Date.now())));
      if (finished) break;
      const s = await sample(child);
      marks.push({ at: k * reportS, rss: s.rss });
      console.log(`RSS at ${k * reportS} s: ${MB(s.rss)} (heap ${MB(s.heapUsed)} of ${MB(s.heapTotal)}, external ${MB(s.external)}) — ${countsLine(load.counts(), load.skipped())} — ${structuresLine(s)}`);
    }
    await load.done;
    const end = await sample(child);
    const elapsed = (Date.now() - t0) / 1000;
    console.log(`RSS at the end (${elapsed.toFixed(0)} s): ${MB(end.rss)} (heap ${MB(end.heapUsed)} of ${MB(end.heapTotal)}, external ${MB(end.external)}) — ${structuresLine(end)}`);
    const counts = load.counts();
    console.log(`requests: ${countsLine(counts, load.skipped())}`);
    if (idleS > 0) {
      await new Promise((resolve) => setTimeout(resolve, idleS * 1000));
      const idle = await sample(child);
      console.log(`RSS after ${idleS} s idle: ${MB(idle.rss)} (heap ${MB(idle.heapUsed)} of ${MB(idle.heapTotal)}) — ${structuresLine(idle)}`);
    }
    if (args["heap-snapshot"]) {
      await snapshot(child, args["heap-snapshot"]);
      console.log(`heap snapshot of the server written to ${args["heap-snapshot"]}`);
    }
    const ref = marks[0];
    if (ref === undefined) {
      console.log(`PASS (vacuous): the run ended before the first report at ${reportS} s; nothing to compare`);
      return;
    }
    const later = [...marks.slice(1), { at: Math.round(elapsed), rss: end.rss }];
    const worst = later.reduce((w, m) => (m.rss > w.rss ? m : w), later[0]!);
    const ratio = worst.rss / ref.rss;
    const errors = Object.values(counts).reduce((s, c) => s + c.errors, 0);
    const verdict = ratio <= 1.5 ? "PASS" : "FAIL";
    console.log(`${verdict}: RSS after ${ref.at} s peaked at ${MB(worst.rss)} (at ${worst.at} s), ${ratio.toFixed(2)}x its ${MB(ref.rss)} at ${ref.at} s (limit 1.5x); ${errors} connection errors`);
    if (verdict === "FAIL") process.exitCode = 1;
  } finally {
    child.send({ type: "stop" } satisfies ToServer);
    await new Promise((resolve) => child.once("exit", resolve));
  }
}

if (args.server) await runServer();
else await runDriver();
