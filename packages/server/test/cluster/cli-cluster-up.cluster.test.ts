/**
 * `npm run cluster` as a user runs it (issue #39 items 3, 4 and 11): the built CLI's `cluster up`
 * in a child process, with nats-server. It uses `npm start`'s development tenant, loads the demo
 * at the hub, prints a real datastream id in an interact call to an edge node that answers with
 * the edge audience, the edge node's request ids are UUIDs, and Ctrl-C ends with a last line.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ensureBuilt, killAllCli, runCli, spawnCli } from "../helpers/built-cli.js";
import { waitFor } from "../helpers/spawn.js";
import { freePortRun } from "../helpers/free-ports.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
let dir: string;

before(async () => {
  await ensureBuilt();
  dir = mkdtempSync(path.join(tmpdir(), "segmentd-cluster-cli-"));
});
after(() => {
  killAllCli();
  rmSync(dir, { recursive: true, force: true });
});

test("cluster up: npm start's tenant, the demo at the hub, an interact call that works as printed, UUID request ids, a last line", async () => {
  // `npm start` ran here first: the cluster must use the same development tenant.
  const first = spawnCli(["serve", "--port", "0", "--data-dir", dir, "--no-demo"]);
  await waitFor(first, /Try it:/, 120_000);
  first.child.kill("SIGINT");
  await first.exited;
  const creds = JSON.parse(readFileSync(path.join(dir, "dev-credentials.json"), "utf8")) as { orgId: string };

  const port = await freePortRun(2); // the hub's and the edge site's
  const cluster = spawnCli(["cluster", "up", "--port", String(port), "--data-dir", dir, "--sites", "e1"]);
  await waitFor(cluster, /Ctrl-C stops every process\./, 240_000);
  const out = cluster.stdout();
  assert.match(out, new RegExp(`Development tenant \\(as \`npm start\`'s\\): org ${creds.orgId.replace("@", ".")}, sandbox prod`));
  assert.match(out, /loaded the demo retail dataset: 5500 records/);
  assert.doesNotMatch(out, /<id>/);
  const edgeAudience = /edge {6}audience "Product viewers, last 24 hours \(edge\)": (\S+)/.exec(out)![1]!;
  const curl = /Try the edge audience at an edge node:\n {2}(curl .+)\n/.exec(out)![1]!;
  assert.ok(curl.includes(`http://127.0.0.1:${port + 1}/ee/v2/interact?dataStreamId=`), curl);

  // The edge node learns the datastream and the audience from the hub's feed: ask until it has them.
  let answer: { requestId: string; handle: Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }> } | undefined;
  for (const t0 = Date.now(); Date.now() - t0 < 60_000; await new Promise((r) => setTimeout(r, 500))) {
    const r = await runCli([curl], { shell: true, ms: 30_000 });
    const a = JSON.parse(r.stdout) as NonNullable<typeof answer>;
    if (a.handle?.find((h) => h.type === "activation:pull")?.payload[0]?.segments?.some((s) => s.id === edgeAudience)) {
      answer = a;
      break;
    }
  }
  assert.ok(answer, "the edge node never answered with the edge audience");
  assert.match(answer.requestId, UUID);
  // Every answer of the edge node, errors included, carries a UUID of its own.
  const ids = new Set<string>();
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`http://127.0.0.1:${port + 1}/ee/v2/interact`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    const body = (await r.json()) as { requestId: string };
    assert.equal(r.status, 400);
    assert.match(body.requestId, UUID);
    assert.equal(r.headers.get("x-request-id"), body.requestId);
    ids.add(body.requestId);
  }
  assert.equal(ids.size, 3);

  cluster.child.kill("SIGINT");
  const { code } = await cluster.exited;
  assert.equal(code, 0, cluster.stderr());
  assert.deepEqual(cluster.stdout().trimEnd().split("\n").filter((l) => !l.startsWith("[")).slice(-2), ["stopping every process...", "cluster stopped."]);
});
