/**
 * After a hub restart. A definition deleted at the hub while the hub's NATS was away, the hub then
 * killed before it could publish the deletion: when it starts again it publishes every record it
 * has and the deletion of every record it no longer has, so the edge node stops evaluating it.
 * And the hub remembers, from its projection stream, which profiles each site holds: a profile's
 * change after the restart reaches the site without the site sending an event of it first.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { killAll } from "../helpers/spawn.js";
import { interact, startCluster, until, type Cluster } from "../helpers/cluster.js";
import { defineEdge, ev, SEARCH } from "./scenarios.js";

describe("after a hub restart", { timeout: 300_000 }, () => {
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

  it("a profile a site holds is projected to it when it changes after the hub restarted", async () => {
    const crm = await c.dataset("CRM", "profile");
    const gold = await defineEdge(c, "gold at the edge", 'loyalty.tier = "gold"');
    const edge = () => c.edges["site-r"]!.url;
    const rita = async () => (await interact(edge(), stream, ev("rita", randomUUID(), "page.view"))).segments.includes(gold);
    await until("the definition at the node", async () => ((await interact(edge(), stream, ev(randomUUID(), randomUUID(), "page.view"))).status === 200 ? true : undefined));
    // The node now holds rita, and the hub's projection stream holds her projection for the site
    // (what a restarted hub learns the site's profiles from). Rita's own projection, not any
    // movement of the feed: under load the probes' events reach the hub late, and a hub killed
    // with her first event fetched gets it again only after the consumer's ack wait.
    assert.equal(await rita(), false);
    await until("rita's projection in the hub's projection stream", async () => ((await projectionsOf(c, "site-r")).some((m) => m.projection?.identities.some((i) => i.id === "rita")) ? true : undefined));
    await c.hub.kill();
    await c.hub.restart();
    const r = await c.call("POST", "/collection/crm-inlet?syncValidation=true", {
      header: { datasetId: crm, schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } },
      body: { xdmEntity: { identityMap: { CRMID: [{ id: "rita", primary: true }] }, loyalty: { tier: "gold" } } },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // Requests at the node do not make the hub project (it skips the site an event came from).
    await until("rita's new tier at the node", async () => ((await rita()) ? true : undefined)).catch(async (err: unknown) => {
      const held = (await projectionsOf(c, "site-r")).map((m) => m.projection?.identities.map((i) => i.id).join("+") ?? `forget ${m.forget ?? "?"}`);
      throw new Error(`${String(err)}; the site's projections: ${held.join(", ")}`);
    });
  });
});

/** The last projection message of each of a site's subjects in the hub's projection stream. */
async function projectionsOf(c: Cluster, site: string): Promise<Array<{ projection?: { identities: Array<{ id: string }> }; forget?: string }>> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: c.hubNats.url });
  try {
    const jsm = await jetstreamManager(nc, { domain: "hub" });
    const i = await jsm.streams.info("SEGMENTD_PROJ", { subjects_filter: `segmentd.proj.${site}.>` });
    const out = [];
    for (const subject of Object.keys(i.state.subjects ?? {})) {
      const m = await jsm.streams.getMessage("SEGMENTD_PROJ", { last_by_subj: subject });
      if (m) out.push(m.json<{ projection?: { identities: Array<{ id: string }> }; forget?: string }>());
    }
    return out;
  } finally {
    await nc.close();
  }
}
