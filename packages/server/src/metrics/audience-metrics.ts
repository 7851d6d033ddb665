/**
 * Audience metrics (decisions §2, segmentation-api.md §13): "total qualified"
 * is the number of current members; "new audience updated" is qualifications
 * minus disqualifications written by streaming or edge evaluation within the
 * last 24 hours, 7 days or 30 days, with buckets for a chart. Both come from
 * the hub's membership and transition record: nothing is counted anywhere
 * else, so nothing is counted twice.
 *
 * Windows are rolling and end at `now`: [now − window, now], both ends
 * included (a transition written at this very millisecond counts). Buckets
 * split the window into equal parts from its start — 24 one-hour buckets for
 * 24h, 7 and 30 one-day buckets for 7d and 30d — each [start, end), except
 * that the last one also holds a transition at exactly `now`.
 * A transition to `realized` counts +1 (none → realized, exited → realized);
 * `realized → exited` counts −1. Batch transitions never count.
 */
import type { Clock } from "../platform/clock.js";
import type { MembershipReads } from "../profiles/store.js";
import type { MembershipTransition } from "../profiles/types.js";
import { notFound } from "../services/errors.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";

export const METRIC_WINDOWS = {
  "24h": { ms: 24 * 3_600_000, bucketMs: 3_600_000 },
  "7d": { ms: 7 * 86_400_000, bucketMs: 86_400_000 },
  "30d": { ms: 30 * 86_400_000, bucketMs: 86_400_000 },
} as const;

export type MetricWindow = keyof typeof METRIC_WINDOWS;

export interface MetricBucket {
  start: string;
  end: string;
  qualified: number;
  disqualified: number;
  /** qualified − disqualified. */
  net: number;
}

export interface AudienceMetrics {
  segmentId: string;
  window: MetricWindow;
  /** ISO-8601; the window is [from, to]. */
  from: string;
  to: string;
  totalQualified: number;
  /** Streaming + edge qualifications minus disqualifications in the window. */
  newAudienceUpdated: number;
  qualified: number;
  disqualified: number;
  bucketSizeMs: number;
  buckets: MetricBucket[];
}

const PAGE = 10_000;

export class AudienceMetricsService {
  constructor(
    private readonly meta: MetadataStore,
    private readonly hub: MembershipReads,
    private readonly clock: Clock,
  ) {}

  async metrics(tenant: TenantContext, definitionId: string, window: MetricWindow): Promise<AudienceMetrics> {
    const scope = scopeOf(tenant);
    if (!(await this.meta.definitions.get(scope, definitionId))) throw notFound("Segment definition", definitionId);
    const { ms, bucketMs } = METRIC_WINDOWS[window];
    const to = this.clock.now();
    const from = to - ms;
    const buckets = Array.from({ length: ms / bucketMs }, (_, i) => ({ start: from + i * bucketMs, qualified: 0, disqualified: 0 }));
    let qualified = 0;
    let disqualified = 0;
    for await (const t of this.transitions(scope, definitionId, from, to + 1)) {
      const b = buckets[Math.min(Math.floor((Date.parse(t.at) - from) / bucketMs), buckets.length - 1)];
      if (!b) continue;
      if (t.to === "realized") {
        qualified++;
        b.qualified++;
      } else if (t.from === "realized") {
        disqualified++;
        b.disqualified++;
      }
    }
    const members = await this.hub.countMembers(scope, definitionId);
    return {
      segmentId: definitionId,
      window,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      totalQualified: members.realized,
      newAudienceUpdated: qualified - disqualified,
      qualified,
      disqualified,
      bucketSizeMs: bucketMs,
      buckets: buckets.map((b) => ({
        start: new Date(b.start).toISOString(),
        end: new Date(b.start + bucketMs).toISOString(),
        qualified: b.qualified,
        disqualified: b.disqualified,
        net: b.qualified - b.disqualified,
      })),
    };
  }

  /**
   * Every streaming/edge transition of the definition in [from, to), paged by
   * time: the store query has a row limit but no cursor, so a full page is cut
   * before its last instant and the next page starts at that instant.
   */
  private async *transitions(scope: { orgId: string; sandboxName: string }, definitionId: string, from: number, to: number): AsyncGenerator<MembershipTransition> {
    let since = from;
    let limit = PAGE;
    for (;;) {
      const rows = await this.hub.listTransitions(scope, { definitionId, sources: ["streaming", "edge"], since, until: to, limit });
      if (rows.length < limit) {
        yield* rows;
        return;
      }
      const lastAt = Date.parse(rows[rows.length - 1]!.at);
      const before = rows.filter((r) => Date.parse(r.at) < lastAt);
      if (before.length === 0) {
        // One instant holds a whole page: read it with a larger page.
        limit *= 2;
        continue;
      }
      yield* before;
      since = lastAt;
      limit = PAGE;
    }
  }
}
