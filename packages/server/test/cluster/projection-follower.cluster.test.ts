/**
 * Several hubs share which profiles an edge site holds (issue #43): hub A projects a profile to a
 * site (the hub that consumed the site's events of it), hub B — which never saw those events —
 * learns from the projection stream that the site holds it, so a change made through B is
 * projected there too; a forget through A stops B's; a hub started later learns what the stream
 * holds. A real nats-server; each hub's view of the site as the hub builds it (RemoteLocationStore
 * publishing with the projection headers, ProjectionFollower reading).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { connectNats, ensureHubFeedStreams, type NatsLink } from "../../src/cluster/nats.js";
import { ProjectionFollower, projectionHeaders } from "../../src/cluster/projection-follower.js";
import { RemoteLocationStore } from "../../src/cluster/remote-location.js";
import { PROJECTION_STREAM } from "../../src/cluster/subjects.js";
import { encode } from "../../src/cluster/wire.js";
import type { Projection } from "../../src/edge/location-store.js";

const TK = "org@AdobeOrg\u0000sandbox-1";
const projection = (profileId: string, id: string): Projection => ({ profileId, identities: [{ namespace: "ECID", id }], attributes: {}, optedOut: false, memberships: {}, events: [], at: Date.now() });

/** One hub's view of site `edge-1` and its follower of the projection stream. */
function hub(link: NatsLink, errors: unknown[]): { site: RemoteLocationStore; follower: ProjectionFollower } {
  const site = new RemoteLocationStore("edge-1", async (subject, message) => {
    await link.hub.js.publish(subject, encode(message), { headers: projectionHeaders("forget" in message) });
  }, (e) => errors.push(e));
  const follower = new ProjectionFollower({ js: link.hub.js, jsm: link.hub.jsm, site: (l) => (l === "edge-1" ? site : undefined), onError: (e) => errors.push(e) });
  return { site, follower };
}

async function until(what: string, check: () => Promise<boolean>, ms = 5_000): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    assert.ok(Date.now() - t0 < ms, `${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - t0;
}

describe("which profiles a site holds, shared by the hubs", { timeout: 60_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  const links: NatsLink[] = [];
  const followers: ProjectionFollower[] = [];
  const errors: unknown[] = [];
  const connect = async (name: string) => {
    const link = await connectNats({ url: server.url, name, localDomain: "hub", hubDomain: "hub" });
    links.push(link);
    return link;
  };

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-proj-follow-"));
    server = await startNatsServer({ dir, domain: "hub" });
    await ensureHubFeedStreams((await connect("setup")).hub.jsm);
  });
  after(async () => {
    for (const f of followers) await f.stop();
    for (const l of links) await l.close();
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a profile hub A projected to the site is held for hub B; B's change of it is projected; a forget through A ends that", async () => {
    const a = hub(await connect("hub-a"), errors);
    const b = hub(await connect("hub-b"), errors);
    followers.push(a.follower, b.follower);
    await a.follower.start();
    await b.follower.start();
    await b.follower.caughtUp();

    // Hub B knows nothing of p1 yet: a change through B is not projected to the site.
    assert.equal(await b.site.holds(TK, [{ namespace: "ECID", id: "e1" }], "p1"), false);
    const before = (await links[0]!.hub.jsm.streams.info(PROJECTION_STREAM)).state.messages;
    await b.site.project(TK, projection("p1", "e1"));
    await b.site.idle();
    assert.equal((await links[0]!.hub.jsm.streams.info(PROJECTION_STREAM)).state.messages, before, "hub B sent nothing for a profile it does not know the site holds");

    // Hub A consumed the site's event of e1 and projects p1 (adopt): B learns the site holds it.
    a.site.note(TK, { namespace: "ECID", id: "e1" });
    await a.site.project(TK, projection("p1", "e1"), { adopt: true });
    await a.site.idle();
    const ms = await until("hub B learns p1 is held", () => b.site.holds(TK, [], "p1"));
    console.log(`hub B learned a profile hub A projected after ${ms} ms`);
    // A change of p1 through B now reaches the site (the stream holds B's projection as p1's last value).
    await b.site.project(TK, { ...projection("p1", "e1"), attributes: { through: "B" } });
    await b.site.idle();
    const last = await links[0]!.hub.jsm.streams.getMessage(PROJECTION_STREAM, { last_by_subj: "segmentd.proj.edge-1.org~40AdobeOrg~00sandbox-1.p1" });
    assert.deepEqual((JSON.parse(new TextDecoder().decode(last!.data)) as { projection: Projection }).projection.attributes, { through: "B" });

    // Forgotten through A (a delete, say): B stops holding it.
    assert.equal(await a.site.forget(TK, new Set(["p1"])), 1);
    await a.site.idle();
    await until("hub B drops p1", async () => !(await b.site.holds(TK, [], "p1")));
    assert.deepEqual(errors, []);
  });

  it("a hub started later learns the profiles projected before it started", async () => {
    const a = hub(links[1]!, errors);
    a.site.note(TK, { namespace: "ECID", id: "e2" });
    await a.site.project(TK, projection("p2", "e2"), { adopt: true });
    await a.site.idle();
    const c = hub(await connect("hub-c"), errors);
    followers.push(c.follower);
    await c.follower.start();
    assert.equal(await c.site.holds(TK, [], "p2"), true);
    assert.deepEqual(errors, []);
  });
});
