/**
 * Edge locations as their own processes (issue #24): a hub and two edge sites, each site a leaf
 * nats-server with its own JetStream domain and an edge node, all separate processes over real
 * sockets. Locations across processes; definitions from the hub in force at the edges; the hub's
 * NATS away; kill -9 of an edge node under load.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { killAll } from "../helpers/spawn.js";
import { interact, startCluster, until, type Cluster } from "../helpers/cluster.js";
import { defineEdge, ev, hubEvents, servesCutOff, survivesKills } from "./scenarios.js";

const SITES = ["site-a", "site-b"];

describe("edge nodes over NATS JetStream", { timeout: 600_000 }, () => {
  let c: Cluster;
  let stream: string;

  before(async () => {
    c = await startCluster(SITES);
    stream = await c.datastream();
  });
  after(async () => {
    await c?.close();
    killAll();
  });

  const at = (site: string) => c.edges[site]!.url;
  const events = (id: string) => hubEvents(c, id);
  const define = (name: string, pql: string) => defineEdge(c, name, pql);

  it("a definition created, changed or deleted at the hub is in force at every edge node within 2 s, and at a restarted node once it caught up", async () => {
    // The datastream first reaches both nodes (the hub publishes it on creation).
    for (const s of SITES) await until(`the datastream at ${s}`, async () => ((await interact(at(s), stream, ev(`warm-${s}`, randomUUID(), "page.view"))).status === 200 ? true : undefined));
    // A new profile each time: one that qualified at the edge stays in until the 24-hourly pass.
    const qualifies = async (s: string, def: string, eventType: string) => (await interact(at(s), stream, ev(`probe-${randomUUID()}`, randomUUID(), eventType))).segments.includes(def);
    const inForce = async (what: string, check: (s: string) => Promise<boolean>) => {
      const t0 = Date.now();
      for (const s of SITES) await until(`${what} at ${s}`, async () => ((await check(s)) ? true : undefined), 2_000);
      return Date.now() - t0;
    };
    const body = (eventType: string) => ({
      name: "searched",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: `chain(xEvent, timestamp, [C0: WHAT(eventType = "${eventType}") WHEN(< 2 hours before now)])` },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
    });
    const created = await c.call("POST", "/data/core/ups/segment/definitions", body("site.search"));
    assert.equal(created.status, 200, JSON.stringify(created.json));
    const def = (created.json as { id: string }).id;
    const tCreate = await inForce("the new definition", (s) => qualifies(s, def, "site.search"));
    const changed = await c.call("PATCH", `/data/core/ups/segment/definitions/${def}`, body("site.checkout"));
    assert.equal(changed.status, 200, JSON.stringify(changed.json));
    const tChange = await inForce("the changed definition", async (s) => (await qualifies(s, def, "site.checkout")) && !(await qualifies(s, def, "site.search")));
    assert.ok(tCreate < 2_000 && tChange < 2_000, `in force everywhere after ${tCreate} ms (create), ${tChange} ms (change)`);

    // A node that was down while the definition changed catches up from where it stopped.
    await c.edges["site-b"]!.stop();
    const again = await c.call("PATCH", `/data/core/ups/segment/definitions/${def}`, body("site.signup"));
    assert.equal(again.status, 200, JSON.stringify(again.json));
    await c.edges["site-b"]!.restart();
    await until("site-b caught up", async () => {
      const r = (await (await fetch(`${at("site-b")}/readyz`)).json()) as { caughtUp: boolean; feeds: { config: { behind: number | null } } };
      return r.caughtUp && r.feeds.config.behind === 0 ? true : undefined;
    });
    assert.equal(await qualifies("site-b", def, "site.signup"), true, "the change made while the node was down is in force once it caught up");
    assert.equal(await qualifies("site-b", def, "site.checkout"), false);

    const del = await c.call("DELETE", `/data/core/ups/segment/definitions/${def}`);
    assert.equal(del.status, 200, JSON.stringify(del.json));
    const tDelete = await inForce("the deletion", async (s) => !(await qualifies(s, def, "site.signup")));
    assert.ok(tDelete < 2_000, `deleted everywhere after ${tDelete} ms`);
    console.log(`definition in force at both edge nodes: created ${tCreate} ms, changed ${tChange} ms, deleted ${tDelete} ms`);
  });

  it("an event collected at A is at A, not at B; the hub has it once; B sees it only after the hub projects it", async () => {
    const def = await define("searched at some site", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "site.search") WHEN(< 2 hours before now)])');
    for (const s of SITES) await until(`the definition at ${s}`, async () => ((await interact(at(s), stream, ev(`probe2-${s}`, randomUUID(), "site.search"))).segments.includes(def) ? true : undefined));
    const atA = await interact(at("site-a"), stream, ev("dora", "e-a-1", "site.search"));
    assert.equal(atA.status, 200, JSON.stringify(atA.json));
    assert.deepEqual(atA.segments, [def]);
    await until("the event at the hub", async () => ((await events("dora")).length === 1 ? true : undefined));
    assert.deepEqual(await events("dora"), ["e-a-1"]);
    // B has never seen dora: its first request is decided on what it carries.
    const atB = await interact(at("site-b"), stream, ev("dora", "e-b-1", "page.view"));
    assert.deepEqual(atB.segments, [], "B does not see A's search before the projection");
    // B's event makes B hold dora; the hub projects dora (with A's search) to B.
    await until("the projection at B", async () => ((await interact(at("site-b"), stream, ev("dora", randomUUID(), "page.view"))).segments.includes(def) ? true : undefined));
    assert.deepEqual((await events("dora")).filter((e) => e.startsWith("e-")).sort(), ["e-a-1", "e-b-1"]);
  });

  it("with the hub's NATS down, an edge node answers 1,000 requests from its own data; the hub then holds all 1,000 once within 10 s", async () => {
    const took = await servesCutOff({ c, site: "site-a", stream, prefix: "cut", cut: () => c.hubNats.stop(), restore: () => c.hubNats.restart() });
    console.log(`hub NATS stopped: the hub held all 1,000 events ${took} ms after its NATS returned`);
  });

  it("kill -9 of an edge node under load loses no acknowledged event (5 kills)", async () => {
    const r = await survivesKills({ c, site: "site-a", stream, prefix: "kill" });
    console.log(`kill -9 ×5: ${r.acked} events answered 200, all at the hub once (${r.stored} stored, the rest sent but never answered)`);
  });

  it("with its site's nats-server down, a node answers 503 SEGMENTD-EDGE-BUSY-503 within the publish timeout; the event sent again once the server is back is at the hub once", async () => {
    await c.siteNats["site-b"]!.stop();
    try {
      const t0 = Date.now();
      const r = await interact(at("site-b"), stream, ev("erin", "e-down-1", "page.view"));
      const took = Date.now() - t0;
      assert.equal(r.status, 503, JSON.stringify(r.json));
      assert.match(JSON.stringify(r.json), /SEGMENTD-EDGE-BUSY-503/);
      assert.match(JSON.stringify(r.json), /The edge site's event store did not take the event \(no acknowledgement within 5000 ms\); retry shortly/);
      assert.ok(took >= 4_500 && took < 8_000, `answered after ${took} ms`);
    } finally {
      await c.siteNats["site-b"]!.restart();
    }
    await until("site-b takes the event again", async () => ((await interact(at("site-b"), stream, ev("erin", "e-down-1", "page.view"))).status === 200 ? true : undefined));
    await until("the event at the hub", async () => ((await events("erin")).includes("e-down-1") ? true : undefined));
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(await events("erin"), ["e-down-1"], "stored once, though it was sent twice or more");
  });
});

describe("an edge node with an outbox (no JetStream at its site)", { timeout: 600_000 }, () => {
  let c: Cluster;
  let stream: string;

  before(async () => {
    c = await startCluster(["site-o"], { outbox: ["site-o"] });
    stream = await c.datastream();
  });
  after(async () => {
    await c?.close();
    killAll();
  });

  it("with the hub's NATS down, it answers 1,000 requests from its own data; the hub then holds all 1,000 once within 10 s", async () => {
    const took = await servesCutOff({ c, site: "site-o", stream, prefix: "ocut", cut: () => c.hubNats.stop(), restore: () => c.hubNats.restart() });
    console.log(`outbox, hub NATS stopped: the hub held all 1,000 events ${took} ms after its NATS returned`);
  });

  it("kill -9 under load loses no acknowledged event (5 kills)", async () => {
    const r = await survivesKills({ c, site: "site-o", stream, prefix: "okill" });
    console.log(`outbox, kill -9 ×5: ${r.acked} events answered 200, all at the hub once (${r.stored} stored)`);
  });
});

/** Runs `ip` (root only); throws with its stderr. */
function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
}

const ROOT = process.getuid?.() === 0 && spawnSync("ip", ["netns", "list"]).status === 0;

// Network namespaces need root (CI runs as root); elsewhere the NATS-stopped case above stands in.
if (!ROOT) console.log("the cut-link case needs root (ip netns): not run");
if (ROOT) describe("an edge site cut off from the hub by its link", { timeout: 300_000 }, () => {
  // The hub's nats-server in a network namespace of its own, joined to this one by a veth pair:
  // taking the link down cuts the site (and the hub process) off from it without a word.
  const ns = `sdhub${process.pid}`;
  const hostIf = `sdh${process.pid}a`;
  const nsIf = `sdh${process.pid}b`;
  const net = `10.213.${process.pid % 250}`;
  let c: Cluster;
  let stream: string;

  before(async () => {
    ip("netns", "add", ns);
    ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf);
    ip("link", "set", nsIf, "netns", ns);
    ip("addr", "add", `${net}.1/30`, "dev", hostIf);
    ip("link", "set", hostIf, "up");
    ip("netns", "exec", ns, "ip", "addr", "add", `${net}.2/30`, "dev", nsIf);
    ip("netns", "exec", ns, "ip", "link", "set", nsIf, "up");
    ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
    c = await startCluster(["site-a"], { hubNats: { host: `${net}.2`, wrap: ["ip", "netns", "exec", ns] } });
    stream = await c.datastream();
  });
  after(async () => {
    await c?.close();
    killAll();
    spawnSync("ip", ["link", "del", hostIf]);
    spawnSync("ip", ["netns", "del", ns]);
  });

  it("with the link down, edge node A answers 1,000 requests from its own data; once it is up, the hub holds all 1,000 once within 10 s", async () => {
    const took = await servesCutOff({
      c,
      site: "site-a",
      stream,
      prefix: "link",
      cut: async () => ip("link", "set", hostIf, "down"),
      restore: async () => ip("link", "set", hostIf, "up"),
    });
    console.log(`link cut: the hub held all 1,000 events ${took} ms after the link returned`);
  });
});
