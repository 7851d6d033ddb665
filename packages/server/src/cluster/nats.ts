/**
 * The NATS connection of a hub or an edge node, and the JetStream streams they set up. A node
 * keeps one connection to its own server (the hub's, or its edge site's leaf server) and reaches
 * the other side's JetStream through its domain (`$JS.<domain>.API`) over the leaf link.
 */
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, DiscardPolicy, RetentionPolicy, StorageType, type Consumer, type JetStreamClient, type JetStreamManager, type JsMsg, type StreamConfig } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { CONFIG_STREAM, DIRECT_EVENTS_SUBJECTS, HUB_EVENTS_STREAM, PROJECTION_STREAM, siteEventsStream, siteEventsSubject } from "./subjects.js";

export type { NatsConnection };

export const nanos = (ms: number): number => Math.round(ms * 1_000_000);

/** Events and projections older than this are of no use to an edge (its windows are < 24 h). */
export const EDGE_RETENTION_MS = 25 * 60 * 60 * 1000;

export interface NatsLink {
  nc: NatsConnection;
  /** JetStream of the server this node connects to (an edge site's own domain, or the hub's). */
  local: { js: JetStreamClient; jsm: JetStreamManager };
  /** The hub's JetStream (through the leaf link from an edge site; the local one at the hub). */
  hub: { js: JetStreamClient; jsm: JetStreamManager };
  close(): Promise<void>;
}

/**
 * Connects and keeps reconnecting for as long as the node runs (the server may start later, or
 * restart): publishes and requests made while it is away fail (the callers answer 503 or retry).
 */
export async function connectNats(opts: { url: string; name: string; localDomain?: string; hubDomain: string; timeoutMs?: number }): Promise<NatsLink> {
  const nc = await connect({
    servers: opts.url.split(",").map((s) => s.trim()),
    name: opts.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    pingInterval: 2_000,
    maxPingOut: 2,
    timeout: opts.timeoutMs ?? 5_000,
  });
  const timeout = opts.timeoutMs ?? 5_000;
  const local = opts.localDomain === undefined ? { timeout } : { domain: opts.localDomain, timeout };
  const js = jetstream(nc, local);
  const jsm = await jetstreamManager(nc, { ...local, checkAPI: false });
  const hubJs = jetstream(nc, { domain: opts.hubDomain, timeout });
  const hubJsm = await jetstreamManager(nc, { domain: opts.hubDomain, timeout, checkAPI: false });
  return {
    nc,
    local: { js, jsm },
    hub: { js: hubJs, jsm: hubJsm },
    async close() {
      // Drain what is in flight, but not forever: with the server gone a drain waits for it.
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)));
      await Promise.race([nc.drain().catch(() => {}), gaveUp]);
      clearTimeout(timer);
      if (!nc.isClosed()) await nc.close().catch(() => {});
    },
  };
}

/** Creates the stream, or updates it to this config when it exists. */
export async function ensureStream(jsm: JetStreamManager, cfg: Partial<StreamConfig> & { name: string }): Promise<void> {
  try {
    await jsm.streams.info(cfg.name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add(cfg);
      return;
    } catch (addErr) {
      // Another node created it meanwhile.
      if (!/already in use|exists/i.test(String((addErr as Error).message))) throw addErr;
    }
  }
}

export function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: number } } | null;
  return e?.api_error?.err_code === 10059 || /not found/i.test(String(e?.message ?? ""));
}

/** An edge site's stream of the events collected there (on the site's own JetStream). */
export async function ensureSiteEventsStream(jsm: JetStreamManager, site: string): Promise<void> {
  await ensureStream(jsm, {
    name: siteEventsStream(site),
    subjects: [siteEventsSubject(site)],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(EDGE_RETENTION_MS),
    // The hub de-duplicates by event id as well; this window covers a client's retries.
    duplicate_window: nanos(2 * 60 * 1000),
    discard: DiscardPolicy.Old,
  });
}

/** The hub's stream of every site's events: one source per site, and the outbox nodes' subject. */
export async function ensureHubEventsStream(jsm: JetStreamManager): Promise<void> {
  await ensureStream(jsm, {
    name: HUB_EVENTS_STREAM,
    // Outbox nodes publish here directly; sites' events come through the sources.
    subjects: [DIRECT_EVENTS_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(7 * 24 * 60 * 60 * 1000),
    duplicate_window: nanos(2 * 60 * 1000),
  });
}

/**
 * Adds the site's stream as a source of the hub's (idempotent). Concurrent updates by two sites
 * may lose one of them: each site checks again later (`EdgeNode` does every 30 s).
 */
export async function ensureSiteSource(hubJsm: JetStreamManager, site: string): Promise<boolean> {
  await ensureHubEventsStream(hubJsm);
  const info = await hubJsm.streams.info(HUB_EVENTS_STREAM);
  const name = siteEventsStream(site);
  const sources = info.config.sources ?? [];
  if (sources.some((s) => s.name === name)) return false;
  await hubJsm.streams.update(HUB_EVENTS_STREAM, { ...info.config, sources: [...sources, { name, domain: site }] });
  return true;
}

/** The hub's last-value streams of configuration and of the projections for each site. */
export async function ensureHubFeedStreams(jsm: JetStreamManager): Promise<void> {
  await ensureStream(jsm, {
    name: CONFIG_STREAM,
    subjects: ["segmentd.cfg.>"],
    storage: StorageType.File,
    max_msgs_per_subject: 1,
  });
  await ensureStream(jsm, {
    name: PROJECTION_STREAM,
    subjects: ["segmentd.proj.>"],
    storage: StorageType.File,
    max_msgs_per_subject: 1,
    max_age: nanos(EDGE_RETENTION_MS),
  });
}

/**
 * Up to `max` messages: a pull of one (waiting at most a second for it), then a pull of as many as
 * the server said were pending behind it. A pull of `max` at once would wait out its whole expiry
 * (a second) whenever fewer than `max` are there — a second of lag for every partly full batch
 * (measured: 1,033 ms for one message). The second pull never waits: what it asks for is stored
 * already. A pull that ends early (heartbeats missed on a busy host) still answers what arrived,
 * with the error; no message at all rethrows.
 */
export async function fetchBatch(consumer: Consumer, max: number): Promise<{ batch: JsMsg[]; error: unknown }> {
  const batch: JsMsg[] = [];
  const first = await pull(consumer, 1, batch);
  if (first !== undefined || batch.length === 0 || max <= 1) return { batch, error: first };
  const more = Math.min(batch[0]!.info.pending, max - 1);
  return { batch, error: more > 0 ? await pull(consumer, more, batch) : undefined };
}

/** One pull of up to `n` messages appended to `into`; the error that ended it early when messages came before it. */
async function pull(consumer: Consumer, n: number, into: JsMsg[]): Promise<unknown> {
  const msgs = await consumer.fetch({ max_messages: n, expires: 1000 });
  try {
    for await (const m of msgs) into.push(m);
  } catch (err) {
    if (into.length === 0) throw err;
    return err;
  }
  return undefined;
}
