/**
 * `segmentd serve` as a user runs it: a fresh data directory, the printed curl
 * lines work as printed (headers parsed from the output), `segmentd token`
 * prints the same credentials, SIGINT shuts down cleanly, and a restart keeps
 * the credentials and the data.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { killAll, spawnTs, waitFor } from "../helpers/spawn.js";

const MAIN = "packages/server/src/cli/main.ts";
const dataDir = mkdtempSync(path.join(os.tmpdir(), "segmentd-cli-"));
after(() => {
  killAll();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Split a printed shell line into words (single quotes only, as the server prints them). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  const re = /'([^']*)'|(\S+)/g;
  for (const m of line.matchAll(re)) words.push(m[1] ?? m[2]!);
  return words;
}

async function runCurl(line: string): Promise<{ status: number; body: unknown }> {
  const w = shellWords(line);
  assert.equal(w[0], "curl");
  let method = "GET";
  let url = "";
  let body: string | undefined;
  const headers: Record<string, string> = {};
  for (let i = 1; i < w.length; i++) {
    const x = w[i]!;
    if (x === "-s") continue;
    else if (x === "-X") method = w[++i]!;
    else if (x === "-H") {
      const [k, ...v] = w[++i]!.split(":");
      headers[k!.trim()] = v.join(":").trim();
    } else if (x === "-d") body = w[++i]!;
    else url = x;
  }
  const r = await fetch(url, { method, headers, body });
  return { status: r.status, body: await r.json() };
}

function curlLines(stdout: string): string[] {
  return stdout.split("\n").filter((l) => l.startsWith("curl "));
}

test("serve on a fresh data dir prints working curl lines; token prints the same credentials; restart keeps both", async () => {
  const env = { SEGMENTD_LOG_LEVEL: "warn" };
  const s = spawnTs(MAIN, ["serve", "--data-dir", dataDir, "--port", "0", "--no-demo"], env);
  const [, url] = await waitFor(s, /segmentd listening on (http:\/\/127\.0\.0\.1:\d+)/);
  await waitFor(s, /curl -s http\S+\/config\/mergePolicies/);
  assert.match(s.stdout(), /Development tenant \(created; stored in /);
  const lines = curlLines(s.stdout());
  assert.equal(lines.length, 3);
  assert.ok(lines.every((l) => l.includes(url!)));
  const created = await runCurl(lines[0]!);
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const def = created.body as { id: string; name: string };
  assert.equal(def.name, "US customers");
  const listed = await runCurl(lines[1]!);
  assert.equal(listed.status, 200);
  assert.deepEqual((listed.body as { segments: { id: string }[] }).segments.map((x) => x.id), [def.id]);
  const mps = await runCurl(lines[2]!);
  assert.equal(mps.status, 200);
  const policies = (mps.body as { children: { isActiveOnEdge: boolean; default: boolean }[] }).children;
  assert.deepEqual(policies.map((p) => [p.default, p.isActiveOnEdge]), [[true, true]]);
  assert.equal(statSync(path.join(dataDir, "dev-credentials.json")).mode & 0o077, 0, "credentials file is private");

  const tok = spawnTs(MAIN, ["token", "--data-dir", dataDir, "--port", new URL(url!).port], env);
  assert.equal((await tok.exited).code, 0);
  assert.deepEqual(curlLines(tok.stdout()), lines);
  assert.match(tok.stdout(), /operator token: +op-/);

  s.child.kill("SIGINT");
  assert.deepEqual(await s.exited, { code: 0, signal: null });

  const again = spawnTs(MAIN, ["serve", "--data-dir", dataDir, "--port", new URL(url!).port, "--no-demo"], env);
  await waitFor(again, /curl -s http\S+\/config\/mergePolicies/);
  assert.match(again.stdout(), /Development tenant \(loaded; /);
  assert.deepEqual(curlLines(again.stdout()), lines);
  const relisted = await runCurl(lines[1]!);
  assert.deepEqual((relisted.body as { segments: { id: string }[] }).segments.map((x) => x.id), [def.id]);
  again.child.kill("SIGTERM");
  assert.equal((await again.exited).code, 0);
});

test("a bad config file is a clear error and exit code 1", async () => {
  const s = spawnTs(MAIN, ["serve", "--data-dir", dataDir, "--config", path.join(dataDir, "missing.json")]);
  assert.equal((await s.exited).code, 1);
  assert.match(s.stderr(), /segmentd: configuration error: config file not found: .*missing\.json/);
});
