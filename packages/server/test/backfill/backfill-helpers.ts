/**
 * What the backfill suites share: loading records through the batch streaming endpoint, waiting for
 * a definition's backfill, an audience's members read page by page, and a batch job over chosen
 * definitions (what "a from-scratch evaluation" means here).
 */
import assert from "node:assert/strict";
import { DEFS, arr, obj, type Client } from "../helpers/server-harness.js";
import type { BackfillView } from "../../src/batch/backfill/backfill-types.js";

export const PROFILE_SCHEMA = "https://ns.adobe.com/xdm/context/profile";
export const EVENT_SCHEMA = "https://ns.adobe.com/xdm/context/experienceevent";

/** A batch-collection message carrying one XDM entity. */
export function message(datasetId: string, schemaId: string, entity: Record<string, unknown>): Record<string, unknown> {
  return { header: { datasetId, schemaRef: { id: schemaId } }, body: { xdmEntity: entity } };
}

/** Posts messages 1,000 a request (`writers` requests at once); every one must be stored. */
export async function load(url: string, headers: Record<string, string>, messages: readonly Record<string, unknown>[], writers = 2): Promise<void> {
  let next = 0;
  const writer = async () => {
    while (next < messages.length) {
      const part = messages.slice(next, next + 1000);
      next += 1000;
      const r = await fetch(`${url}/collection/batch/inlet`, { method: "POST", headers, body: JSON.stringify({ messages: part }) });
      const text = await r.text();
      assert.equal(r.status, 207, text.slice(0, 500));
      const bad = (JSON.parse(text) as { responses: Array<{ status?: number }> }).responses.filter((x) => (x.status ?? 200) !== 200);
      assert.equal(bad.length, 0, text.slice(0, 500));
    }
  };
  await Promise.all(Array.from({ length: writers }, writer));
}

/** What GET …/backfill answers (the server's own type: a test reads what the API serves). */
export type BackfillJson = BackfillView;

/** Polls GET …/backfill until it ended; `after`: a queuedAt it must be newer than (the previous backfill's). */
export async function waitBackfill(c: Client, id: string, after?: string, ms = 120_000): Promise<BackfillJson> {
  const t0 = Date.now();
  for (;;) {
    const r = await c.get(`${DEFS}/${id}/backfill`);
    if (r.status === 200) {
      const b = r.json as BackfillJson;
      if ((b.state === "succeeded" || b.state === "failed") && (after === undefined || b.queuedAt > after)) return b;
    } else assert.equal(r.status, 404, r.text);
    if (Date.now() - t0 > ms) throw new Error(`backfill of ${id} did not end: ${r.text}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

export interface Member {
  profileId: string;
  identities: Array<{ namespace: string; id: string }>;
  lastQualificationTime: string;
  since: { source: string; at: string } | null;
}

/** Every member of an audience with this status, by profile id. */
export async function members(c: Client, id: string, status: "realized" | "exited" = "realized"): Promise<Map<string, Member>> {
  const out = new Map<string, Member>();
  let start: string | null = null;
  for (;;) {
    const r = await c.get(`${DEFS}/${id}/members?status=${status}&limit=100${start === null ? "" : `&start=${start}`}`);
    assert.equal(r.status, 200, r.text);
    const page = obj(r.json);
    for (const m of arr(page.children)) {
      const x = obj(m) as unknown as Member;
      out.set(x.profileId, x);
    }
    start = obj(page._page).next as string | null;
    if (start === null) return out;
  }
}

/** A batch job over these definitions, polled until it succeeded. */
export async function runJob(c: Client, ids: readonly string[]): Promise<void> {
  const job = await c.post("/data/core/ups/segment/jobs", { segments: ids.map((segmentId) => ({ segmentId })) });
  assert.equal(job.status, 200, job.text);
  for (let i = 0; ; i++) {
    const j = obj((await c.get(`/data/core/ups/segment/jobs/${obj(job.json).id as string}`)).json);
    if (j.status === "SUCCEEDED") return;
    if (j.status === "FAILED" || i >= 6000) throw new Error(`segment job: ${JSON.stringify(j)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const METHODS = {
  streaming: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
  edge: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
  batch: { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } },
} as const;

export function sameKeys(a: ReadonlyMap<string, unknown>, b: ReadonlyMap<string, unknown>): { onlyA: string[]; onlyB: string[] } {
  return { onlyA: [...a.keys()].filter((k) => !b.has(k)).sort(), onlyB: [...b.keys()].filter((k) => !a.has(k)).sort() };
}

const HOUR = 3_600_000;
export const COUNTRIES = ["US", "FR", "DE", "GB"] as const;

/** A streaming-eligible audience: the country's profiles with a purchase in the last 20 hours. */
export const buyersIn = (country: string) => `homeAddress.countryCode = "${country}" and chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 20 hours before now)])`;

export const ecidMap = (i: number) => ({ ECID: [{ id: `bf-${i}`, primary: true }] });

/** `n` profiles in four countries; half bought inside the 20-hour window, a quarter before it, a quarter never. */
export function population(profilesDataset: string, eventsDataset: string, n: number, now: number): Record<string, unknown>[] {
  const msgs: Record<string, unknown>[] = [];
  for (let i = 0; i < n; i++) {
    msgs.push(message(profilesDataset, PROFILE_SCHEMA, { identityMap: ecidMap(i), homeAddress: { countryCode: COUNTRIES[i % 4] } }));
    if (i % 4 !== 3) msgs.push(message(eventsDataset, EVENT_SCHEMA, { _id: `bf-${i}-0`, identityMap: ecidMap(i), eventType: "commerce.purchases", timestamp: new Date(now - (i % 4 === 2 ? 30 : 2) * HOUR).toISOString() }));
  }
  return msgs;
}

/** The headers of org A's prod sandbox for raw fetch calls. */
export function headersOf(token: string, apiKey: string, org: string): Record<string, string> {
  return { "content-type": "application/json", authorization: `Bearer ${token}`, "x-api-key": apiKey, "x-gw-ims-org-id": org, "x-sandbox-name": "prod" };
}

/** A transition as the log holds it (store.readTransitionLog). */
export interface ChainLink {
  seq: number;
  profileId: string;
  from: string | null;
  to: string;
}

/**
 * Each profile's transitions, in log order, form one chain: every `from` is the previous `to` (null
 * first) and differs from its own `to`. A doubled or lost transition breaks it. Returns each
 * profile's last status.
 */
export function checkChains(log: readonly ChainLink[]): Map<string, string> {
  const last = new Map<string, string>();
  for (const t of log) {
    const prev = last.get(t.profileId) ?? null;
    assert.equal(t.from, prev, `profile ${t.profileId}: transition ${t.seq} from ${String(t.from)} after ${String(prev)} (doubled or lost)`);
    assert.notEqual(t.from, t.to, `profile ${t.profileId}: transition ${t.seq} changes nothing`);
    last.set(t.profileId, t.to);
  }
  return last;
}
