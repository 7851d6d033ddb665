/**
 * Edge evaluation (architecture flow 3): an Edge-Network-style interact request
 * is checked (datastream, location, exactly one primary identity, a valid
 * event) before anything is stored; then the edge definitions of the
 * datastream's sandbox are evaluated against the location's copy of the
 * profile (projected attributes + batch/streaming memberships for inSegment)
 * and its recent events plus the incoming one. The answer comes from memory;
 * the event and the edge membership changes are then stored at the location
 * and forwarded to the hub.
 *
 * Segment of segments: once a profile qualifies at the edge it stays in; only
 * the 24-hourly disqualification pass (disqualification.ts) takes it out.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { ProfileStore } from "../profiles/store.js";
import type { Dataset, JsonObject, MembershipStatus } from "../profiles/types.js";
import { validateRecord } from "../profiles/validate.js";
import { ApiError } from "../services/errors.js";
import type { TenantContext, TenantDirectory } from "../services/tenancy.js";
import type { DefinitionCatalog, LiveDefinition } from "../streaming/definition-catalog.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import { eventsFor, groupEventsByType } from "../streaming/reverse-index.js";
import type { Datastream, DatastreamService } from "./datastreams.js";
import { EdgeErrorCodes } from "./errors.js";
import type { HubForwarder } from "./hub-forwarder.js";
import type { EdgeProfile } from "./location-store.js";
import { tenantKeyOf, type EdgeLocations } from "./locations.js";
import { primaryIdentityOf } from "./primary-identity.js";

export interface InteractSegment {
  id: string;
  namespace: "ups";
}

export interface InteractHandle {
  type: string;
  eventIndex?: number;
  payload: unknown[];
}

export interface InteractResponse {
  requestId: string;
  handle: InteractHandle[];
}

export interface EdgeInteractDeps {
  datastreams: DatastreamService;
  tenants: TenantDirectory;
  catalog: DefinitionCatalog;
  locations: EdgeLocations;
  forwarder: HubForwarder;
  hub: ProfileStore;
  clock: Clock;
}

/** How long a client should keep sending to the hinted location (Adobe's hint TTL is 30 min). */
const LOCATION_HINT_TTL_SECONDS = 1800;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function bad(message: string, code: string = EdgeErrorCodes.badRequest): ApiError {
  return new ApiError(400, code, message);
}

/** What the definitions see of the profile: projected attributes + memberships (edge results win). */
export function evaluationProfile(p: EdgeProfile | undefined): { profile: Record<string, unknown>; ups: Record<string, MembershipEntry> } {
  if (!p) return { profile: { segmentMembership: { ups: {} } }, ups: {} };
  const ups: Record<string, MembershipEntry> = { ...p.hubMemberships };
  for (const [id, m] of p.edgeMemberships) ups[id] = m;
  return { profile: { ...p.attributes, segmentMembership: { ups } }, ups };
}

// Built once per profile revision: a profile is usually requested many times between changes.
const evaluationCache = new WeakMap<EdgeProfile, { revision: number; view: ReturnType<typeof evaluationProfile> }>();

function cachedEvaluationProfile(p: EdgeProfile | undefined): ReturnType<typeof evaluationProfile> {
  if (!p) return evaluationProfile(undefined);
  const hit = evaluationCache.get(p);
  if (hit && hit.revision === p.revision) return hit.view;
  const view = evaluationProfile(p);
  evaluationCache.set(p, { revision: p.revision, view });
  return view;
}

export class EdgeInteractService {
  private readonly datasets = new Map<string, Dataset>();

  constructor(private readonly deps: EdgeInteractDeps) {}

  private async eventDataset(tenant: TenantContext, ds: Datastream): Promise<Dataset> {
    const k = `${ds.id}\u0000${ds.eventDatasetId}`;
    const cached = this.datasets.get(k);
    if (cached) return cached;
    const d = await this.deps.hub.getDataset({ orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName }, ds.eventDatasetId);
    if (!d) throw bad(`Datastream '${ds.id}' sends events to dataset '${ds.eventDatasetId}', which no longer exists`, EdgeErrorCodes.datastreamUnknown);
    this.datasets.set(k, d);
    return d;
  }

  async interact(locationName: string | undefined, dataStreamId: string | undefined, body: unknown, requestId: string): Promise<InteractResponse> {
    // 1. Everything that can make the request fail is checked before anything is stored.
    if (dataStreamId === undefined || dataStreamId === "") throw bad("The dataStreamId query parameter is required");
    const ds = this.deps.datastreams.byId(dataStreamId);
    if (!ds) throw bad(`Unknown dataStreamId '${dataStreamId.slice(0, 100)}'`, EdgeErrorCodes.datastreamUnknown);
    const location = locationName ?? this.deps.locations.defaultLocation;
    const store = this.deps.locations.get(location);
    if (!store) throw new ApiError(404, EdgeErrorCodes.locationUnknown, `Unknown edge location '${location.slice(0, 100)}'; configured: ${this.deps.locations.names().join(", ")}`);
    const tenant = this.deps.tenants.resolve(ds.imsOrgId, ds.sandboxName);
    if (!tenant) throw bad(`Datastream '${ds.id}' belongs to a sandbox that is not configured`, EdgeErrorCodes.datastreamUnknown);
    const xdm = isObject(body) && isObject(body["event"]) ? body["event"]["xdm"] : undefined;
    if (!isObject(xdm)) throw bad("The body must be {event: {xdm: {identityMap, eventType, timestamp, ...}}}");
    const identity = primaryIdentityOf(xdm["identityMap"]);
    const now = this.deps.clock.now();
    const eventBody: JsonObject = { ...(xdm as JsonObject) };
    if (typeof eventBody["_id"] !== "string" || eventBody["_id"] === "") eventBody["_id"] = randomUUID();
    if (eventBody["timestamp"] === undefined) eventBody["timestamp"] = new Date(now).toISOString();
    const dataset = await this.eventDataset(tenant, ds);
    const validated = validateRecord(eventBody, 0, dataset);
    if (!validated.ok) {
      throw new ApiError(400, EdgeErrorCodes.invalidEvent, `The event is not valid: ${validated.errors.map((e) => e.message).join("; ")}`, validated.errors.map((e) => ({ code: e.code, message: e.message, ...(e.path ? { field: e.path } : {}) })));
    }
    const record = validated.record;

    // 2. Evaluate from the location's memory.
    const tk = tenantKeyOf(tenant);
    const held = await store.lookup(tk, identity);
    const segments: InteractSegment[] = [];
    const changes: Array<{ definitionId: string; status: MembershipStatus; at: number }> = [];
    if (ds.edgeSegmentation) {
      const set = await this.deps.catalog.get(tenant, "synchronous");
      if (set.definitions.length > 0) {
        const { profile, ups } = cachedEvaluationProfile(held);
        const events: Record<string, unknown>[] = held ? held.events.map((e) => e.body) : [];
        events.push(record.body);
        const byType = groupEventsByType(events);
        const optedOut = held?.optedOut ?? false;
        for (const d of set.definitions) {
          const was = ups[d.id]?.status === "realized";
          const qualifies = this.qualifies(d, profile, eventsFor(d.footprint, events, byType), now, optedOut, was);
          if (qualifies) segments.push({ id: d.id, namespace: "ups" });
          if (qualifies !== was) changes.push({ definitionId: d.id, status: qualifies ? "realized" : "exited", at: now });
        }
      }
    }

    // 3. Store at the location, then forward to the hub (asynchronously, group-committed).
    await store.collect(tk, identity, { id: record.eventId ?? (eventBody["_id"] as string), ts: record.timestamp ?? now, body: record.body }, now);
    if (changes.length > 0) {
      const iso = new Date(now).toISOString();
      await store.setEdgeMemberships(tk, identity, changes.map((c) => ({
        definitionId: c.definitionId,
        entry: { status: c.status, lastQualificationTime: c.status === "realized" ? iso : (held?.edgeMemberships.get(c.definitionId)?.lastQualificationTime ?? held?.hubMemberships[c.definitionId]?.lastQualificationTime ?? iso) },
      })));
    }
    this.deps.forwarder.enqueue({ tenant, datasetId: ds.eventDatasetId, record, identity, location, newAtLocation: held === undefined, edgeChanges: changes });

    return {
      requestId,
      handle: [
        {
          type: "activation:pull",
          eventIndex: 0,
          // Adobe returns an empty payload when nothing applies to the profile.
          payload: segments.length === 0 ? [] : [{ type: "profileLookup", destinationId: ds.id, alias: ds.name, attributes: {}, segments }],
        },
        { type: "locationHint:result", payload: [{ scope: "EdgeNetwork", hint: location, ttlSeconds: LOCATION_HINT_TTL_SECONDS }] },
      ],
    };
  }

  private qualifies(d: LiveDefinition, profile: Record<string, unknown>, events: readonly Record<string, unknown>[], now: number, optedOut: boolean, was: boolean): boolean {
    if (d.excludeOptOut && optedOut) return false;
    // Segment of segments: disqualified only by the 24-hourly pass, never by a request.
    if (was && d.queryType === "segment-of-segments") return true;
    return d.predicate({ profile, events, now });
  }
}
