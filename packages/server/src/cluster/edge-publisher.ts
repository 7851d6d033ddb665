/**
 * An edge node's way to the hub: every event it collects is published to its site's JetStream
 * stream and the interact request is answered only once the site's server has stored it (the
 * hub's stream sources the site's, so the event reaches the hub whenever the link is up,
 * exactly once). The message id is the tenant and event id: a retried request, or a publish
 * retried after a lost ack, is stored once.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ApiError } from "../services/errors.js";
import type { ForwardItem } from "../edge/hub-forwarder.js";
import type { MembershipChange } from "../profiles/store.js";
import { EdgeErrorCodes } from "../edge/errors.js";
import { PublishAcks } from "./publish-acks.js";
import { siteEventsSubject } from "./subjects.js";
import { encode, encodeEventMessage, eventMessageId, membershipsMessage } from "./wire.js";

export interface EdgePublisherOptions {
  site: string;
  location: string;
  /** Publishes waiting for their ack at once; beyond, interact answers 503 (default 4,096). */
  maxInFlight?: number;
  /** How long a publish waits for the site's server (default 5 s). */
  timeoutMs?: number;
}

export class EdgePublisher {
  private inFlight = 0;
  private closed = false;
  readonly stats = { published: 0, failed: 0, refused: 0 };
  private readonly maxInFlight: number;
  private idleWaiters: Array<() => void> = [];
  private readonly acks: PublishAcks;
  private readonly subject: string;

  constructor(
    nc: NatsConnection,
    private readonly o: EdgePublisherOptions,
  ) {
    this.maxInFlight = o.maxInFlight ?? 4096;
    this.acks = new PublishAcks(nc, o.timeoutMs ?? 5000);
    this.subject = siteEventsSubject(o.site);
  }

  get pending(): number {
    return this.inFlight;
  }

  /** Whether one more request may be accepted (before anything is stored). */
  admit(): boolean {
    if (this.closed || this.inFlight >= this.maxInFlight) {
      this.stats.refused++;
      return false;
    }
    return true;
  }

  /** Resolves once the site's JetStream stored the event; rejects with a 503 ApiError when it could not. */
  enqueue(item: ForwardItem): Promise<void> {
    return this.publish(encodeEventMessage(item), eventMessageId(item));
  }

  /** Membership changes the node decided outside a request (the 24-hourly pass). */
  sendMemberships(orgId: string, sandboxName: string, changes: readonly MembershipChange[], msgId: string): Promise<void> {
    return this.publish(encode(membershipsMessage(orgId, sandboxName, this.o.location, changes)), msgId);
  }

  // One promise per event (the ack's, chained once to these handlers): no async frame, no closure per request.
  private publish(data: Uint8Array, msgID: string): Promise<void> {
    this.inFlight++;
    return this.acks.publish(this.subject, data, msgID).then(this.stored, this.refused);
  }

  private readonly stored = (): void => {
    this.stats.published++;
    this.settled();
  };

  private readonly refused = (err: unknown): never => {
    this.stats.failed++;
    this.settled();
    throw new ApiError(503, EdgeErrorCodes.busy, `The edge site's event store did not take the event (${String((err as Error)?.message ?? err).slice(0, 200)}); retry shortly`);
  };

  private settled(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }

  /** Resolves when no publish is waiting for its ack. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.idle();
    this.acks.close();
  }
}
