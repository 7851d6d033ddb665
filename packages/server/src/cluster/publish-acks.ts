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
 *
 * No responders (503) is sent again after NO_RESPONDERS_RETRY_MS, twice, as the NATS clients do
 * (ADR-22): a stream just created, or still being recovered by a server that just started, has
 * not subscribed its subjects yet; a subject no stream takes is refused ~0.5 s later.
 *
 * The publishes of one event-loop turn go out in one socket write (#42): the client flushes its
 * buffer in a microtask after the first publish, which on an HTTP server is after each request's
 * callback, so each request paid a `write` to the server (and a read of its ack) of its own —
 * a quarter of an edge node's CPU. Here a publish is queued, and the queue is handed to the
 * client in a `setImmediate` callback, after every request of that turn's poll phase: one write,
 * and their acks come back together. A publish waits at most that turn longer.
 */
import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "@nats-io/transport-node";

/**
 * The message's one header, `Nats-Msg-Id`, as the client writes it (`NATS/1.0\r\nNats-Msg-Id:
 * <id>\r\n\r\n`). The client's publish only calls `encode()` on the headers it is given; its own
 * MsgHdrs costs a map, key arrays, a validation regex and a string per message (~1.4 KB of a
 * request's allocations). The value is checked and trimmed as the client's `set` does.
 */
export class MsgIdHeader {
  private readonly bytes: Buffer;

  constructor(msgId: string) {
    if (/[\r\n]/.test(msgId)) throw new Error("invalid header: values cannot contain \\r or \\n");
    this.bytes = Buffer.from(`NATS/1.0\r\nNats-Msg-Id: ${msgId.trim()}\r\n\r\n`, "utf8");
  }

  encode(): Uint8Array {
    return this.bytes;
  }

  /** As the client's publish options take it (it calls `encode()` only). */
  get asHeaders(): MsgHdrs {
    return this as unknown as MsgHdrs;
  }
}

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
  msgId: string;
  /** Handed to the client (a reconnect sends it again); until then it is in `queue` or waits to be sent again. */
  sent: boolean;
  /** Sent again after a no-responders reply. */
  retries: number;
}

/** Sends again after a no-responders reply: how many times, after how long (nats.go's defaults). */
const NO_RESPONDERS_RETRIES = 2;
const NO_RESPONDERS_RETRY_MS = 250;

export class PublishAcks {
  private readonly prefix = `${createInbox()}.`;
  private readonly waiting = new Map<string, Waiting>();
  private readonly sub: Subscription;
  private readonly sweep: NodeJS.Timeout;
  private next = 0;
  private readonly statuses: AsyncIterable<{ type: string }> & { stop?: () => void };
  /** Tokens published since the last flush, in order. */
  private queue: string[] = [];
  private scheduled = false;
  private readonly flushNow = () => this.flush();
  readonly stats = { resent: 0, flushes: 0 };

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

  /** Resolves once the stream stored the message (or had it already: `duplicate`). Sent at the end of this turn. */
  publish(subject: string, data: Uint8Array, msgId: string): Promise<PubAck> {
    const token = (this.next++).toString(36);
    return new Promise<PubAck>((resolve, reject) => {
      this.waiting.set(token, { resolve, reject, deadline: Date.now() + this.timeoutMs, subject, data, msgId, sent: false, retries: 0 });
      this.queue.push(token);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flushNow);
      }
    });
  }

  /** Every publish queued this turn, handed to the client at once (its microtask writes them in one go). */
  private flush(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    for (const token of queue) {
      const w = this.waiting.get(token);
      if (w === undefined) continue; // Failed meanwhile (closed, or the connection's error).
      w.sent = true;
      const err = this.send(token, w);
      if (err !== null) {
        this.waiting.delete(token);
        w.reject(err);
      }
    }
    this.stats.flushes++;
  }

  /** The client's publish; its error (closed, too large, a bad message id), if any. */
  private send(token: string, w: Waiting): Error | null {
    try {
      this.nc.publish(w.subject, w.data, { reply: this.prefix + token, headers: new MsgIdHeader(w.msgId).asHeaders });
      return null;
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  }

  private onReply(msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length);
    const w = this.waiting.get(token);
    if (!w) return; // Answered after its timeout: the caller was told already.
    const noResponders = msg.headers?.code === 503;
    if (noResponders && w.retries < NO_RESPONDERS_RETRIES && Date.now() + NO_RESPONDERS_RETRY_MS < w.deadline) {
      // Kept waiting (its place in deadline order too); a reconnect meanwhile leaves it to the timer.
      w.retries++;
      w.sent = false;
      setTimeout(() => this.sendAgain(token, w), NO_RESPONDERS_RETRY_MS).unref();
      return;
    }
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

  /** A publish answered no responders, sent again (unless it was answered, timed out or closed meanwhile). */
  private sendAgain(token: string, w: Waiting): void {
    if (this.waiting.get(token) !== w) return;
    w.sent = true;
    const err = this.send(token, w);
    if (err !== null) {
      this.waiting.delete(token);
      w.reject(err);
    }
  }

  /** After a reconnect: every publish still waiting, sent again under its own reply token (the queued ones go with the next flush). */
  private resend(): void {
    for (const [token, w] of this.waiting) {
      // Disconnected again when it fails: the next reconnect sends it, or its timeout answers.
      if (w.sent && this.send(token, w) === null) this.stats.resent++;
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
    this.queue = [];
  }

  /** Rejects what still waits and stops listening. */
  close(): void {
    clearInterval(this.sweep);
    this.statuses.stop?.();
    this.failAll(new Error("the publisher is closed"));
    this.sub.unsubscribe();
  }
}
