// An edge node's acknowledged publishes (#42): those of one event-loop turn reach the site's
// nats-server in one flush, each still acknowledged only once its stream stored it, under its
// own message id (a duplicate is stored once); a message id the header cannot carry is refused;
// no responders is tried again twice, 250 ms apart (a stream not yet subscribed), then refused.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { headers } from "@nats-io/transport-node";
import { startNatsServer } from "../../src/cluster/nats-server.js";
import { connectNats, ensureSiteEventsStream } from "../../src/cluster/nats.js";
import { MsgIdHeader, PublishAcks } from "../../src/cluster/publish-acks.js";
import { siteEventsStream, siteEventsSubject } from "../../src/cluster/subjects.js";

/** A site's nats-server, a link to it and a PublishAcks over it, for `fn`; everything stopped after. */
async function withSite(domain: string, fn: (link: Awaited<ReturnType<typeof connectNats>>, acks: PublishAcks) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `segmentd-h7-${domain}-`));
  const site = await startNatsServer({ dir, domain });
  const link = await connectNats({ url: site.url, name: `h7-${domain}`, localDomain: domain, hubDomain: "hub" });
  const acks = new PublishAcks(link.nc, 5_000);
  try {
    await fn(link, acks);
  } finally {
    acks.close();
    await link.close();
    await site.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("acknowledged publishes to a site's stream", { timeout: 120_000 }, () => {
  it("sends the publishes of one turn in one flush, each acknowledged once stored, under its own id", async () => {
    await withSite("site-c", async (link, acks) => {
      await ensureSiteEventsStream(link.local.jsm, "site-c");
      const stored = async () => (await link.local.jsm.streams.info(siteEventsStream("site-c"))).state.messages;
      const send = (id: string) => acks.publish(siteEventsSubject("site-c"), Buffer.from(JSON.stringify({ id })), id);

      // 100 in one turn (and a repeated id among them): one flush, 100 acks, 99 messages.
      const flushes = acks.stats.flushes;
      const turn = Array.from({ length: 100 }, (_, i) => send(i === 99 ? "e-0" : `e-${i}`));
      assert.equal(acks.pending, 100, "each waits for its acknowledgement");
      const answered = await Promise.all(turn);
      assert.equal(acks.stats.flushes - flushes, 1, "handed to the client in one flush");
      assert.equal(new Set(answered.slice(0, 99).map((a) => a.seq)).size, 99);
      assert.equal(answered[99]!.duplicate, true, "the repeated id is the first one's message");
      assert.equal(answered[99]!.seq, answered[0]!.seq);
      assert.equal(await stored(), 99);

      // Turn after turn: a flush each.
      const before = acks.stats.flushes;
      for (let i = 0; i < 5; i++) await send(`t-${i}`);
      assert.equal(acks.stats.flushes - before, 5);
      assert.equal(await stored(), 104);

      // A message id with a line break cannot be a header: refused, the others of its turn stored.
      const [bad, good] = await Promise.allSettled([send("x\r\nNats-Expected-Stream: other"), send("after-bad")]);
      assert.equal(bad.status, "rejected");
      assert.match(String((bad as PromiseRejectedResult).reason), /cannot contain/);
      assert.equal(good.status, "fulfilled");
      assert.equal(await stored(), 105);
      assert.equal(acks.pending, 0);
    });
  });

  it("sends a publish answered no responders again (a stream created meanwhile stores it once); a subject no stream takes is refused after the retries", async () => {
    await withSite("site-n", async (link, acks) => {
      const early = acks.publish("late.events", Buffer.from("{}"), "late-1");
      await new Promise((r) => setTimeout(r, 120));
      await link.local.jsm.streams.add({ name: "LATE", subjects: ["late.>"] });
      const ack = await early;
      assert.equal(ack.stream, "LATE");
      assert.equal(ack.seq, 1);
      assert.equal((await link.local.jsm.streams.info("LATE")).state.messages, 1, "stored once");

      const t0 = Date.now();
      await assert.rejects(acks.publish("nowhere.events", Buffer.from("{}"), "n-1"), { message: "no stream takes the subject (no responders)" });
      const waited = Date.now() - t0;
      assert.ok(waited >= 500 && waited < 2_000, `refused after two retries: ${waited} ms`);
      assert.equal(acks.pending, 0);
    });
  });

  it("writes the header as the client's own headers do", () => {
    for (const id of ["org\u0000sb/e-1", "  org/évent 🎉 ", "a:b"]) {
      const theirs = headers();
      theirs.set("Nats-Msg-Id", id);
      assert.deepEqual(Buffer.from(new MsgIdHeader(id).encode()), Buffer.from((theirs as unknown as { encode(): Uint8Array }).encode()), id);
    }
    assert.throws(() => headers().set("Nats-Msg-Id", "a\nb"));
    assert.throws(() => new MsgIdHeader("a\nb"), /cannot contain/);
  });
});
