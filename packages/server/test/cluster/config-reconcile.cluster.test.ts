/**
 * Configuration changes whose publish was lost: a definition deleted at the hub while the hub's
 * NATS was away, the hub then killed before it could publish the deletion. When the hub starts
 * again it publishes every record it has and the deletion of every record it no longer has, so
 * the edge node stops evaluating the deleted definition.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { killAll } from "../helpers/spawn.js";
import { interact, startCluster, until, type Cluster } from "../helpers/cluster.js";
import { defineEdge, ev, SEARCH } from "./scenarios.js";

describe("configuration after a lost publish", { timeout: 300_000 }, () => {
  let c: Cluster;
  let stream: string;

  before(async () => {
    c = await startCluster(["site-r"]);
    stream = await c.datastream();
  });
  after(async () => {
    await c?.close();
    killAll();
  });

  const qualifies = async (def: string) => (await interact(c.edges["site-r"]!.url, stream, ev(randomUUID(), randomUUID(), "site.search"))).segments.includes(def);

  it("a deletion the hub could not publish before it was killed reaches the node once the hub restarts", async () => {
    const kept = await defineEdge(c, "kept", SEARCH);
    const gone = await defineEdge(c, "deleted while the hub's NATS was away", SEARCH);
    await until("both definitions at the node", async () => ((await qualifies(kept)) && (await qualifies(gone)) ? true : undefined));
    await c.hubNats.stop();
    const del = await c.call("DELETE", `/data/core/ups/segment/definitions/${gone}`);
    assert.equal(del.status, 200, JSON.stringify(del.json));
    await c.hub.kill();
    await c.hubNats.restart();
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await qualifies(gone), true, "nothing told the node yet");
    await c.hub.restart();
    await until("the deletion at the node", async () => (!(await qualifies(gone)) ? true : undefined));
    assert.equal(await qualifies(kept), true, "the other definition is untouched");
  });
});
