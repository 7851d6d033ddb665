/**
 * A segment of segments on an edge node in its own process: it qualifies at request time on the
 * hub's projected membership, and once that membership ends the node's disqualification pass
 * (period shortened to 2 s here; 24 h by default) takes it out at the node and records the exit
 * at the hub. (That requests alone never disqualify it is shown deterministically in
 * test/edge/locations.test.ts, where the pass is run by hand.)
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { killAll } from "../helpers/spawn.js";
import { interact, startCluster, until, type Cluster } from "../helpers/cluster.js";
import { ev } from "./scenarios.js";

describe("segment of segments on an edge node", { timeout: 300_000 }, () => {
  let c: Cluster;
  let stream: string;
  let crm: string;

  before(async () => {
    c = await startCluster(["site-s"], { edgeEnv: { SEGMENTD_EDGE_DISQUALIFY_MS: "2000" } });
    stream = await c.datastream();
    crm = await c.dataset("CRM", "profile");
  });
  after(async () => {
    await c?.close();
    killAll();
  });

  const define = async (name: string, pql: string, kind: "continuous" | "synchronous") => {
    const r = await c.call("POST", "/data/core/ups/segment/definitions", {
      name,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: pql },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: kind === "continuous" }, synchronous: { enabled: kind === "synchronous" } },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return (r.json as { id: string }).id;
  };
  const tier = async (value: string) => {
    const r = await c.call("POST", "/collection/crm-inlet?syncValidation=true", {
      header: { datasetId: crm, schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } },
      body: { xdmEntity: { identityMap: { CRMID: [{ id: "sam", primary: true }] }, loyalty: { tier: value } } },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
  };
  const at = () => c.edges["site-s"]!.url;
  const send = async () => (await interact(at(), stream, ev("sam", randomUUID(), "page.view"))).segments;

  it("qualifies at request time and is taken out by the node's pass; the hub records the exit", async () => {
    const gold = await define("gold (streaming)", 'loyalty.tier = "gold"', "continuous");
    const sos = await define("gold at the edge", `inSegment("${gold}")`, "synchronous");
    await until("the definitions at the node", async () => ((await interact(at(), stream, ev(randomUUID(), randomUUID(), "page.view"))).status === 200 ? true : undefined));
    assert.deepEqual(await send(), [], "first request: the node does not hold sam");
    await tier("gold");
    await until("the projected membership qualifies sam", async () => ((await send()).includes(sos) ? true : undefined));
    await tier("silver");
    // The hub's exit from gold reaches the node; its pass, not a request, takes sam out.
    await until("the node's pass takes sam out", async () => ((await send()).length === 0 ? true : undefined), 15_000);
    await until("the hub records the edge exit", async () => {
      const m = await c.call("GET", `/data/core/ups/segment/definitions/${sos}/metrics?window=24h`);
      assert.equal(m.status, 200, JSON.stringify(m.json));
      const body = m.json as { qualified: number; disqualified: number };
      return body.qualified === 1 && body.disqualified === 1 ? body : undefined;
    });
  });
});
