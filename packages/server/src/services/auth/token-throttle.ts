/**
 * Throttling of `POST /ims/token/v3`'s failed attempts (issue #37): a token bucket per client id
 * and one per remote address. Each wrong client_id/client_secret takes a token from both; a
 * request finding either bucket empty is refused before its secret is compared, so a guesser
 * learns nothing while throttled. Successful requests take nothing: a client asking for a token
 * a few times a minute is never throttled unless someone is failing with its id.
 *
 * Memory is bounded: client buckets exist only for configured client ids (every unknown id
 * shares one bucket), and at most `maxAddresses` address buckets are kept, the least recently
 * used dropped first (a dropped address starts again with a full bucket).
 */
import type { TokenThrottleConfig } from "../../platform/config.js";
import type { Clock } from "../../platform/clock.js";

export const TOKEN_THROTTLE_DEFAULTS: Readonly<Required<TokenThrottleConfig>> = {
  failures: 10,
  refillMs: 1000,
  maxAddresses: 10_000,
};

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date (the clock's ms). */
  at: number;
}

/** Why a request is refused and when to come back (whole seconds, at least 1). */
export interface ThrottleVerdict {
  by: "client" | "address";
  retryAfterS: number;
}

export class TokenThrottle {
  readonly settings: Readonly<Required<TokenThrottleConfig>>;
  private readonly clients = new Map<string, Bucket>();
  // Insertion order is recency order: a used key is moved to the end, the first one is the oldest.
  private readonly addresses = new Map<string, Bucket>();

  constructor(
    private readonly clock: Clock,
    private readonly clientIds: ReadonlySet<string>,
    config: TokenThrottleConfig = {},
  ) {
    this.settings = { ...TOKEN_THROTTLE_DEFAULTS, ...config };
  }

  /** The number of addresses tracked (bounded by maxAddresses). */
  get trackedAddresses(): number {
    return this.addresses.size;
  }

  /** Null when a request of this client (if it names one) from this address may be tried. */
  check(clientId: string | undefined, address: string): ThrottleVerdict | null {
    const now = this.clock.now();
    const byAddress = this.refill(this.addresses.get(address), now);
    if (byAddress !== undefined && byAddress.tokens < 1) return { by: "address", retryAfterS: this.retryAfter(byAddress) };
    if (clientId === undefined) return null;
    const byClient = this.refill(this.clients.get(this.clientKey(clientId)), now);
    if (byClient !== undefined && byClient.tokens < 1) return { by: "client", retryAfterS: this.retryAfter(byClient) };
    return null;
  }

  /** A wrong client_id or client_secret from this address: one token from each bucket. */
  failed(clientId: string, address: string): void {
    const now = this.clock.now();
    this.take(this.clients, this.clientKey(clientId), now);
    this.take(this.addresses, address, now);
    while (this.addresses.size > this.settings.maxAddresses) this.addresses.delete(this.addresses.keys().next().value as string);
  }

  private clientKey(clientId: string): string {
    // Unknown ids share one bucket: random ids cannot grow the map (nor lock out a configured client).
    return this.clientIds.has(clientId) ? `id:${clientId}` : "unknown";
  }

  private take(map: Map<string, Bucket>, key: string, now: number): void {
    const b = this.refill(map.get(key), now) ?? { tokens: this.settings.failures, at: now };
    b.tokens = Math.max(0, b.tokens - 1);
    map.delete(key);
    map.set(key, b);
  }

  private refill(b: Bucket | undefined, now: number): Bucket | undefined {
    if (b === undefined) return undefined;
    if (now > b.at) {
      b.tokens = Math.min(this.settings.failures, b.tokens + (now - b.at) / this.settings.refillMs);
      b.at = now;
    }
    return b;
  }

  private retryAfter(b: Bucket): number {
    return Math.max(1, Math.ceil(((1 - b.tokens) * this.settings.refillMs) / 1000));
  }
}
