// Streaming ingestion as clients send it, for the kill -9 delivery suites: `writers` connections
// post batches to `POST /collection/batch/inlet` — profile records that set a profile's
// `homeAddress.countryCode`, and purchase events — each writer for its own profiles, one request
// at a time, so a profile's records go out in order. What the API acknowledged (a 207 whose item
// is 200) is recorded; a profile record left unanswered (the connection cut by a kill) is sent
// again first in the next round, as a client retries. Events are not retried.
import { randomUUID } from "node:crypto";
import type { LoggedTransition } from "../../src/profiles/store.js";

export const COUNTRIES = ["US", "FR", "DE", "GB"] as const;
export const PURCHASE = "commerce.purchases";

interface Message {
  ecid: string;
  kind: "record" | "event";
  country?: string;
  id?: string;
  body: Record<string, unknown>;
}

export interface IngestTarget {
  url: string;
  headers: Record<string, string>;
  profileDataset: string;
  eventDataset: string;
}

export class IngestLoad {
  /** Per profile (ECID): the last record sent and whether it was acknowledged. */
  readonly lastRecord = new Map<string, { country: string; acked: boolean }>();
  /** Per profile: purchase events acknowledged. */
  readonly purchasesAcked = new Map<string, number>();
  readonly ackedIds = new Set<string>();
  acked = 0;
  unanswered = 0;
  readonly refused = new Map<number, number>();
  private readonly retry = new Map<string, Message>();
  private seed: number;

  constructor(readonly profiles: number, private readonly writers: number, private readonly perRequest: number, seed = 7) {
    this.seed = seed;
  }

  ecid(i: number): string {
    return `crash-${i}`;
  }

  private rand(): number {
    this.seed = (this.seed * 1103515245 + 12345) % 2 ** 31;
    return this.seed / 2 ** 31;
  }

  private message(t: IngestTarget, ecid: string): Message {
    if (this.rand() < 0.55) {
      const country = COUNTRIES[Math.floor(this.rand() * COUNTRIES.length)]!;
      return { ecid, kind: "record", country, body: { header: { datasetId: t.profileDataset, schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } },
        body: { xdmEntity: { identityMap: { ECID: [{ id: ecid, primary: true }] }, homeAddress: { countryCode: country } } } } };
    }
    const id = `ev-${randomUUID()}`;
    return { ecid, kind: "event", id, body: { header: { datasetId: t.eventDataset, schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent" } },
      body: { xdmEntity: { _id: id, eventType: PURCHASE, timestamp: new Date(Date.now() - 1000).toISOString(), identityMap: { ECID: [{ id: ecid, primary: true }] } } } } };
  }

  /**
   * Writers post until `stop()` is true or their connection fails (the server died); `onAck` after
   * each answered request. `onlyRetries`: send the unanswered records again and nothing new.
   */
  async run(t: IngestTarget, stop: () => boolean, onAck: () => void = () => {}, onlyRetries = false): Promise<void> {
    const writer = async (w: number): Promise<void> => {
      const mine = Array.from({ length: this.profiles }, (_, i) => i).filter((i) => i % this.writers === w).map((i) => this.ecid(i));
      const mineSet = new Set(mine);
      while (!stop()) {
        const batch: Message[] = [];
        const taken = new Set<string>();
        for (const [ecid, m] of this.retry) {
          if (batch.length >= this.perRequest) break;
          if (!mineSet.has(ecid)) continue;
          this.retry.delete(ecid);
          batch.push(m);
          taken.add(ecid);
        }
        if (onlyRetries && batch.length === 0) return;
        while (!onlyRetries && batch.length < this.perRequest) {
          const ecid = mine[Math.floor(this.rand() * mine.length)]!;
          if (taken.has(ecid)) continue;
          taken.add(ecid);
          batch.push(this.message(t, ecid));
        }
        for (const m of batch) if (m.kind === "record") this.lastRecord.set(m.ecid, { country: m.country!, acked: false });
        let statuses: number[] | null = null;
        try {
          const r = await fetch(`${t.url}/collection/batch/inlet`, { method: "POST", headers: t.headers, body: JSON.stringify({ messages: batch.map((m) => m.body) }) });
          const text = await r.text();
          if (r.status === 207) statuses = (JSON.parse(text) as { responses: Array<{ status?: number }> }).responses.map((x) => x.status ?? 200);
          else this.refused.set(r.status, (this.refused.get(r.status) ?? 0) + batch.length);
        } catch {
          // The connection was cut: nothing of this request is known to be stored.
        }
        batch.forEach((m, k) => {
          const status = statuses?.[k];
          if (status === 200) {
            this.acked++;
            if (m.kind === "record") this.lastRecord.set(m.ecid, { country: m.country!, acked: true });
            else {
              this.ackedIds.add(m.id!);
              this.purchasesAcked.set(m.ecid, (this.purchasesAcked.get(m.ecid) ?? 0) + 1);
            }
          } else {
            if (status !== undefined) this.refused.set(status, (this.refused.get(status) ?? 0) + 1);
            this.unanswered++;
            if (m.kind === "record") this.retry.set(m.ecid, m);
          }
        });
        if (statuses === null) return; // the server is gone (or refused the request): this writer's round ends
        onAck();
      }
    };
    await Promise.all(Array.from({ length: this.writers }, (_, w) => writer(w)));
  }

  /** Profile records still unanswered (to send again). */
  get pendingRetries(): number {
    return this.retry.size;
  }
}

/** The audiences the load's writes decide: a country's (streaming or batch) and two acknowledged purchases. */
export interface LoadAudiences {
  us: string;
  fr: string;
  buyers: string;
  /** The batch audience (DE), when a batch job ran after the last write. */
  de?: string;
}

/**
 * What the API acknowledged and the log disagree on: per profile and audience, the log's last
 * transition must be the state the last acknowledged record (or two acknowledged purchases)
 * decides. `pidOf` maps an ECID to the store's profile id. Empty when they agree.
 */
export async function ackedNotInLog(load: IngestLoad, log: readonly LoggedTransition[], aud: LoadAudiences, pidOf: (ecid: string) => Promise<string | null>): Promise<string[]> {
  const lastOf = new Map<string, LoggedTransition>();
  for (const t of log) lastOf.set(`${t.profileId}/${t.definitionId}`, t);
  const wrong: string[] = [];
  for (let i = 0; i < load.profiles; i++) {
    const ecid = load.ecid(i);
    const rec = load.lastRecord.get(ecid);
    const buys = load.purchasesAcked.get(ecid) ?? 0;
    if (rec === undefined && buys === 0) continue;
    const pid = await pidOf(ecid);
    if (pid === null) {
      wrong.push(`${ecid}: acknowledged, yet no profile`);
      continue;
    }
    const expect = (def: string, member: boolean, why: string) => {
      const to = lastOf.get(`${pid}/${def}`)?.to ?? "none";
      if (member ? to !== "realized" : to === "realized") wrong.push(`${ecid} (${pid}) ${why}: the log's last transition of ${def} is ${to}`);
    };
    if (rec !== undefined) {
      if (!rec.acked) wrong.push(`${ecid}: its last record was never acknowledged`);
      expect(aud.us, rec.country === "US", `last record ${rec.country}`);
      expect(aud.fr, rec.country === "FR", `last record ${rec.country}`);
      if (aud.de !== undefined) expect(aud.de, rec.country === "DE", `last record ${rec.country} (batch)`);
    }
    if (buys >= 2) expect(aud.buyers, true, `${buys} purchases acknowledged`);
  }
  return wrong;
}
