/**
 * The values the profile access API shows under the tenant's ComputedAttributes field group
 * (`_<TENANT_ID>.ComputedAttributes.<name>`): every live attribute (NEW, PROCESSING, PROCESSED)
 * of the sandbox, computed by the reference (computed/values.ts) from the profile's events in
 * the longest lookback, at the request's `now` — what the engines compute from the same events.
 */
import type { JsonObject, JsonValue } from "../profiles/types.js";
import { tenantIdOf } from "../services/schema-registry.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { ComputedAttributeRecord, ComputedAttributeRepository } from "../stores/computed-attributes.js";
import { LIVE_STATUSES } from "./service.js";
import { computeValue, lookbackStart, referenceDefinition, type AttributeDefinition } from "./values.js";

/** Reads a profile's events from `since` to `until` (epoch ms), in the order stored. */
export type EventsReader = (since: number, until: number) => Promise<readonly Record<string, unknown>[]>;

export function profileValues(repo: ComputedAttributeRepository): (tenant: TenantContext, readEvents: EventsReader, now: number) => Promise<JsonObject | null> {
  // Definitions are rebuilt only when an attribute changes (its id and updateEpoch).
  const cache = new Map<string, AttributeDefinition>();
  const definitionOf = (r: ComputedAttributeRecord): AttributeDefinition => {
    const key = `${r.id}@${r.updateEpoch}`;
    let d = cache.get(key);
    if (d === undefined) {
      if (cache.size > 10_000) cache.clear();
      cache.set(key, (d = referenceDefinition(r)));
    }
    return d;
  };
  return async (tenant, readEvents, now) => {
    const live = (await repo.list(scopeOf(tenant))).filter((r) => LIVE_STATUSES.includes(r.status));
    if (live.length === 0) return null;
    const since = Math.min(...live.map((r) => lookbackStart(now, r.duration)));
    const events = await readEvents(since, now);
    const values: JsonObject = {};
    for (const r of live) values[r.name] = computeValue(definitionOf(r), events, now) as JsonValue;
    return { [`_${tenantIdOf(tenant.orgId)}`]: { ComputedAttributes: values } };
  };
}
