// Issue #38, acceptance 3, over the whole server's public HTTP API: a flow created for audiences
// that already have members sends exactly those members as `existing`; then a member leaving by
// each path — a batch job, streaming ingestion, an edge request, the 24-hourly segment-of-segments
// pass and a data-lifecycle record delete — arrives at a real receiver (its own process) as
// `exited`, signed with the flow's secret.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { arr, client, DEFS, EVENT_CLASS, obj, ORG_A, PROFILE_CLASS, profileDataset, runSegmentJob, startHarness, type Client, type Harness } from "../helpers/server-harness.js";
import { killAll } from "../helpers/spawn.js";
import { backfillsDone, createWebhookFlow, received, startReceiver, until, type Receiver } from "./delivery-harness.js";

const SCOPE = { orgId: ORG_A, sandboxName: "prod" };

describe("a dataflow's existing members and every exit path, over the server's API", { timeout: 120_000 }, () => {
  let h: Harness;
  let c: Client;
  let receiver: Receiver;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-exits-"));
    receiver = await startReceiver(path.join(dir, "r.ndjson"));
    h = await startHarness("delivery-exits", { patch: (cfg) => (cfg.activation = { allowPrivateNetworks: true }) });
    c = client(h.url);
  });

  after(async () => {
    await h?.close();
    killAll();
    rmSync(dir, { recursive: true, force: true });
  });

  test("existing members exactly, then an exit by batch, streaming, edge, the segment-of-segments pass and a record delete", async () => {
    const crm = await profileDataset(c, "CRM", PROFILE_CLASS);
    const web = await profileDataset(c, "Web", EVENT_CLASS);
    const ds = await c.post("/data/core/edge/datastreams", { name: "site", eventDatasetId: web });
    assert.equal(ds.status, 201, ds.text);
    const dataStreamId = String(obj(ds.json).id);
    const define = async (name: string, pql: string, how: "batch" | "continuous" | "synchronous") => {
      const r = await c.post(DEFS, {
        name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: pql },
        evaluationInfo: { batch: { enabled: how === "batch" }, continuous: { enabled: how === "continuous" }, synchronous: { enabled: how === "synchronous" } },
      });
      assert.equal(r.status, 200, r.text);
      return String(obj(r.json).id);
    };
    const upsert = async (records: Array<[string, Record<string, unknown>]>) => {
      const r = await c.post("/collection/batch/crm-inlet", {
        messages: records.map(([id, attrs]) => ({ header: { datasetId: crm, schemaRef: { id: PROFILE_CLASS } }, body: { xdmEntity: { identityMap: { ECID: [{ id, primary: true }] }, ...attrs } } })),
      });
      assert.equal(r.status, 207, r.text);
      assert.ok(arr(obj(r.json).responses).every((x) => (obj(x).status ?? 200) === 200), r.text);
      await h.server.app.edge!.flush();
    };
    const interact = async (id: string): Promise<string[]> => {
      const r = await c.post(`/ee/v2/interact?dataStreamId=${dataStreamId}`, {
        event: { xdm: { identityMap: { ECID: [{ id, primary: true }] }, eventType: "web.webpagedetails.pageViews", timestamp: new Date(Date.now() - 1000).toISOString() } },
      }, { "content-type": "application/json" });
      assert.equal(r.status, 200, r.text);
      await h.server.app.edge!.flush();
      const handles = obj(r.json).handle as Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }>;
      return handles.find((x) => x.type === "activation:pull")!.payload.flatMap((p) => p.segments ?? []).map((s) => s.id).sort();
    };
    const pidOf = async (id: string) => (await h.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id }))!;

    const gold = await define("gold (batch)", 'loyalty.tier = "gold"', "batch");
    const us = await define("US (streaming)", 'homeAddress.countryCode = "US"', "continuous");
    const ca = await define("CA (edge)", 'homeAddress.countryCode = "CA"', "synchronous");
    // Its base is a streaming audience: the hub projects a streaming exit to the edge locations at
    // once (a batch job's results are not projected to them).
    const usAtEdge = await define("US at the edge (segment of segments)", `inSegment("${us}")`, "synchronous");

    // The new live definitions' backfills (over no profiles yet) are done before any profile exists.
    await backfillsDone(c, [us, ca, usAtEdge]);
    // b-leaves and b-stays: gold; s-leaves and s-stays: US; e-leaves: CA; g-sos: US, and US at the edge; del: gold and US.
    await upsert([["b-leaves", { loyalty: { tier: "gold" } }], ["b-stays", { loyalty: { tier: "gold" } }], ["s-leaves", { homeAddress: { countryCode: "US" } }],
      ["s-stays", { homeAddress: { countryCode: "US" } }], ["e-leaves", { homeAddress: { countryCode: "CA" } }], ["g-sos", { homeAddress: { countryCode: "US" } }],
      ["del", { loyalty: { tier: "gold" }, homeAddress: { countryCode: "US" } }]]);
    await runSegmentJob(c);
    // The first request makes the edge location hold the visitor; the next sees its projected
    // attributes and batch memberships.
    for (const id of ["e-leaves", "g-sos"]) await interact(id);
    await until(async () => (await interact("e-leaves")).includes(ca), "e-leaves in the edge audience", 10_000);
    await until(async () => (await interact("g-sos")).includes(usAtEdge), "g-sos in the segment of segments", 10_000);

    const pid: Record<string, string> = {};
    for (const id of ["b-leaves", "b-stays", "s-leaves", "s-stays", "e-leaves", "g-sos", "del"]) pid[id] = await pidOf(id);
    const members: Record<string, string[]> = {
      [gold]: ["b-leaves", "b-stays", "del"].map((x) => pid[x]!).sort(),
      [us]: ["s-leaves", "s-stays", "g-sos", "del"].map((x) => pid[x]!).sort(),
      [ca]: [pid["e-leaves"]!],
      [usAtEdge]: [pid["g-sos"]!],
    };

    // The flow, created after the audiences have members: exactly those, as existing.
    const { flowId, secret } = await createWebhookFlow(c, "exits", receiver.url, [gold, us, ca, usAtEdge], { maxWaitMs: 20 });
    const flat = () => received(receiver.log, secret).flatMap((r) => r.profiles.flatMap((p) => Object.entries(p.ups).map(([aud, m]) => ({ pid: p.profileId, aud, status: m.status, signed: r.signed, seqs: p.seqs }))));
    const total = Object.values(members).reduce((n, m) => n + m.length, 0);
    await until(() => flat().length >= total, "the existing members", 20_000);
    // Nothing more arrives for the snapshot (a stray member would show here).
    await new Promise((r) => setTimeout(r, 500));
    const existing = flat();
    assert.ok(existing.every((x) => x.signed), "signed with the secret returned at creation");
    assert.deepEqual(existing.map((x) => x.status), existing.map(() => "existing"));
    const got: Record<string, string[]> = {};
    for (const x of existing) (got[x.aud] ??= []).push(x.pid);
    for (const k of Object.keys(got)) got[k]!.sort();
    assert.deepEqual(got, members, "exactly each audience's members, each once");

    /** Waits for `profile` to arrive as exited from `audience`; returns every such delivery. */
    const exitArrives = async (profile: string, audience: string, why: string) => {
      const match = () => flat().filter((x) => x.pid === profile && x.aud === audience && x.status === "exited");
      await until(() => match().length > 0, `${why}: the exit at the receiver`, 20_000);
      assert.ok(match().every((x) => x.signed && x.seqs.length >= 1), `${why}: signed, with its log positions`);
    };
    const log = async (profile: string, audience: string) => (await h.server.profiles.listTransitions(SCOPE, { definitionId: audience })).filter((t) => t.profileId === profile).map((t) => `${t.from}>${t.to} ${t.source}`);

    // Batch: b-leaves is silver now; the next job takes it out.
    await upsert([["b-leaves", { loyalty: { tier: "silver" } }]]);
    await runSegmentJob(c);
    await exitArrives(pid["b-leaves"]!, gold, "batch job");
    assert.deepEqual(await log(pid["b-leaves"]!, gold), ["null>realized batch", "realized>exited batch"]);

    // Streaming: a profile record that moves s-leaves to France takes it out at once.
    await upsert([["s-leaves", { homeAddress: { countryCode: "FR" } }]]);
    await exitArrives(pid["s-leaves"]!, us, "streaming ingestion");
    assert.deepEqual(await log(pid["s-leaves"]!, us), ["null>realized streaming", "realized>exited streaming"]);

    // Edge: e-leaves moves to France; the hub projects that to the location, and the next request takes it out.
    await upsert([["e-leaves", { homeAddress: { countryCode: "FR" } }]]);
    await until(async () => !(await interact("e-leaves")).includes(ca), "the edge request without CA", 10_000);
    await exitArrives(pid["e-leaves"]!, ca, "edge request");
    assert.deepEqual(await log(pid["e-leaves"]!, ca), ["null>realized edge", "realized>exited edge"]);

    // Segment of segments: g-sos leaves US (streaming); requests keep it in the edge audience, the
    // 24-hourly pass takes it out.
    await upsert([["g-sos", { homeAddress: { countryCode: "FR" } }]]);
    await exitArrives(pid["g-sos"]!, us, "streaming ingestion (g-sos)");
    assert.ok((await interact("g-sos")).includes(usAtEdge), "a request never disqualifies a segment of segments");
    const pass = await h.server.app.edge!.disqualification.run();
    assert.deepEqual(pass.exits.map((x) => [x.profileId, x.definitionId]), [[pid["g-sos"], usAtEdge]]);
    await exitArrives(pid["g-sos"]!, usAtEdge, "segment-of-segments pass");
    assert.deepEqual(await log(pid["g-sos"]!, usAtEdge), ["null>realized edge", "realized>exited edge"]);

    // Data lifecycle: deleting del's records takes it out of every audience it was in.
    const wo = await c.post("/data/core/hygiene/workorder", { action: "delete_identity", datasetId: "ALL", displayName: "erase del", namespacesIdentities: [{ namespace: { code: "ECID" }, ids: ["del"] }] });
    assert.equal(wo.status, 200, wo.text);
    await h.server.hygiene.runner.idle();
    assert.equal(obj((await c.get(`/data/core/hygiene/workorder/${String(obj(wo.json).workorderId)}`)).json).status, "completed");
    await exitArrives(pid.del!, gold, "record delete (gold)");
    await exitArrives(pid.del!, us, "record delete (US)");
    // Data-lifecycle exits are recorded as batch transitions (hygiene/lifecycle-exits.ts).
    assert.deepEqual(await log(pid.del!, us), ["null>realized streaming", "realized>exited batch"]);
    assert.equal(await pidOf("del"), null, "the profile is gone");

    // Those who stayed never left, and nothing else arrived.
    const exits = flat().filter((x) => x.status === "exited").map((x) => `${x.pid} ${x.aud}`);
    assert.deepEqual([...new Set(exits)].sort(), [`${pid["b-leaves"]} ${gold}`, `${pid["s-leaves"]} ${us}`, `${pid["e-leaves"]} ${ca}`, `${pid["g-sos"]} ${us}`, `${pid["g-sos"]} ${usAtEdge}`,
      `${pid.del} ${gold}`, `${pid.del} ${us}`].sort());
    assert.ok(flat().every((x) => x.status !== "realized"), "no one entered");
    const stats = obj(arr(obj((await c.get(`/data/foundation/flowservice/flows/${flowId}`)).json).items)[0]).deliveryStats;
    assert.equal(obj(stats).dead, 0);
  });
});
