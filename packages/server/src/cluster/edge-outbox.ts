/**
 * An edge node without a JetStream of its own at its site (`segmentd edge --outbox`, connected to
 * the hub's NATS directly): each collected event is written to a durable outbox in the node's
 * `edge.db` before the 200 (requests arriving together share one commit), and sent from there to
 * the hub's event stream, in order, with the tenant and event id as message id; a row is marked
 * sent only once the hub's JetStream acknowledged it. A node killed at any point sends the rest
 * when it restarts; the hub's store keeps one copy of an event id. Sent rows stay 25 h: they are
 * what a restarted node's location is rebuilt from, as a site's stream is otherwise.
 */
import type Database from "better-sqlite3";
import type { JetStreamClient } from "@nats-io/jetstream";
import { ApiError } from "../services/errors.js";
import type { ForwardItem } from "../edge/hub-forwarder.js";
import type { MembershipChange } from "../profiles/store.js";
import { EdgeErrorCodes } from "../edge/errors.js";
import { EDGE_RETENTION_MS } from "./nats.js";
import { directEventsSubject } from "./subjects.js";
import { encode, encodeEventMessage, eventMessageId, membershipsMessage } from "./wire.js";

export const OUTBOX_MIGRATION = {
  version: 2,
  name: "edge outbox",
  statements: ["CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT NOT NULL, body BLOB NOT NULL, at INTEGER NOT NULL, sent INTEGER NOT NULL DEFAULT 0)", "CREATE INDEX outbox_unsent ON outbox (sent, seq)"],
};

export interface EdgeOutboxOptions {
  site: string;
  location: string;
  /** Rows waiting to be sent beyond which interact answers 503 (default 100,000). */
  maxUnsent?: number;
  /** Messages sent per round (default 500). */
  batch?: number;
  now: () => number;
  onError: (err: unknown) => void;
}

export class EdgeOutbox {
  private waiting: Array<{ msgId: string; body: Uint8Array; resolve: () => void; reject: (err: unknown) => void }> = [];
  private scheduled = false;
  private unsent: number;
  private stopped = false;
  private sender: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  readonly stats = { stored: 0, sent: 0, refused: 0 };
  private readonly maxUnsent: number;

  constructor(
    private readonly db: Database.Database,
    private readonly js: JetStreamClient,
    private readonly o: EdgeOutboxOptions,
  ) {
    this.maxUnsent = o.maxUnsent ?? 100_000;
    this.unsent = (db.prepare("SELECT count(*) AS n FROM outbox WHERE sent = 0").get() as { n: number }).n;
  }

  /** Events stored here and not yet acknowledged by the hub (the node's backlog). */
  get pending(): number {
    return this.unsent + this.waiting.length;
  }

  admit(): boolean {
    if (this.stopped || this.pending >= this.maxUnsent) {
      this.stats.refused++;
      return false;
    }
    return true;
  }

  /** Resolves once the event is in the outbox (committed); sent to the hub later. */
  enqueue(item: ForwardItem): Promise<void> {
    return this.store(eventMessageId(item), encodeEventMessage(item));
  }

  sendMemberships(orgId: string, sandboxName: string, changes: readonly MembershipChange[], msgId: string): Promise<void> {
    return this.store(msgId, encode(membershipsMessage(orgId, sandboxName, this.o.location, changes)));
  }

  private store(msgId: string, body: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ msgId, body, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.commit());
      }
    });
  }

  /** One transaction for every request that arrived since the last commit. */
  private commit(): void {
    this.scheduled = false;
    const rows = this.waiting;
    this.waiting = [];
    const insert = this.db.prepare("INSERT INTO outbox (msg_id, body, at) VALUES (?, ?, ?)");
    const at = this.o.now();
    try {
      this.db.transaction(() => {
        for (const r of rows) insert.run(r.msgId, Buffer.from(r.body), at);
      })();
    } catch (err) {
      const e = new ApiError(503, EdgeErrorCodes.busy, `The edge node could not store the event (${String((err as Error).message).slice(0, 200)}); retry shortly`);
      for (const r of rows) r.reject(e);
      return;
    }
    this.unsent += rows.length;
    this.stats.stored += rows.length;
    for (const r of rows) r.resolve();
    this.wake?.();
  }

  /** Rows of the last 25 h, oldest first (a restarted node's location is rebuilt from them). */
  *recent(now: number): Generator<Uint8Array> {
    for (const r of this.db.prepare("SELECT body FROM outbox WHERE at >= ? ORDER BY seq").iterate(now - EDGE_RETENTION_MS) as Iterable<{ body: Buffer }>) yield r.body;
  }

  start(): void {
    this.sender ??= this.run();
  }

  /** Stops sending (what is unsent stays in the outbox for the next start). */
  async close(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.sender;
  }

  private async run(): Promise<void> {
    const max = this.o.batch ?? 500;
    const next = this.db.prepare("SELECT seq, msg_id, body FROM outbox WHERE sent = 0 ORDER BY seq LIMIT ?");
    const markSent = this.db.prepare("UPDATE outbox SET sent = 1 WHERE seq = ?");
    const prune = this.db.prepare("DELETE FROM outbox WHERE sent = 1 AND at < ?");
    let pruned = 0;
    while (!this.stopped) {
      const rows = next.all(max) as Array<{ seq: number; msg_id: string; body: Buffer }>;
      if (rows.length === 0) {
        if (Date.now() - pruned > 60_000) {
          prune.run(this.o.now() - EDGE_RETENTION_MS);
          pruned = Date.now();
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, 1000).unref();
        });
        this.wake = null;
        continue;
      }
      try {
        // In order, a window at a time: each row is marked once the hub's stream took it.
        const subject = directEventsSubject(this.o.site);
        const acks = rows.map((r) => {
          const ack = this.js.publish(subject, r.body, { msgID: r.msg_id, timeout: 5000 });
          // Awaited in order below; after a failure the later ones are sent again (one copy kept).
          ack.catch(() => {});
          return ack;
        });
        for (let i = 0; i < rows.length; i++) {
          await acks[i];
          markSent.run(rows[i]!.seq);
          this.unsent--;
          this.stats.sent++;
        }
      } catch (err) {
        this.o.onError(err);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }
}
