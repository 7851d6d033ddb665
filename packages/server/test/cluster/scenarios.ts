/**
 * The fault scenarios of the cluster suite, run against an edge node with its site's JetStream
 * and against one with an outbox: cut off from the hub while serving, and kill -9 under load.
 * Both compare the event ids answered 200 with what the hub's profile store holds.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { interact, until, type Cluster } from "../helpers/cluster.js";

export const SEARCH = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "site.search") WHEN(< 2 hours before now)])';

export const ev = (id: string, eventId: string, eventType: string) => ({ _id: eventId, identityMap: { CRMID: [{ id, primary: true }] }, eventType, timestamp: new Date(Date.now() - 1000).toISOString() });

/** The event ids the hub holds for a profile (each once, or the duplicate shows). */
export async function hubEvents(c: Cluster, id: string): Promise<string[]> {
  const r = await c.call("GET", `/data/core/ups/access/entities?schema.name=_xdm.context.experienceevent&relatedSchema.name=_xdm.context.profile&relatedEntityIdNS=CRMID&relatedEntityId=${encodeURIComponent(id)}&limit=1000`);
  if (r.status === 404) return [];
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return ((r.json as { children?: Array<{ entityId: string }> }).children ?? []).map((x) => x.entityId);
}

/** An edge (synchronous) definition created at the hub; its id. */
export async function defineEdge(c: Cluster, name: string, pql: string): Promise<string> {
  const r = await c.call("POST", "/data/core/ups/segment/definitions", {
    name,
    schema: { name: "_xdm.context.profile" },
    expression: { type: "PQL", format: "pql/text", value: pql },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
  });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return (r.json as { id: string }).id;
}

/**
 * With the hub out of reach (`cut`), the node answers 1,000 requests from its own data with the
 * right audience; after `restore` the hub holds all 1,000 events once within 10 s. Returns how
 * long that took (ms).
 */
export async function servesCutOff(o: { c: Cluster; site: string; stream: string; prefix: string; cut(): Promise<void>; restore(): Promise<void> }): Promise<number> {
  const { c, site, stream, prefix } = o;
  const edge = () => c.edges[site]!.url;
  const def = await defineEdge(c, `searched while cut off (${prefix})`, SEARCH);
  await until(`the definition at ${site}`, async () => ((await interact(edge(), stream, ev(randomUUID(), randomUUID(), "site.search"))).segments.includes(def) ? true : undefined));
  await o.cut();
  const sent: string[] = [];
  for (let i = 0; i < 1000; i += 20) {
    const rs = await Promise.all(Array.from({ length: 20 }, (_, k) => interact(edge(), stream, ev(`${prefix}-${(i + k) % 10}`, `${prefix}-ev-${i + k}`, "site.search"))));
    rs.forEach((r, k) => {
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.ok(r.segments.includes(def), `request ${i + k} qualifies from the node's own data`);
      sent.push(`${prefix}-ev-${i + k}`);
    });
  }
  // A silent cut is noticed within seconds (2 s pings, a 5 s request timeout): the node says so.
  await until("the node reports it is cut off from the hub", async () => (((await (await fetch(`${edge()}/readyz`)).json()) as { hubConnected: boolean }).hubConnected === false ? true : undefined), 15_000).catch(async (err: unknown) => {
    throw new Error(`${String(err)}: ${JSON.stringify(await (await fetch(`${edge()}/readyz`)).json())}\n${c.edges[site]!.proc.stdout().slice(-3000)}`);
  });
  await o.restore();
  const t0 = Date.now();
  const all: string[] = [];
  await until("all 1,000 events at the hub", async () => {
    all.length = 0;
    for (let p = 0; p < 10; p++) all.push(...(await hubEvents(c, `${prefix}-${p}`)).filter((e) => e.startsWith(`${prefix}-ev-`)));
    return all.length >= 1000 ? true : undefined;
  }, 30_000);
  const took = Date.now() - t0;
  assert.equal(all.length, 1000, "each event once");
  assert.deepEqual([...new Set(all)].sort(), [...sent].sort());
  assert.ok(took <= 10_000, `the hub held them all ${took} ms after it was reachable again`);
  return took;
}

/** kill -9 of the node every 0.7 s of load, five times: every event answered 200 is at the hub once. */
export async function survivesKills(o: { c: Cluster; site: string; stream: string; prefix: string }): Promise<{ acked: number; stored: number }> {
  const { c, stream, prefix } = o;
  const node = c.edges[o.site]!;
  const acked = new Set<string>();
  let seq = 0;
  for (let kill = 0; kill < 5; kill++) {
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const id = `${prefix}-k-${seq++}`;
        try {
          const r = await interact(node.url, stream, ev(`${prefix}-${seq % 20}`, id, "page.view"));
          if (r.status === 200) acked.add(id);
        } catch {
          // The connection died with the node: not acknowledged.
        }
      }
    };
    const workers = Array.from({ length: 8 }, () => worker());
    await new Promise((r) => setTimeout(r, 700));
    await node.kill();
    stop = true;
    await Promise.all(workers);
    await node.restart();
  }
  assert.ok(acked.size >= 200, `enough acknowledged events to mean something: ${acked.size}`);
  const counts = new Map<string, number>();
  const missing = () => [...acked].filter((id) => !counts.has(id));
  await until("every acknowledged event at the hub", async () => {
    counts.clear();
    for (let p = 0; p < 20; p++) for (const e of await hubEvents(c, `${prefix}-${p}`)) counts.set(e, (counts.get(e) ?? 0) + 1);
    return missing().length === 0 ? true : undefined;
  }, 30_000).catch((err: unknown) => {
    throw new Error(`${String(err)}: ${acked.size} acknowledged, missing ${missing().length} (${missing().slice(0, 10).join(", ")})`);
  });
  assert.deepEqual(missing(), [], "acknowledged events missing at the hub");
  assert.deepEqual([...counts].filter(([, n]) => n > 1).map(([id]) => id), [], "events stored twice at the hub");
  return { acked: acked.size, stored: counts.size };
}
