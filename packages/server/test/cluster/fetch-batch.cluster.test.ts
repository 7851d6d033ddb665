// fetchBatch (cluster/nats.ts), which every pull loop uses (partition consumers, feed readers, hub
// ingest, edge nodes): a partly full batch answers at once instead of waiting out the pull's
// one-second expiry; a full one is cut at `max`; an empty stream waits the expiry and answers nothing.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { DeliverPolicy } from "@nats-io/jetstream";
import { startNatsServer } from "../../src/cluster/nats-server.js";
import { connectNats, fetchBatch } from "../../src/cluster/nats.js";

describe("fetchBatch", { timeout: 60_000 }, () => {
  it("answers what is stored without waiting out the expiry, up to max, in order, each message once", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-fetch-batch-"));
    const server = await startNatsServer({ dir, domain: "fb" });
    const link = await connectNats({ url: server.url, name: "fetch-batch", localDomain: "fb", hubDomain: "fb" });
    try {
      await link.local.jsm.streams.add({ name: "FB", subjects: ["fb.>"] });
      const js = link.local.js;
      const consumer = await js.consumers.get("FB", { filter_subjects: "fb.a", deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 1 });
      const timed = async (max: number) => {
        const t0 = performance.now();
        const r = await fetchBatch(consumer, max);
        return { ms: performance.now() - t0, seqs: r.batch.map((m) => m.seq), error: r.error };
      };

      // Nothing stored: the pull waits its expiry (a second) and answers nothing.
      const empty = await timed(500);
      assert.deepEqual(empty.seqs, []);
      assert.ok(empty.ms >= 900, `an empty pull answered after ${empty.ms} ms`);

      // One message of 500 asked for: at once (a pull of 500 would take the whole second).
      await js.publish("fb.a", "1");
      await js.publish("fb.b", "other subject");
      const one = await timed(500);
      assert.deepEqual(one.seqs, [1]);
      assert.ok(one.ms < 300, `one message answered after ${one.ms} ms`);

      // Seven stored, five asked for: five at once, then the other two at once.
      for (let i = 0; i < 7; i++) await js.publish("fb.a", String(i));
      const five = await timed(5);
      assert.deepEqual(five.seqs, [3, 4, 5, 6, 7]);
      assert.ok(five.ms < 300, `five answered after ${five.ms} ms`);
      const two = await timed(5);
      assert.deepEqual(two.seqs, [8, 9]);
      assert.ok(two.ms < 300, `two answered after ${two.ms} ms`);
      assert.equal(two.error, undefined);

      // A message stored while the loop was away (between pulls) is the next pull's first.
      await js.publish("fb.a", "later");
      assert.deepEqual((await timed(1)).seqs, [10]);
      assert.deepEqual((await timed(500)).seqs, []);
    } finally {
      await link.close();
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
