/**
 * `segmentd demo`: load the generated retail dataset (profiles with addresses,
 * consents and loyalty; 90 days of page views, product views, cart adds,
 * purchases and email opens) into a running segmentd through its public
 * ingestion API — Catalog datasets and batch ingestion, exactly as a user's own
 * tooling would. Credentials come from the flags, or from the development
 * tenant in the data directory.
 */
import type { Command } from "commander";
import path from "node:path";
import cliProgress from "cli-progress";
import { ensureDemoSetup, loadDemoOverHttp, type DemoProgress, type DemoSetup, type DemoTarget } from "../profiles/demo-loader.js";
import { readDevCredentials, type DevCredentials } from "../services/dev-bootstrap.js";

/** The small dataset `npm start` loads into an empty development sandbox. */
export const STARTUP_DEMO = { profiles: 500, events: 5_000 } as const;

export function demoTarget(baseUrl: string, c: Pick<DevCredentials, "token" | "apiKey" | "orgId" | "sandboxName">): DemoTarget {
  return {
    baseUrl,
    headers: { authorization: `Bearer ${c.token}`, "x-api-key": c.apiKey, "x-gw-ims-org-id": c.orgId, "x-sandbox-name": c.sandboxName },
  };
}

/** The lines that tell what the demo set up, for `segmentd demo` and the `serve` banner. */
export function demoSetupLines(setup: DemoSetup): string[] {
  return [
    `  datastream "${setup.datastream.name}": ${setup.datastream.id}`,
    ...setup.audiences.map((a) => `  ${a.evaluatedBy.padEnd(9)} audience "${a.name}": ${a.id}`),
  ];
}

/** An interact call a user can paste: a product view by a new visitor, answered with the edge audience. */
export function interactCurl(baseUrl: string, datastreamId: string): string {
  const body = JSON.stringify({ event: { xdm: { eventType: "commerce.productViews", identityMap: { ECID: [{ id: "12345678901234567890", primary: true }] } } } });
  return `curl -s -X POST '${baseUrl}/ee/v2/interact?dataStreamId=${datastreamId}' -H 'Content-Type: application/json' -d '${body}'`;
}

/**
 * Progress of a load: a bar on a terminal; elsewhere (CI, a pipe) a line every few seconds and one
 * when each phase ends, so that a long load is never silent.
 */
export function demoProgressReporter(tty: boolean, write: (line: string) => void, everyMs = 3000): { update(p: DemoProgress): void; stop(): void } {
  if (tty) {
    const bar = new cliProgress.SingleBar({ format: "{phase} [{bar}] {value}/{total} records{note}", hideCursor: true }, cliProgress.Presets.shades_classic);
    let phase = "";
    return {
      update(p) {
        const note = p.completing ? " (writing…)" : "";
        if (p.phase !== phase) {
          if (phase !== "") bar.stop();
          phase = p.phase;
          bar.start(p.total, p.sent, { phase: p.phase.padEnd(8), note });
        } else bar.update(p.sent, { note });
      },
      stop: () => bar.stop(),
    };
  }
  let last = 0;
  let lastLine = "";
  return {
    update(p) {
      const line = `${p.phase}: ${p.sent}/${p.total} records sent${p.completing ? ", the server is writing them" : ""}`;
      const now = Date.now();
      if (line !== lastLine && (p.completing || now - last >= everyMs)) {
        write(line);
        last = now;
        lastLine = line;
      }
    },
    stop() {},
  };
}

interface DemoCliOptions {
  url: string;
  profiles: string;
  events: string;
  seed: string;
  dataDir: string;
  token?: string;
  apiKey?: string;
  org?: string;
  sandbox?: string;
}

function positiveInt(text: string, what: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1) throw new Error(`${what} must be a positive integer, got "${text}"`);
  return n;
}

export function registerDemoCommand(program: Command): void {
  program
    .command("demo")
    .description("load a generated retail dataset into a running segmentd through its ingestion API")
    .option("--url <url>", "segmentd base URL", "http://127.0.0.1:8080")
    .option("--profiles <n>", "number of profiles", "10000")
    .option("--events <n>", "number of experience events", "100000")
    .option("--seed <n>", "random seed (the same seed gives the same data)", "1")
    .option("-d, --data-dir <dir>", "data directory holding the development credentials", "./.data")
    .option("--token <token>", "bearer token (default: the development tenant's)")
    .option("--api-key <key>", "x-api-key (default: the development tenant's)")
    .option("--org <orgId>", "x-gw-ims-org-id (default: the development tenant's)")
    .option("--sandbox <name>", "x-sandbox-name (default: the development tenant's)")
    .action(async (o: DemoCliOptions) => {
      const dev = readDevCredentials(path.resolve(o.dataDir));
      const token = o.token ?? dev?.token;
      const apiKey = o.apiKey ?? dev?.apiKey;
      const orgId = o.org ?? dev?.orgId;
      const sandboxName = o.sandbox ?? dev?.sandboxName;
      if (!token || !apiKey || !orgId || !sandboxName) {
        throw new Error(`no credentials: pass --token, --api-key, --org and --sandbox, or point --data-dir at a development data directory (${o.dataDir} has none)`);
      }
      const profiles = positiveInt(o.profiles, "--profiles");
      const events = positiveInt(o.events, "--events");
      const t0 = Date.now();
      const out = (line: string) => process.stdout.write(line + "\n");
      const baseUrl = o.url.replace(/\/+$/, "");
      out(`loading ${profiles} profiles and ${events} events into ${baseUrl} (org ${orgId}, sandbox ${sandboxName})...`);
      const progress = demoProgressReporter(process.stdout.isTTY === true, out);
      const target = demoTarget(baseUrl, { token, apiKey, orgId, sandboxName });
      let r;
      try {
        r = await loadDemoOverHttp(target, { profiles, events, seed: positiveInt(o.seed, "--seed"), onProgress: (p) => progress.update(p) });
      } finally {
        progress.stop();
      }
      const setup = await ensureDemoSetup(target, r.datasets.events);
      const s = ((Date.now() - t0) / 1000).toFixed(1);
      out(`done in ${s} s: ${r.recordsWritten} records written, ${r.recordsFailed} failed; datasets ${r.datasets.profiles} (profiles), ${r.datasets.events} (events)${r.reused ? ", reused from an earlier load" : ""}`);
      for (const line of demoSetupLines(setup)) out(line);
      out("Try the edge audience:");
      out(`  ${interactCurl(baseUrl, setup.datastream.id)}`);
    });
}
