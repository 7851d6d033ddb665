/**
 * The first hour with the built `segmentd` command (on its default, embedded store: the PostgreSQL
 * suite skips this file) (issue #39 items 3, 4, 5, 8, 9, 12), each run as
 * a user runs it: a child process of packages/server/dist/cli/main.js, the banner's curl lines
 * pasted into a shell, the hint commands typed as printed.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { CLI, ensureBuilt, killAllCli, runCli, spawnCli } from "../helpers/built-cli.js";
import { defaultLogFormat, prettyLine } from "../../src/platform/logger.js";
import { waitFor, type Spawned } from "../helpers/spawn.js";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "segmentd-cli-"));
  dirs.push(d);
  return d;
}

before(async () => {
  await ensureBuilt();
});
after(() => {
  killAllCli();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A port some other process holds. */
async function occupiedPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, server };
}

/** The curl lines of a banner, run as a user pastes them into a shell. */
async function shell(line: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli([line], { shell: true, ms: 60_000 });
}

interface JobMetrics {
  status: string;
  metrics: { segmentedProfileCounter?: Record<string, number>; segmentedProfileByStatusCounter?: Record<string, { realized: number; existing: number; exited: number }> };
}

describe("npm start, then the banner's lines, as a first-time user (items 3, 8, 9)", () => {
  let dir: string;
  let server: Spawned;
  let banner: string;
  let url: string;
  let headers: Record<string, string>;

  before(async () => {
    dir = tempDir();
    // What `npm start` runs, with its own data directory and any free port.
    server = spawnCli(["serve", "--port", "0", "--data-dir", dir]);
    await waitFor(server, /Try it:\n(?:.*\n)+\n/, 120_000);
    banner = server.stdout();
    url = /segmentd listening on (http:\/\/\S+) \(store/.exec(banner)![1]!;
    const creds = JSON.parse(readFileSync(path.join(dir, "dev-credentials.json"), "utf8")) as { token: string; apiKey: string; orgId: string; sandboxName: string };
    headers = { authorization: `Bearer ${creds.token}`, "x-api-key": creds.apiKey, "x-gw-ims-org-id": creds.orgId, "x-sandbox-name": creds.sandboxName, "content-type": "application/json" };
  });

  test("the banner comes after every start-up log line and names the demo's datastream and audiences", () => {
    const lines = banner.split("\n");
    const bannerStart = lines.findIndex((l) => l.includes("segmentd listening on") && l.includes("(store:"));
    assert.ok(bannerStart > 0, banner);
    assert.deepEqual(lines.slice(bannerStart).filter((l) => l.startsWith("{")), [], "a log line after the banner");
    assert.ok(banner.includes(`Loaded the demo retail dataset into sandbox prod: 5500 records (load more with: npx segmentd demo --url ${url} --data-dir ${dir}).`), banner);
    assert.match(banner, /datastream "Demo retail web \(edge\)": [0-9a-f-]{36}\n/);
    assert.match(banner, /edge {6}audience "Product viewers, last 24 hours \(edge\)": [0-9a-f-]{36}\n/);
    assert.match(banner, /streaming audience "US cart adders, last 24 hours \(streaming\)": [0-9a-f-]{36}\n/);
    assert.match(banner, /batch {5}audience "Gold and platinum repeat buyers \(batch\)": [0-9a-f-]{36}\n/);
    // Not a TTY: JSON lines for a log collector, and no line per request at info.
    const logs = lines.slice(0, bannerStart).filter((l) => l.startsWith("{"));
    assert.ok(logs.every((l) => JSON.parse(l) !== null));
  });

  test("the banner's curl lines work as pasted, and its interact call answers with the edge audience", async () => {
    const curls = banner.split("\n").filter((l) => l.startsWith("curl "));
    assert.equal(curls.length, 4, banner);
    const created = await shell(curls[0]!);
    assert.equal(created.code, 0, created.stderr);
    assert.equal((JSON.parse(created.stdout) as { name: string }).name, "US customers");
    const list = JSON.parse((await shell(curls[1]!)).stdout) as { segments: Array<{ name: string }> };
    assert.deepEqual(list.segments.map((s) => s.name).sort(), ["Gold and platinum repeat buyers (batch)", "Product viewers, last 24 hours (edge)", "US cart adders, last 24 hours (streaming)", "US customers"]);
    assert.equal((await shell(curls[2]!)).code, 0);
    assert.match(curls[3]!, /\/ee\/v2\/interact\?dataStreamId=[0-9a-f-]{36}'/);
    const edgeId = /edge {6}audience "[^"]+": (\S+)/.exec(banner)![1]!;
    const answer = JSON.parse((await shell(curls[3]!)).stdout) as { requestId: string; handle: Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }> };
    const pulled = answer.handle.find((h) => h.type === "activation:pull")!;
    assert.deepEqual(pulled.payload[0]!.segments!.map((s) => s.id), [edgeId]);
    assert.match(answer.requestId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  test("the banner's hint prints the credentials again, as typed in the checkout", async () => {
    const hint = /print again with: (.+)\n/.exec(banner)![1]!;
    assert.equal(hint, `npx segmentd token --data-dir ${dir}`);
    const r = await shell(hint);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`org id: +${headers["x-gw-ims-org-id"]!.replace(/[@]/g, ".")}`));
  });

  test("segmentd demo again: reuses its datasets, changes no membership, reports progress and names the audiences", async () => {
    const job = async (): Promise<JobMetrics> => {
      const created = await fetch(`${url}/data/core/ups/segment/jobs`, { method: "POST", headers, body: JSON.stringify([{ segmentId: "*" }]) });
      assert.equal(created.status, 200, await created.clone().text());
      const id = ((await created.json()) as { id: string }).id;
      for (const t0 = Date.now(); Date.now() - t0 < 120_000; await new Promise((r) => setTimeout(r, 200))) {
        const j = (await (await fetch(`${url}/data/core/ups/segment/jobs/${id}`, { headers })).json()) as JobMetrics;
        if (j.status === "SUCCEEDED" || j.status === "FAILED") return j;
      }
      throw new Error("the job did not finish");
    };
    const first = await job();
    assert.equal(first.status, "SUCCEEDED");
    const datasets = async () => Object.keys((await (await fetch(`${url}/data/foundation/catalog/dataSets`, { headers })).json()) as object).sort();
    const before = await datasets();
    assert.equal(before.length, 2);
    // More of everything than at start-up: the first 500 profiles and 5000 events are the same records.
    const r = await runCli(["demo", "--url", url, "--data-dir", dir, "--profiles", "600", "--events", "6000"], { ms: 180_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /reused from an earlier load/);
    // Not a TTY: a progress line when each phase's records are sent and the server writes them.
    assert.match(r.stdout, /^profiles: 600\/600 records sent, the server is writing them$/m);
    assert.match(r.stdout, /^events: 6000\/6000 records sent, the server is writing them$/m);
    assert.match(r.stdout, /Try the edge audience:\n {2}curl -s -X POST '.*\/ee\/v2\/interact\?dataStreamId=/);
    // Another seed is other customers: it adds profiles, it does not rewrite the first ones.
    const other = await runCli(["demo", "--url", url, "--data-dir", dir, "--profiles", "200", "--events", "500", "--seed", "2"], { ms: 180_000 });
    assert.equal(other.code, 0, other.stderr);
    assert.deepEqual(await datasets(), before);
    const second = await job();
    assert.equal(second.status, "SUCCEEDED");
    const exited = Object.entries(second.metrics.segmentedProfileByStatusCounter ?? {}).filter(([, s]) => s.exited > 0);
    assert.deepEqual(exited, [], "members left an audience after the demo was loaded again");
    for (const [id, n] of Object.entries(first.metrics.segmentedProfileCounter ?? {})) {
      assert.ok((second.metrics.segmentedProfileCounter?.[id] ?? 0) >= n, `definition ${id}: ${n} members before, ${second.metrics.segmentedProfileCounter?.[id]} after`);
    }
  });

  test("Ctrl-C stops it with a last line, exit code 0; jobs run --all then names each definition", async () => {
    server.child.kill("SIGINT");
    const { code } = await server.exited;
    assert.equal(code, 0, server.stderr());
    assert.equal(server.stdout().trimEnd().split("\n").at(-1), "segmentd stopped.");
    const r = await runCli(["jobs", "run", "--all", "--data-dir", dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Gold and platinum repeat buyers \(batch\) +[0-9a-f-]{36} +\d+/m);
    assert.match(r.stdout, /^US customers +[0-9a-f-]{36} +\d+/m);
  });
});

describe("a busy port (item 4)", () => {
  test("serve says which port and what to do, in one line, with exit code 1 and nothing else", async () => {
    const { port, server } = await occupiedPort();
    try {
      const dir = tempDir();
      const r = await runCli(["serve", "--port", String(port), "--data-dir", dir, "--no-demo"]);
      assert.equal(r.code, 1);
      assert.equal(r.stderr, `segmentd: port ${port} is in use; pass --port <another port> (or stop the process listening there)\n`);
      assert.equal(r.stdout, "");
    } finally {
      server.close();
    }
  });

  test("cluster up checks the hub's and every edge site's port before it starts anything", async () => {
    const { port, server } = await occupiedPort();
    try {
      const dir = tempDir();
      const hubBusy = await runCli(["cluster", "up", "--port", String(port), "--data-dir", dir, "--sites", "e1"]);
      assert.equal(hubBusy.code, 1);
      assert.equal(hubBusy.stderr, `segmentd: port ${port} is in use; pass --port <another port> (or stop the process listening there)\n`);
      assert.equal(hubBusy.stdout, "");
      const edgeBusy = await runCli(["cluster", "up", "--port", String(port - 1), "--data-dir", dir, "--sites", "e1"]);
      assert.equal(edgeBusy.code, 1);
      assert.equal(edgeBusy.stderr, `segmentd: port ${port} (edge site e1) is in use; pass --port <another port> (the edge sites take the ports after the hub's)\n`);
      assert.equal(edgeBusy.stdout, "");
    } finally {
      server.close();
    }
  });
});

describe("output into a reader that closes early (item 5)", () => {
  test("segmentd token | head: no EPIPE, exit code 0", async () => {
    const dir = tempDir();
    // The credentials exist after one start.
    const s = spawnCli(["serve", "--port", "0", "--data-dir", dir, "--no-demo"]);
    await waitFor(s, /Try it:/, 120_000);
    s.child.kill("SIGINT");
    await s.exited;
    for (const args of [["token", "--data-dir", dir], ["pql", "--help"], ["--help"]]) {
      const t = spawnCli(args);
      // The reader is gone before the command writes its first line.
      t.child.stdout!.destroy();
      const { code } = await t.exited;
      assert.equal(t.stderr(), "", `segmentd ${args.join(" ")}`);
      assert.equal(code, 0, `segmentd ${args.join(" ")}`);
    }
    const head = await shell(`node packages/server/dist/cli/main.js token --data-dir ${dir} | head -1`);
    assert.equal(head.stderr, "");
    assert.match(head.stdout, /^org id: +\S+@AdobeOrg\n$/);
  });
});

describe("help lists only what applies (item 12)", () => {
  const options = (help: string) => [...help.matchAll(/^ {2}(-\w, )?(--[\w-]+)/gm)].map((m) => m[2]!);

  test("token: where the credentials are and the printed URL's host and port; edge: no database", async () => {
    const token = await runCli(["token", "--help"]);
    assert.deepEqual(options(token.stdout), ["--config", "--data-dir", "--port", "--host", "--json", "--help"]);
    const edge = await runCli(["edge", "--help"]);
    assert.deepEqual(options(edge.stdout), ["--config", "--data-dir", "--port", "--host", "--log-level", "--location", "--nats", "--hub-domain", "--outbox", "--help"]);
  });

  test("--database-url means the same wherever it appears: all data in PostgreSQL", async () => {
    const text = (help: string) => {
      const m = /--database-url <url> +([\s\S]*?)(?=\n {2}-|\n*$)/.exec(help);
      return m![1]!.replace(/\s+/g, " ");
    };
    const serve = text((await runCli(["serve", "--help"])).stdout);
    const jobs = text((await runCli(["jobs", "run", "--help"])).stdout);
    const cluster = text((await runCli(["cluster", "--help"])).stdout);
    assert.match(serve, /^PostgreSQL URL: all data \(metadata, profiles, memberships, jobs, data lifecycle\) there instead of the embedded SQLite files/);
    assert.equal(jobs, serve);
    assert.equal(cluster, `the hub's ${serve}`);
  });
});

describe("logs for a person at a terminal, JSON for machines (item 8)", () => {
  test("on a terminal: readable lines, no request lines at info, the banner last", async () => {
    const dir = tempDir();
    // util-linux `script` gives the command a terminal, as `npm start` in a shell has.
    // Signalled itself, `script` ends the terminal's session; `timeout` bounds the server if it is killed instead.
    const s = spawnCli(["-qfec", `timeout 300 ${process.execPath} ${CLI} serve --port 0 --data-dir ${dir}`, "/dev/null"], { exec: "script" });
    await waitFor(s, /Try it:\r?\n(?:.*\r?\n)+\r?\n/, 120_000);
    s.child.kill("SIGINT");
    await s.exited;
    const lines = s.stdout().split(/\r?\n/);
    assert.deepEqual(lines.filter((l) => l.startsWith("{")), [], "a JSON line on a terminal");
    // A readable line, as pino's JSON would not be: time, level, message.
    assert.ok(lines.some((l) => /^\d\d:\d\d:\d\d INFO {2}Server listening at http:\/\/127\.0\.0\.1:\d+$/.test(l)), s.stdout());
    // The demo's load made dozens of requests: none of them is a line at info.
    assert.deepEqual(lines.filter((l) => / (GET|POST|PUT) \//.test(l) || l.includes("request completed")), []);
    const bannerStart = lines.findIndex((l) => l.includes("(store: embedded"));
    assert.deepEqual(lines.slice(bannerStart).filter((l) => /^\d\d:\d\d:\d\d /.test(l)), [], "a log line after the banner");
  });

  test("at debug, one line per request; SEGMENTD_LOG_FORMAT chooses, a terminal decides otherwise", () => {
    const pending = new Map<unknown, string>();
    const debug = 20;
    const info = 30;
    assert.equal(prettyLine(JSON.stringify({ level: 30, time: 0, reqId: "r1", req: { method: "GET", url: "/healthz" }, msg: "incoming request" }), debug, pending), null);
    assert.equal(prettyLine(JSON.stringify({ level: 30, time: 0, reqId: "r1", res: { statusCode: 200 }, responseTime: 1.25, msg: "request completed" }), debug, pending), "00:00:00 DEBUG GET /healthz 200 1.3 ms\n");
    assert.equal(pending.size, 0);
    assert.equal(prettyLine(JSON.stringify({ level: 30, time: 0, reqId: "r2", res: { statusCode: 200 }, msg: "request completed" }), info, pending), null);
    assert.equal(prettyLine(JSON.stringify({ level: 40, time: 0, msg: "careful", location: "edge-1" }), info), "00:00:00 WARN  careful location=edge-1\n");
    assert.equal(defaultLogFormat({}, true), "pretty");
    assert.equal(defaultLogFormat({}, false), "json");
    assert.equal(defaultLogFormat({ SEGMENTD_LOG_FORMAT: "json" }, true), "json");
    assert.equal(defaultLogFormat({ SEGMENTD_LOG_FORMAT: "pretty" }, false), "pretty");
    assert.throws(() => defaultLogFormat({ SEGMENTD_LOG_FORMAT: "fancy" }, false), { message: 'SEGMENTD_LOG_FORMAT must be pretty or json, got "fancy"' });
  });
});
