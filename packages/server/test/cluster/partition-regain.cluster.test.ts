/**
 * #37: a streaming worker that regains a partition another worker moved on meanwhile must not
 * evaluate it with the engine it had before. On real processes and stores (PostgreSQL,
 * nats-server, a hub with one partition) and two workers in this process: worker a enters a
 * profile, then stalls (it stops renewing its lease and reading, as a worker on a starved host
 * does, its engine still in memory); worker b takes the partition over, writes the exit when the
 * window closes, and gives the partition up; a reads again from the stored position. Its old
 * engine still holds the profile as a member and saw no change when the profile qualified again:
 * the re-entry (and the exit after it) was lost. It must be written.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { after, describe, it } from "node:test";
import { startWorker, type RunningWorker } from "../../src/cluster/worker-process.js";
import { loadConfig } from "../../src/platform/config.js";
import { killAll } from "../helpers/spawn.js";
import { deploy, outcomeOf, waitCaughtUp, type Deployment } from "../helpers/workers-run.js";

describe("a streaming worker regaining a partition (PostgreSQL, nats-server, hub, workers)", { timeout: 180_000 }, () => {
  const running: RunningWorker[] = [];
  let d: Deployment | undefined;
  after(async () => {
    for (const w of running) await w.close().catch(() => {});
    killAll();
    await d?.close().catch(() => {});
  });

  it("evaluates with states loaded at the stored position, not with its engine from before the other owner's batches", async () => {
    d = await deploy("workers", "regain", 1);
    const dep = d;
    const errors: string[] = [];
    const worker = async (id: string) => {
      const config = loadConfig({ configFile: path.join(dep.dir, "segmentd.config.json"), env: {}, overrides: { databaseUrl: dep.databaseUrl, natsUrl: dep.nats!.url, dataDir: path.join(dep.dir, id) } });
      const w = await startWorker({ config, id, log: () => {}, onError: (err) => errors.push(`${id}: ${String(err)}`) });
      running.push(w);
      return w;
    };
    const ok = async (r: Promise<{ status: number; json: unknown }>, status = 200) => {
      const x = await r;
      assert.equal(x.status, status, JSON.stringify(x.json));
      return x.json;
    };
    const ds = (await ok(dep.call("POST", "/data/foundation/catalog/dataSets", {
      name: "Events",
      schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent", contentType: "application/vnd.adobe.xed+json;version=1" },
      tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
    }), 201)) as string[];
    const eventDs = ds[0]!.replace("@/dataSets/", "");
    await ok(dep.call("POST", "/data/core/ups/segment/definitions", {
      name: "regain",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "shop.e1" and timestamp occurs < 5 minutes before now].count() >= 1' },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
    }));
    let n = 0;
    const event = async () => {
      const xdmEntity = { _id: `regain-${n++}`, identityMap: { ECID: [{ id: "p1", primary: true }] }, eventType: "shop.e1", timestamp: new Date(dep.now - 1_000).toISOString() };
      const r = (await ok(dep.call("POST", "/collection/batch/inlet", { messages: [{ header: { datasetId: eventDs }, body: { xdmEntity } }] }), 207)) as { responses: Array<{ status?: number }> };
      assert.deepEqual(r.responses.filter((x) => x.status !== undefined), []);
    };
    const advance = async (ms: number) => {
      await ok(dep.call("POST", "/admin/clock", { advanceMs: ms }, true));
      dep.now += ms;
    };
    const history = async () => (await outcomeOf(dep)).histories;

    const a = await worker("a");
    await advance(20_000);
    await event();
    await waitCaughtUp(dep, 1);
    assert.deepEqual(await history(), ["p1 regain: none→realized"], errors.join("\n"));

    // a stalls with its engine in memory: no lease renewal, no reading.
    await a.worker.leases.stop(false);
    await a.worker.consumers.own(new Set());
    // b takes the partition over once a's lease expired, and writes the exit when the window closes.
    const b = await worker("b");
    const t0 = Date.now();
    while (!b.worker.owned().has(0)) {
      assert.ok(Date.now() - t0 < 30_000, "b took the partition over");
      await new Promise((r) => setTimeout(r, 100));
    }
    await advance(6 * 60_000);
    await waitCaughtUp(dep, 1);
    assert.deepEqual(await history(), ["p1 regain: none→realized realized→exited"]);
    await b.close();

    // a reads again, from the position b stored; the profile qualifies again at once (before a
    // tick could run a's old sweep schedule, which would mend its old states by chance).
    await a.worker.consumers.own(new Set([0]));
    await event();
    await waitCaughtUp(dep, 1);
    assert.deepEqual(await history(), ["p1 regain: none→realized realized→exited exited→realized"]);
    assert.equal(a.worker.stats.superseded, 1, "a's engine from before b's batches was dropped, not used");
    assert.deepEqual(errors, []);
  });
});
