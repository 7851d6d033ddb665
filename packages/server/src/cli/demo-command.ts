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
import { loadDemoOverHttp, type DemoTarget } from "../profiles/demo-loader.js";
import { readDevCredentials, type DevCredentials } from "../services/dev-bootstrap.js";

/** The small dataset `npm start` loads into an empty development sandbox. */
export const STARTUP_DEMO = { profiles: 500, events: 5_000 } as const;

export function demoTarget(baseUrl: string, c: Pick<DevCredentials, "token" | "apiKey" | "orgId" | "sandboxName">): DemoTarget {
  return {
    baseUrl,
    headers: { authorization: `Bearer ${c.token}`, "x-api-key": c.apiKey, "x-gw-ims-org-id": c.orgId, "x-sandbox-name": c.sandboxName },
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
      process.stdout.write(`loading ${profiles} profiles and ${events} events into ${o.url} (org ${orgId}, sandbox ${sandboxName})...\n`);
      const r = await loadDemoOverHttp(demoTarget(o.url.replace(/\/+$/, ""), { token, apiKey, orgId, sandboxName }), {
        profiles,
        events,
        now: Date.now(),
        seed: positiveInt(o.seed, "--seed"),
      });
      const s = ((Date.now() - t0) / 1000).toFixed(1);
      process.stdout.write(`done in ${s} s: ${r.recordsWritten} records written, ${r.recordsFailed} failed; datasets ${r.datasets.profiles} (profiles), ${r.datasets.events} (events)\n`);
    });
}
