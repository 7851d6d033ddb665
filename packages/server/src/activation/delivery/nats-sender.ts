// A NATS JetStream destination: one stream per dataflow (SEGMENTD_FLOW_<flow id>) capturing the
// target subject, one message per transition (JSON: the profile's identities and selected
// attributes as the webhook payload reads them, the audience, its status and the log position),
// each with `Nats-Msg-Id` = a stable id per (flow, transition) so that a message published again
// within the stream's duplicate window is stored once. A unit is acknowledged when every one of
// its messages got its publish ack; a profile's messages are published one after the other (the
// next only once the previous is stored), so a stream holds each profile's transitions in log
// order even when an attempt fails halfway. Each dataflow has its own connection.
import { connect, type ConnectionOptions, type NatsConnection } from "@nats-io/transport-node";
import { DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { checkNatsUrl } from "../inputs.js";
import type { NatsTarget } from "../types.js";
import { assertPublicTarget } from "../url-safety.js";
import type { SendContext, SendResult, UnitSender } from "./unit-sender.js";
import type { DeliveryUnit, UnitItem } from "./state-store.js";

/** A message published again within this window (a retry, a restart) is stored once. */
export const NATS_DUPLICATE_WINDOW_MS = 10 * 60_000;
/** How long a dataflow's stream keeps messages (its consumers read them well before). */
export const NATS_MAX_AGE_MS = 7 * 24 * 3600_000;
/** Units whose acknowledged messages are remembered between attempts (a dead unit's entry ages out). */
const REMEMBERED_UNITS = 1000;

/** The dataflow's stream: SEGMENTD_FLOW_<flow id without dashes>. */
export function natsStreamName(flowId: string): string {
  return `SEGMENTD_FLOW_${flowId.replace(/[^A-Za-z0-9_]/g, "")}`;
}

/** `Nats-Msg-Id`: a transition's log position, or a snapshot member's unit and profile; the same on every attempt and after restarts. */
export function natsMessageId(flowId: string, unitId: string, item: UnitItem): string {
  return item.seq > 0 ? `${flowId}:${item.seq}` : `${flowId}:${unitId}:${item.profileId}`;
}

/** One message of a NATS dataflow (docs/activation.md "NATS JetStream"). */
export interface NatsMessage {
  flowId: string;
  profileId: string;
  audienceId: string;
  status: UnitItem["status"];
  lastQualificationTime: string;
  /** Transition log position; null for a member sent as `existing`. */
  seq: number | null;
  identityMap: Record<string, Array<{ id: string }>>;
  /** The attributes the dataflow's profileSelectors name. */
  attributes: Record<string, unknown>;
}

const nanos = (ms: number): number => ms * 1_000_000;
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: number } } | null;
  return e?.api_error?.err_code === 10059 || /not found/i.test(String(e?.message ?? ""));
}

interface Link {
  key: string;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

export interface NatsSenderOptions {
  flowId: string;
  allowPrivateNetworks: boolean;
  timeoutMs: number;
}

export class NatsSender implements UnitSender {
  private link: Promise<Link> | null = null;
  private linkKey = "";
  /** The subject the stream was last made to capture, on the current connection. */
  private ensured: string | null = null;
  private readonly acked = new Map<string, Set<string>>();
  private closed = false;

  constructor(private readonly opts: NatsSenderOptions) {}

  close(): void {
    this.closed = true;
    void this.drop();
  }

  async send(u: DeliveryUnit, ctx: SendContext): Promise<SendResult> {
    const target = ctx.flow.target as NatsTarget;
    let servers: string[];
    let tls = false;
    if (target.serverUrl !== undefined) {
      let addressUrl: string;
      try {
        const parsed = checkNatsUrl(target.serverUrl);
        servers = [parsed.hostPort];
        tls = parsed.tls;
        addressUrl = parsed.addressUrl;
        // Checked again at every attempt: a name re-pointed at an internal address is refused.
        await assertPublicTarget(addressUrl, { allowPrivateNetworks: this.opts.allowPrivateNetworks });
      } catch (err) {
        return { ok: false, message: `Destination address refused at send time: ${messageOf(err)}` };
      }
    } else if (target.fallbackUrl !== undefined) {
      servers = target.fallbackUrl.split(",").map((s) => s.trim()).filter((s) => s !== "");
    } else {
      return { ok: false, message: "No NATS server: the target connection has no serverUrl and this server no natsUrl" };
    }
    const stream = natsStreamName(this.opts.flowId);
    let link: Link;
    try {
      link = await this.connect(servers, tls, target.serverUrl !== undefined);
    } catch (err) {
      return { ok: false, message: `NATS server ${servers.join(",")} unreachable: ${messageOf(err)}` };
    }
    try {
      await this.ensureStream(link, stream, target.subject);
    } catch (err) {
      this.ensured = null;
      return { ok: false, message: `JetStream stream ${stream} for subject "${target.subject}" could not be set up: ${messageOf(err)}` };
    }
    const messages = await this.messages(u, ctx);
    let done = this.acked.get(u.unitId);
    if (done === undefined) {
      done = new Set();
      this.acked.set(u.unitId, done);
      if (this.acked.size > REMEMBERED_UNITS) this.acked.delete(this.acked.keys().next().value!);
    }
    const acked = done;
    // One chain per profile, in log order; the chains run side by side.
    const chains = new Map<string, Array<{ id: string; data: Uint8Array }>>();
    for (const m of messages) {
      const list = chains.get(m.profileId);
      if (list === undefined) chains.set(m.profileId, [m]);
      else list.push(m);
    }
    let failed = 0;
    let firstError: unknown = null;
    await Promise.all([...chains.values()].map(async (chain) => {
      for (let i = 0; i < chain.length; i++) {
        const m = chain[i]!;
        if (acked.has(m.id)) continue;
        try {
          await link.js.publish(target.subject, m.data, { msgID: m.id, timeout: this.opts.timeoutMs, expect: { streamName: stream } });
          acked.add(m.id);
        } catch (err) {
          // The rest of this profile waits for the next attempt: stored order stays log order.
          failed += chain.length - i;
          firstError ??= err;
          return;
        }
      }
    }));
    if (failed > 0) {
      if (isNotFound(firstError) || /no responders|503/i.test(messageOf(firstError))) this.ensured = null;
      return { ok: false, message: `${failed} of ${messages.length} messages not acknowledged by JetStream stream ${stream}: ${messageOf(firstError)}` };
    }
    this.acked.delete(u.unitId);
    return { ok: true };
  }

  /** The unit's messages in unit (log) order, read as the webhook payload reads profiles. */
  private async messages(u: DeliveryUnit, ctx: SendContext): Promise<Array<{ id: string; profileId: string; data: Uint8Array }>> {
    const profiles = new Map((await ctx.payload(u.items)).map((p) => [p._segmentd.profileId, p]));
    const enc = new TextEncoder();
    return u.items.map((it) => {
      const p = profiles.get(it.profileId);
      const attributes: Record<string, unknown> = {};
      if (p !== undefined) for (const [k, v] of Object.entries(p)) if (k !== "identityMap" && k !== "segmentMembership" && k !== "_segmentd") attributes[k] = v;
      const msg: NatsMessage = {
        flowId: this.opts.flowId,
        profileId: it.profileId,
        audienceId: it.audienceId,
        status: it.status,
        lastQualificationTime: new Date(it.at).toISOString(),
        seq: it.seq > 0 ? it.seq : null,
        identityMap: p?.identityMap ?? {},
        attributes,
      };
      return { id: natsMessageId(this.opts.flowId, u.unitId, it), profileId: it.profileId, data: enc.encode(JSON.stringify(msg)) };
    });
  }

  private connect(servers: string[], tls: boolean, userGiven: boolean): Promise<Link> {
    const key = `${tls ? "tls" : "nats"}|${servers.join(",")}`;
    if (this.link !== null && this.linkKey === key) return this.link;
    void this.drop();
    const options: ConnectionOptions = {
      servers,
      name: `segmentd-flow-${this.opts.flowId}`,
      // Keeps reconnecting while the flow runs; publishes made meanwhile time out and are retried.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 2_000,
      maxPingOut: 2,
      timeout: Math.min(this.opts.timeoutMs, 5_000),
      // A user's server must not steer the client to addresses that were never checked.
      ignoreClusterUpdates: userGiven,
      ...(tls ? { tls: {} } : {}),
    };
    const p = (async (): Promise<Link> => {
      const nc = await connect(options);
      if (this.closed) {
        await nc.close().catch(() => {});
        throw new Error("the sender is closed");
      }
      void nc.closed().then(() => {
        if (this.link === p) this.link = null;
      });
      const timeout = this.opts.timeoutMs;
      return { key, nc, js: jetstream(nc, { timeout }), jsm: await jetstreamManager(nc, { timeout, checkAPI: false }) };
    })();
    this.link = p;
    this.linkKey = key;
    this.ensured = null;
    p.catch(() => {
      if (this.link === p) this.link = null;
    });
    return p;
  }

  private async drop(): Promise<void> {
    const p = this.link;
    this.link = null;
    this.ensured = null;
    if (p === null) return;
    const link = await p.catch(() => null);
    if (link !== null && !link.nc.isClosed()) await link.nc.close().catch(() => {});
  }

  /** Creates the dataflow's stream, or points it at the subject when the target's subject changed. */
  private async ensureStream(link: Link, name: string, subject: string): Promise<void> {
    if (this.ensured === subject) return;
    try {
      const info = await link.jsm.streams.info(name);
      const subjects = info.config.subjects ?? [];
      if (subjects.length !== 1 || subjects[0] !== subject) await link.jsm.streams.update(name, { subjects: [subject] });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await link.jsm.streams.add({
        name,
        subjects: [subject],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        max_age: nanos(NATS_MAX_AGE_MS),
        duplicate_window: nanos(NATS_DUPLICATE_WINDOW_MS),
        num_replicas: 1,
      });
    }
    this.ensured = subject;
  }
}
