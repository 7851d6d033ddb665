/**
 * Edge interact benchmark (issue #8, acceptance 4).
 *
 *   npm run bench:edge            (= node --conditions=source --import tsx bench/edge.ts)
 *   options: --profiles 100000 --definitions 150 --connections 32 --seconds 10
 *
 * The bench process starts the service (edge interact on the embedded stores,
 * 150 edge definitions of every query type, 100,000 profiles in the hub,
 * projected to the edge location) and, on another port, a bare Fastify JSON
 * endpoint. The load comes from a separate process (this file with --client):
 * autocannon with a random known profile and event type per request. Both
 * endpoints are measured in the same run with the same client settings; the
 * ratio edge/bare is printed with the figures.
 */
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { postLoad, runLoadClient, type ClientResult } from "./lib/load-client.js";
import { parseArgs } from "node:util";
import Fastify from "fastify";

const { values: args } = parseArgs({
  options: {
    client: { type: "boolean", default: false },
    url: { type: "string", default: "" },
    profiles: { type: "string", default: "100000" },
    definitions: { type: "string", default: "150" },
    connections: { type: "string", default: "32" },
    seconds: { type: "string", default: "10" },
  },
});

const PROFILES = Number(args.profiles);
const EVENT_TYPES = 30;

// ---------------------------------------------------------------- load client
async function runClient(): Promise<void> {
  await postLoad({
    url: args.url!,
    connections: Number(args.connections),
    seconds: Number(args.seconds),
    body() {
      const who = Math.floor(Math.random() * PROFILES);
      const type = Math.random() < 0.2 ? "web.webpagedetails.pageViews" : `type.${Math.floor(Math.random() * EVENT_TYPES)}`;
      return { event: { xdm: { identityMap: { CRMID: [{ id: `c${who}`, primary: true }] }, eventType: type, timestamp: new Date(Date.now() - 50).toISOString() } } };
    },
  });
}

function load(url: string): Promise<ClientResult> {
  return runLoadClient<ClientResult>(fileURLToPath(import.meta.url), ["--url", url, "--profiles", String(PROFILES), "--connections", args.connections!, "--seconds", args.seconds!]);
}

// ---------------------------------------------------------------- server side
async function runBench(): Promise<void> {
  const { installBodyParsing } = await import("../packages/server/src/http/body-parsing.js");
  const { installErrorHandling } = await import("../packages/server/src/http/errors.js");
  const { registerRealtime } = await import("../packages/server/src/edge/register.js");
  const { Authenticator } = await import("../packages/server/src/services/auth/authenticator.js");
  const { ingestRecords } = await import("../packages/server/src/profiles/ingest.js");
  const { openRealtimeWorld } = await import("./lib/realtime.js");

  const ORG = "BENCHEDGE000000000000000@AdobeOrg";
  const world = await openRealtimeWorld(ORG);
  const { dir, clock, bus, meta, hub, tenants, tenant, scope } = world;
  try {
    const t0 = performance.now();
    const tiers = ["gold", "silver", "bronze"];
    const countries = ["US", "FR", "DE", "JP", "BR"];
    const created: Record<string, string[]> = { profile: [] };
    const define = async (name: string, pql: string, kind: string) => {
      (created[kind] ??= []).push(await world.define(name, pql, "synchronous"));
    };
    const n = Number(args.definitions);
    for (let i = 0; created["profile"]!.length + (created["rest"]?.length ?? 0) + (created["sos"]?.length ?? 0) < n; i++) {
      const type = `type.${i % EVENT_TYPES}`;
      switch (i % 5) {
        case 0:
        case 1:
          await define(`single event ${i}`, `chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(< ${1 + (i % 12)} hours before now)])`, "rest");
          break;
        case 2:
          await define(`profile only ${i}`, `homeAddress.countryCode = "${countries[i % 5]}" and loyalty.points > ${(i * 37) % 1000}`, "profile");
          break;
        case 3:
          await define(`event with profile ${i}`, `loyalty.tier = "${tiers[i % 3]}" and chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(today)])`, "rest");
          break;
        case 4:
          if (i % 10 === 4 && created["profile"]!.length >= 2) {
            const p = created["profile"]!;
            await define(`segment of segments ${i}`, `inSegment("${p[i % p.length]}") or inSegment("${p[(i + 1) % p.length]}")`, "sos");
          } else {
            await define(`multiple events ${i}`, `chain(xEvent, timestamp, [C0: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 12 hours before now), C1: WHAT(eventType = "${type}") WHEN(< 12 hours before now)])`, "rest");
          }
          break;
      }
    }
    console.log(`definitions: ${Object.entries(created).map(([k, v]) => `${v.length} ${k}`).join(", ")} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    await hub.createDataset(scope, { id: "edge-events", name: "edge events", schemaClass: "experienceevent", profileEnabled: true }, clock.now());
    await hub.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, clock.now());
    const t1 = performance.now();
    for (let start = 0; start < PROFILES; start += 5000) {
      const records = [];
      for (let i = start; i < Math.min(PROFILES, start + 5000); i++) {
        records.push({ index: i - start, value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, homeAddress: { countryCode: countries[i % 5] }, loyalty: { tier: tiers[i % 3], points: (i * 7919) % 1000 } } });
      }
      await ingestRecords(hub, scope, "crm", records, { now: clock.now() });
    }
    console.log(`profiles: ${PROFILES} in the hub in ${((performance.now() - t1) / 1000).toFixed(1)} s`);

    const app = Fastify({ logger: false });
    installErrorHandling(app);
    installBodyParsing(app);
    const rt = await registerRealtime(app, {
      authenticator: new Authenticator({ jwtOrgClaim: "org", staticTokens: [{ token: "t", orgs: [ORG] }], apiKeys: ["k"], operatorTokens: [] }, clock),
      tenants,
      meta,
      hub,
      clock,
      bus,
      onError: (err) => console.error("realtime error:", err),
    });
    const ds = await rt.datastreams.create(tenant, { name: "bench", eventDatasetId: "edge-events" });
    const t2 = performance.now();
    const projected = await rt.projector.projectAll(tenant, rt.locations.defaultLocation);
    console.log(`projection: ${projected} profiles to location '${rt.locations.defaultLocation}' in ${((performance.now() - t2) / 1000).toFixed(1)} s`);
    const edgeUrl = await app.listen({ host: "127.0.0.1", port: 0 });

    const bare = Fastify({ logger: false });
    bare.post("/bare", {
      schema: { response: { 200: { type: "object", properties: { requestId: { type: "string" }, ok: { type: "boolean" } } } } },
    }, async () => ({ requestId: "r", ok: true }));
    const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });

    // Warm both paths (JIT, caches) before measuring.
    for (let i = 0; i < 200; i++) {
      await fetch(`${edgeUrl}/ee/v2/interact?dataStreamId=${ds.id}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: { xdm: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, eventType: "type.1", timestamp: new Date().toISOString() } } }) });
    }
    await rt.flush();

    const bareResult = await load(`${bareUrl}/bare`);
    const edgeResult = await load(`${edgeUrl}/ee/v2/interact?dataStreamId=${ds.id}`);
    const flushStart = performance.now();
    await rt.flush();
    const flushMs = performance.now() - flushStart;
    const transitions = await hub.listTransitions(scope, { sources: ["edge"], limit: 10_000_000 });

    const ratio = edgeResult.rps / bareResult.rps;
    console.log("");
    console.log(`| endpoint | req/s | p50 | p99 | non-2xx | errors |`);
    console.log(`|---|---|---|---|---|---|`);
    console.log(`| bare Fastify JSON | ${bareResult.rps.toFixed(0)} | ${bareResult.p50} ms | ${bareResult.p99} ms | ${bareResult.non2xx} | ${bareResult.errors} |`);
    console.log(`| edge interact (${n} definitions, ${PROFILES} profiles) | ${edgeResult.rps.toFixed(0)} | ${edgeResult.p50} ms | ${edgeResult.p99} ms | ${edgeResult.non2xx} | ${edgeResult.errors} |`);
    console.log("");
    console.log(`ratio edge/bare: ${ratio.toFixed(2)} (target >= 0.4); edge: ${edgeResult.rps >= 5000 ? "meets" : "MISSES"} 5,000 req/s, p99 ${edgeResult.p99 <= 10 ? "meets" : "MISSES"} 10 ms`);
    console.log(`hub: ${edgeResult.requests} events forwarded, ${transitions.length} edge transitions recorded; backlog flushed ${flushMs.toFixed(0)} ms after the load ended`);
    await app.close();
    await bare.close();
  } finally {
    await hub.close();
    await meta.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.client) await runClient();
else await runBench();
