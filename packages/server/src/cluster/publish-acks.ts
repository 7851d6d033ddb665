/**
 * JetStream publishes awaited through one reply subscription. The client's `js.publish` makes a
 * request per message — an inbox token, a timer and two error objects (their stack traces
 * captured up front) — which was about a tenth of an edge node's CPU per interact request. Here
 * each publish is a core publish with a reply subject under one wildcard subscription, and one
 * interval sweeps the overdue ones. Same guarantees: the promise resolves with the stream's
 * acknowledgement (the message is stored) and rejects on an error reply, no responders (no
 * stream takes the subject) or the timeout; the message id makes a retry stored once.
 *
 * A reconnect sends every publish still waiting again, at once: the client drops what was
 * buffered while it was away (each dial resets its outbound buffer) and an ack in flight when the
 * server stopped is lost, so without this each of them waited out the whole timeout and was
 * refused although the server was back within a second. The stream's duplicate window (2 min)
 * stores a message sent twice once, and answers the second copy with its first ack.
 */
import { createInbox, headers, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "@nats-io/transport-node";

export interface PubAck {
  stream: string;
  seq: number;
  duplicate?: boolean;
}

interface Waiting {
  resolve(ack: PubAck): void;
  reject(err: Error): void;
  deadline: number;
  subject: string;
  data: Uint8Array;
  headers: MsgHdrs;
}

export class PublishAcks {
  private readonly prefix = `${createInbox()}.`;
  private readonly waiting = new Map<string, Waiting>();
  private readonly sub: Subscription;
  private readonly sweep: NodeJS.Timeout;
  private next = 0;
  private readonly statuses: AsyncIterable<{ type: string }> & { stop?: () => void };
  readonly stats = { resent: 0 };

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {
    this.sub = nc.subscribe(`${this.prefix}*`, { callback: (err, msg) => (err ? this.failAll(err) : this.onReply(msg)) });
    this.sweep = setInterval(() => this.expire(), Math.min(250, timeoutMs)).unref();
    const statuses = nc.status();
    this.statuses = statuses;
    void (async () => {
      for await (const s of statuses) if (s.type === "reconnect") this.resend();
    })().catch(() => {});
  }

  get pending(): number {
    return this.waiting.size;
  }

  /** Resolves once the stream stored the message (or had it already: `duplicate`). */
  publish(subject: string, data: Uint8Array, msgId: string): Promise<PubAck> {
    const token = (this.next++).toString(36);
    const h = headers();
    h.set("Nats-Msg-Id", msgId);
    return new Promise<PubAck>((resolve, reject) => {
      this.waiting.set(token, { resolve, reject, deadline: Date.now() + this.timeoutMs, subject, data, headers: h });
      try {
        this.nc.publish(subject, data, { reply: this.prefix + token, headers: h });
      } catch (err) {
        this.waiting.delete(token);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  private onReply(msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length);
    const w = this.waiting.get(token);
    if (!w) return; // Answered after its timeout: the caller was told already.
    this.waiting.delete(token);
    if (msg.headers?.hasError === true || msg.data.length === 0) {
      w.reject(new Error(msg.headers?.code === 503 ? "no stream takes the subject (no responders)" : `${msg.headers?.code ?? "?"} ${msg.headers?.description ?? "empty reply"}`));
      return;
    }
    try {
      const r = msg.json<PubAck & { error?: { code: number; err_code?: number; description: string } }>();
      if (r.error) w.reject(new Error(`${r.error.code} ${r.error.description}`));
      else w.resolve(r);
    } catch (err) {
      w.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** After a reconnect: every publish still waiting, sent again under its own reply token. */
  private resend(): void {
    for (const [token, w] of this.waiting) {
      try {
        this.nc.publish(w.subject, w.data, { reply: this.prefix + token, headers: w.headers });
        this.stats.resent++;
      } catch {
        // Disconnected again: the next reconnect sends it, or its timeout answers.
      }
    }
  }

  private expire(): void {
    const now = Date.now();
    // In publish order, so in deadline order: the first not overdue ends the sweep.
    for (const [token, w] of this.waiting) {
      if (w.deadline > now) break;
      this.waiting.delete(token);
      w.reject(new Error(`no acknowledgement within ${this.timeoutMs} ms`));
    }
  }

  private failAll(err: Error): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
  }

  /** Rejects what still waits and stops listening. */
  close(): void {
    clearInterval(this.sweep);
    this.statuses.stop?.();
    this.failAll(new Error("the publisher is closed"));
    this.sub.unsubscribe();
  }
}
