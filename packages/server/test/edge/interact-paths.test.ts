/**
 * The interact service's two ways through a request: with a location store in
 * this process it reads and writes the profile entry synchronously; with a
 * store behind the asynchronous interface (a location in another process) it
 * awaits each step. Both must answer and store the same. And the definition
 * set and its evaluation plan, kept per datastream between requests, follow a
 * change of the sandbox's edge definitions from the next request on.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DatastreamService } from "../../src/edge/datastreams.js";
import type { ForwardItem, HubForwarder } from "../../src/edge/hub-forwarder.js";
import { EdgeInteractService, type InteractResponse } from "../../src/edge/interact.js";
import { InMemoryLocationStore, isLocalLocationStore, type Projection } from "../../src/edge/location-store.js";
import { EdgeLocations, tenantKeyOf } from "../../src/edge/locations.js";
import { DEFAULT_LIMITS } from "../../src/platform/config.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { asyncOnly } from "../helpers/async-location-store.js";
import { EVENTS_DS, ORG, openFixture, type Fixture } from "../streaming/fixtures.js";

const T0 = Date.parse("2026-04-01T09:00:00Z");
const MIN = 60_000;

interface Side {
  service: EdgeInteractService;
  store: InMemoryLocationStore;
  forwarded: ForwardItem[];
}

describe("edge interact: request paths", () => {
  let f: Fixture;
  let datastreams: DatastreamService;
  let tenants: TenantDirectory;
  let dataStreamId: string;

  before(async () => {
    f = await openFixture(T0);
    tenants = new TenantDirectory({ organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }], limits: { ...DEFAULT_LIMITS } });
    datastreams = new DatastreamService(f.meta.datastreams, f.hub, f.clock);
    dataStreamId = (await datastreams.create(f.tenant, { name: "web", eventDatasetId: EVENTS_DS })).id;
  });
  after(async () => {
    await f.close();
  });

  function side(remote: boolean): Side {
    const store = new InMemoryLocationStore("edge");
    const forwarded: ForwardItem[] = [];
    const forwarder = { admit: () => true, enqueue: (item: ForwardItem) => void forwarded.push(item) } as unknown as HubForwarder;
    const locations = new EdgeLocations({ names: ["edge"] }, () => (remote ? asyncOnly(store) : store));
    assert.equal(isLocalLocationStore(locations.get("edge")!), !remote);
    const service = new EdgeInteractService({ datastreams, tenants, catalog: f.catalog, definitions: f.meta.definitions, locations, forwarder, hub: f.hub, clock: f.clock });
    return { service, store, forwarded };
  }

  const body = (who: string, eventType: string, at: number) => ({ event: { xdm: { _id: `${who}-${at}`, identityMap: { CRMID: [{ id: who, primary: true }] }, eventType, timestamp: new Date(at).toISOString() } } });

  it("a store behind the asynchronous interface answers and stores as the store in this process", async () => {
    const base = await f.define("pageview (base)", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 1 hours before now)])', { synchronous: true });
    await f.define("checkout after pageview", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 2 hours before now), C1: WHAT(eventType = "commerce.checkouts") WHEN(< 2 hours before now)])', { synchronous: true });
    await f.define("gold (profile)", 'loyalty.tier = "gold"', { synchronous: true });
    await f.define("segment of segments", `inSegment("${base}")`, { synchronous: true });
    const local = side(false);
    const remote = side(true);
    const tk = tenantKeyOf(f.tenant);
    let s = 11;
    const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
    const types = ["web.pageview", "commerce.checkouts", "other"];
    let qualified = 0;
    for (let i = 0; i < 60; i++) {
      f.clock.set(T0 + i * 7 * MIN);
      const who = `p${Math.floor(rnd() * 4)}`;
      const type = types[Math.floor(rnd() * 3)]!;
      if (i === 30) {
        // A projection in between (attributes and a membership from the hub) on both sides.
        const projection: Projection = { profileId: "hub-p1", identities: [{ namespace: "crmid", id: "p1" }], attributes: { loyalty: { tier: "gold" } }, optedOut: false, memberships: {}, events: [], at: f.clock.now() };
        await local.store.project(tk, projection, { adopt: true });
        await remote.store.project(tk, projection, { adopt: true });
      }
      const b = body(who, type, f.clock.now() - 1000);
      const a: InteractResponse = await local.service.interact(undefined, dataStreamId, b, `r${i}`);
      const r: InteractResponse = await remote.service.interact(undefined, dataStreamId, b, `r${i}`);
      assert.deepEqual(r, a, `request ${i} for ${who} (${type})`);
      qualified += a.handle[0]!.payload.length;
    }
    assert.ok(qualified > 10, "the requests qualified for some audiences");
    assert.deepEqual(remote.forwarded.map((x) => ({ ...x, tenant: null })), local.forwarded.map((x) => ({ ...x, tenant: null })));
    for (const who of ["p0", "p1", "p2", "p3"]) {
      const id = { namespace: "crmid", id: who };
      const pl = local.store.lookupNow(tk, id);
      const pr = remote.store.lookupNow(tk, id);
      assert.deepEqual(pr?.view, pl?.view, who);
      assert.deepEqual(pr?.events, pl?.events, who);
      assert.equal(pr?.revision, pl?.revision, who);
    }
  });

  it("evaluates a definition created, changed or deleted after earlier requests from the next request on", async () => {
    const { service } = side(false);
    const segments = async (who: string, type: string) => {
      const r = await service.interact(undefined, dataStreamId, body(who, type, f.clock.now() - 1000), "r");
      return r.handle[0]!.payload.flatMap((p) => (p as { segments: Array<{ id: string }> }).segments.map((x) => x.id));
    };
    f.clock.set(T0 + 24 * 60 * MIN);
    const before = await segments("q1", "x.new");
    const id = await f.define("new type", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "x.new") WHEN(< 1 hours before now)])', { synchronous: true });
    assert.ok(!before.includes(id));
    assert.ok((await segments("q2", "x.new")).includes(id), "a new definition");
    const d = await f.definitions.get(f.tenant, id);
    await f.definitions.overwrite(f.tenant, id, { ...d, expression: { type: "PQL", format: "pql/text", value: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "x.other") WHEN(< 1 hours before now)])' } });
    assert.ok(!(await segments("q3", "x.new")).includes(id), "a changed definition");
    assert.ok((await segments("q4", "x.other")).includes(id));
    await f.definitions.delete(f.tenant, id);
    assert.ok(!(await segments("q5", "x.other")).includes(id), "a deleted definition");
  });
});
