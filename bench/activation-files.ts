// File destination benchmark (issue #38, acceptance 4): a real server (embedded store, or
// PostgreSQL with SEGMENTD_DATABASE_URL) with a 1M-member audience, exported by a file flow
// ("export now" through the API), then every file read back through the API and compared with
// the audience's members.
//
//   npm run bench:activation-files -- [--members 1000000] [--formats ndjson,csv.gz]
//
// 1. The audience's memberships are written directly through the store (one applyMembershipSets
//    call, as a batch job persists them); its profiles have no records, so each row carries the
//    membership and an empty identityMap (the read of identities still runs, page by page).
// 2. For each format: a file flow over the audience, POST …/exports, polled until the run is done.
//    Prints the run's wall time (server side, from its start to its manifest), this process's CPU
//    time over the run (every thread: the server, its store worker), and the peak RSS during it
//    (sampled every 20 ms) next to the RSS before.
// 3. Every file of the manifest is downloaded through the API (stored bytes, Accept-Encoding:
//    gzip), its sha256 checked against the manifest, decompressed and parsed; the profile ids must
//    be exactly the audience's members (listMemberPids), each once.
import { createHash } from "node:crypto";
import http from "node:http";
import os from "node:os";
import { parseArgs } from "node:util";
import { createGunzip } from "node:zlib";
import { CONNECTION_SPEC_IDS } from "../packages/server/src/activation/connection-specs.js";
import { startBenchServer, BENCH_ORG } from "./lib/server.js";

const { values: args } = parseArgs({ options: { members: { type: "string", default: "1000000" }, formats: { type: "string", default: "ndjson,csv.gz" } } });
const N = Number(args.members);
const FORMATS = args.formats!.split(",").map((f) => f.trim());
const F = "/data/foundation/flowservice";
const FILE = { id: CONNECTION_SPEC_IDS.file, version: "1.0" };
const scope = { orgId: BENCH_ORG, sandboxName: "prod" };

const bench = await startBenchServer({ definitions: 100 });
const { server, headers } = bench;
type Obj = Record<string, unknown>;

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: Obj }> {
  const r = await fetch(server.url + path, { method, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, json: text === "" ? {} : JSON.parse(text) as Obj };
}

function must(r: { status: number; json: Obj }, status: number, what: string): Obj {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json;
}

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;

try {
  // ---- the audience -------------------------------------------------------------------
  const def = must(await api("POST", "/data/core/ups/segment/definitions", {
    name: "bench files", schema: { name: "_xdm.context.profile" },
    expression: { type: "PQL", format: "pql/text", value: "homeAddress.countryCode = \"US\"" },
    evaluationInfo: { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } },
  }), 200, "definition");
  const audienceId = String(def.id);
  const t0 = performance.now();
  const ids = Float64Array.from({ length: N }, (_, i) => i + 1);
  await server.profiles.applyMembershipSets(scope, [{ definitionId: audienceId, entered: ids, reentered: new Float64Array(0), exited: new Float64Array(0) }], { source: "batch", at: Date.now() });
  const expected = await server.profiles.listMemberPids(scope, audienceId, "realized");
  console.log(`audience: ${expected.length.toLocaleString("en-US")} members written in ${((performance.now() - t0) / 1000).toFixed(1)} s (store: ${server.config.databaseUrl ? "postgres" : "embedded"})`);
  if (expected.length !== N) throw new Error(`expected ${N} members, the store has ${expected.length}`);

  console.log("\n| format | files | rows | bytes | export wall | CPU (all threads) | RSS before → peak | read back through the API | equal to members |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const format of FORMATS) {
    const gzip = format.endsWith(".gz");
    const base = format.replace(/\.gz$/, "");
    const conn = must(await api("POST", `${F}/connections`, { name: "files", connectionSpec: FILE }), 201, "connection");
    const tgt = must(await api("POST", `${F}/targetConnections`, { name: format, baseConnectionId: conn.id, connectionSpec: FILE, params: { format: base, compression: gzip ? "GZIP" : "NONE" } }), 201, "target");
    const flow = must(await api("POST", `${F}/flows`, {
      name: `bench ${format}`, targetConnectionIds: [tgt.id],
      transformations: [{ name: "GeneralTransform", params: {
        segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: audienceId, schedule: { startDate: "2099-01-01", startTime: "00:00" } } }] },
        profileSelectors: { selectors: [{ type: "JSON_PATH", value: { path: "identityMap.email", operator: "EXISTS" } }] },
      } }],
    }), 201, "flow");
    const flowId = String(flow.id);

    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const cpu0 = process.cpuUsage();
    const w0 = performance.now();
    const runId = String(must(await api("POST", `${F}/flows/${flowId}/exports`), 202, "export now").runId);
    let run: Obj = {};
    for (;;) {
      run = (must(await api("GET", `${F}/flows/${flowId}/exports/${runId}`), 200, "run").items as Obj[])[0]!;
      if (run.status === "success" || run.status === "failed") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const wall = (performance.now() - w0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    clearInterval(sampler);
    if (run.status !== "success") throw new Error(`export failed: ${String(run.error)}`);
    const serverWall = (Number(run.finishedAt) - Number(run.startedAt)) / 1000;
    const files = (run.manifest as { files: Array<{ name: string; rows: number; bytes: number; sha256: string }> }).files;

    // ---- read back ----------------------------------------------------------------------
    const r0 = performance.now();
    const seen = new Uint8Array(N + 2);
    let rows = 0;
    let dupes = 0;
    let strangers = 0;
    for (const f of files) {
      const hash = createHash("sha256");
      let bytes = 0;
      let fileRows = 0;
      await new Promise<void>((resolve, reject) => {
        const u = new URL(server.url);
        http.get({ hostname: u.hostname, port: u.port, path: `${F}/flows/${flowId}/exports/${runId}/files/${f.name}`, headers: { ...headers, "accept-encoding": "gzip" } }, (res) => {
          if (res.statusCode !== 200) return reject(new Error(`GET ${f.name}: ${res.statusCode}`));
          res.on("data", (c: Buffer) => {
            hash.update(c);
            bytes += c.length;
          });
          const text = gzip ? res.pipe(createGunzip()) : res;
          let rest = "";
          let header = base === "csv";
          const line = (l: string) => {
            if (l === "") return;
            if (header) {
              header = false;
              return;
            }
            const id = base === "csv" ? Number(l.slice(0, l.indexOf(","))) : Number((JSON.parse(l) as { _segmentd: { profileId: string } })._segmentd.profileId);
            fileRows += 1;
            if (!(id >= 1 && id <= N)) strangers += 1;
            else if (seen[id]! > 0) dupes += 1;
            else seen[id] = 1;
          };
          text.on("data", (c: Buffer) => {
            const parts = (rest + c.toString("utf8")).split("\n");
            rest = parts.pop()!;
            for (const l of parts) line(l.replace(/\r$/, ""));
          });
          text.on("end", () => {
            line(rest.replace(/\r$/, ""));
            resolve();
          });
          text.on("error", reject);
        }).on("error", reject);
      });
      if (bytes !== f.bytes || hash.digest("hex") !== f.sha256) throw new Error(`${f.name}: bytes or sha256 differ from the manifest`);
      if (fileRows !== f.rows) throw new Error(`${f.name}: ${fileRows} rows, the manifest says ${f.rows}`);
      rows += fileRows;
    }
    let missing = 0;
    for (const id of expected) if (seen[id] !== 1) missing += 1;
    const equal = missing === 0 && dupes === 0 && strangers === 0 && rows === expected.length;
    const readSeconds = (performance.now() - r0) / 1000;
    const totalBytes = files.reduce((n, f) => n + f.bytes, 0);
    console.log(`| ${format} | ${files.length} | ${rows.toLocaleString("en-US")} | ${mb(totalBytes)} | ${serverWall.toFixed(1)} s (client ${wall.toFixed(1)} s) | ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s | ${mb(rss0)} → ${mb(peak)} | ${readSeconds.toFixed(1)} s | ${equal ? "yes" : `NO (missing ${missing}, duplicates ${dupes}, unknown ${strangers})`} |`);
    if (!equal) process.exitCode = 1;
  }
  console.log(`\nload average (1, 5, 15 min) at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(", ")}; ${os.cpus().length} CPUs`);
} finally {
  await bench.close();
}
