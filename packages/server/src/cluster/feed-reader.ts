/**
 * Reads one of the hub's last-value streams (configuration, or a site's projections) from the
 * sequence after the last one applied, in order, with an ordered consumer (no state on the
 * server). The caller applies each message and records its sequence with what it applied, so a
 * node that restarts or reconnects resumes where it stopped. While the hub is unreachable the
 * reader retries every second and reports itself disconnected; `behind` is what the server said
 * was left after the last message (0 = caught up).
 */
import { DeliverPolicy, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";
import { fetchBatch } from "./nats.js";

/** How long a pull or an info request may take before the hub counts as out of reach. */
const STALL_MS = 6000;

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms: the hub is out of reach`)), ms)));
  p.catch(() => {});
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export interface FeedState {
  /** Connected to the hub's stream and has read everything it held at the last message or heartbeat. */
  caughtUp: boolean;
  connected: boolean;
  /** Messages the hub held beyond the last one applied, when last known (null: never connected). */
  behind: number | null;
  /** The last sequence applied. */
  seq: number;
}

export interface FeedReaderOptions {
  js: JetStreamClient;
  stream: string;
  filter: string;
  /** The last sequence applied before (0 = from the start). */
  startAfter: number;
  /** Applies a batch of messages in order; resolves once their effects and sequence are recorded. */
  apply(batch: JsMsg[]): Promise<void>;
  onError(err: unknown): void;
  /** Most messages applied at once (default 500). */
  batch?: number;
  /** Subjects and headers only (the reader needs no payload). */
  headersOnly?: boolean;
}

export class FeedReader {
  private stopped = false;
  private loop: Promise<void> | null = null;
  private applying: Promise<void> | null = null;
  readonly state: FeedState;
  private waiters: Array<() => void> = [];

  constructor(private readonly o: FeedReaderOptions) {
    this.state = { caughtUp: false, connected: false, behind: null, seq: o.startAfter };
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops reading; waits for a batch being applied, but not for a request to a hub that is away. */
  async stop(): Promise<void> {
    this.stopped = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.applying ?? this.loop, new Promise<void>((r) => (timer = setTimeout(r, this.applying ? 30_000 : 1_000)))]);
    clearTimeout(timer);
  }

  /** Resolves once the reader is caught up (tests, start-up). */
  caughtUp(): Promise<void> {
    if (this.state.caughtUp) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private markCaughtUp(): void {
    this.state.caughtUp = true;
    const w = this.waiters.splice(0);
    for (const f of w) f();
  }

  private async run(): Promise<void> {
    const max = this.o.batch ?? 500;
    while (!this.stopped) {
      try {
        const consumer = await this.o.js.consumers.get(this.o.stream, {
          filter_subjects: this.o.filter,
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: this.state.seq + 1,
          ...(this.o.headersOnly === true ? { headers_only: true } : {}),
        });
        this.state.connected = true;
        while (!this.stopped) {
          // Bounded: across a silent partition a pull may neither deliver nor fail.
          const { batch, error } = await within(fetchBatch(consumer, max), STALL_MS, "a pull from the hub's stream");
          if (error !== undefined) this.o.onError(error);
          if (batch.length === 0) {
            // An empty pull looks the same whether nothing was left or the hub did not answer (a
            // silent partition): the consumer's info, from the hub, tells which (it throws when the
            // hub is out of reach) and how much is left.
            const info = await within(consumer.info(), STALL_MS, "the hub's consumer info");
            this.state.behind = info.num_pending;
            if (info.num_pending === 0) this.markCaughtUp();
            continue;
          }
          this.applying = this.o.apply(batch);
          try {
            await this.applying;
          } finally {
            this.applying = null;
          }
          const last = batch[batch.length - 1]!;
          this.state.seq = last.seq;
          this.state.behind = last.info.pending;
          if (last.info.pending === 0) this.markCaughtUp();
          else this.state.caughtUp = false;
        }
      } catch (err) {
        this.state.connected = false;
        this.state.caughtUp = false;
        if (this.stopped) return;
        this.o.onError(err);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }
}
