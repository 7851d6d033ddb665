/**
 * Edge evaluation (architecture flow 3): an Edge-Network-style interact request
 * is checked (datastream, location, exactly one primary identity, a valid
 * event) before anything is stored; then the edge definitions of the
 * datastream's sandbox are evaluated against the location's copy of the
 * profile (projected attributes + batch/streaming memberships for inSegment)
 * and its recent events plus the incoming one. The answer comes from memory;
 * the event and the edge membership changes are then stored at the location
 * and queued for the hub (hub-forwarder.ts: written later in batches, never in
 * the request's turn). When that queue is full the request is refused with a
 * 503 before anything is stored (backpressure).
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
import { scopeOf, type TenantContext, type TenantDirectory } from "../services/tenancy.js";
import type { DefinitionRepository, TenantScope } from "../stores/types.js";
import type { DefinitionCatalog, LiveDefinition } from "../streaming/definition-catalog.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import type { Datastream, DatastreamService } from "./datastreams.js";
import { EdgeErrorCodes } from "./errors.js";
import { EdgePlans, type EdgeDecision, type EdgePlan } from "./evaluation-plan.js";
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
  /** Where the edge definitions' queries are read, once per definition set (evaluation-plan.ts). */
  definitions: DefinitionRepository;
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

/** What a request needs of its datastream, resolved once per datastream version (not per request). */
interface DatastreamContext {
  /** The repository object this was built from: a PUT replaces it, which invalidates the context. */
  ds: Datastream;
  tenant: TenantContext;
  tenantKey: string;
  /** The metadata scope of the tenant (the plan reads the definitions' queries there). */
  scope: TenantScope;
  /** The event dataset, read from the hub on the first request. */
  dataset: Dataset | null;
}

// Response parts that do not change between requests, built once (read-only: only serialized).
const segmentCache = new WeakMap<LiveDefinition, InteractSegment>();

function segmentOf(d: LiveDefinition): InteractSegment {
  let s = segmentCache.get(d);
  if (s === undefined) segmentCache.set(d, (s = { id: d.id, namespace: "ups" }));
  return s;
}

const hintCache = new Map<string, InteractHandle>();

function locationHint(location: string): InteractHandle {
  let h = hintCache.get(location);
  if (h === undefined) hintCache.set(location, (h = { type: "locationHint:result", payload: [{ scope: "EdgeNetwork", hint: location, ttlSeconds: LOCATION_HINT_TTL_SECONDS }] }));
  return h;
}

export class EdgeInteractService {
  private readonly contexts = new Map<string, DatastreamContext>();
  private readonly plans: EdgePlans;

  constructor(private readonly deps: EdgeInteractDeps) {
    this.plans = new EdgePlans(deps.definitions);
  }

  private context(ds: Datastream): DatastreamContext {
    const hit = this.contexts.get(ds.id);
    if (hit !== undefined && hit.ds === ds) return hit;
    const tenant = this.deps.tenants.resolve(ds.imsOrgId, ds.sandboxName);
    if (!tenant) throw bad(`Datastream '${ds.id}' belongs to a sandbox that is not configured`, EdgeErrorCodes.datastreamUnknown);
    const ctx: DatastreamContext = { ds, tenant, tenantKey: tenantKeyOf(tenant), scope: scopeOf(tenant), dataset: null };
    this.contexts.set(ds.id, ctx);
    return ctx;
  }

  private async eventDataset(ctx: DatastreamContext): Promise<Dataset> {
    const { ds, tenant } = ctx;
    const d = await this.deps.hub.getDataset({ orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName }, ds.eventDatasetId);
    if (!d) throw bad(`Datastream '${ds.id}' sends events to dataset '${ds.eventDatasetId}', which no longer exists`, EdgeErrorCodes.datastreamUnknown);
    ctx.dataset = d;
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
    const ctx = this.context(ds);
    const tenant = ctx.tenant;
    const xdm = isObject(body) && isObject(body["event"]) ? body["event"]["xdm"] : undefined;
    if (!isObject(xdm)) throw bad("The body must be {event: {xdm: {identityMap, eventType, timestamp, ...}}}");
    const identity = primaryIdentityOf(xdm["identityMap"]);
    const now = this.deps.clock.now();
    const eventBody: JsonObject = { ...(xdm as JsonObject) };
    if (typeof eventBody["_id"] !== "string" || eventBody["_id"] === "") eventBody["_id"] = randomUUID();
    if (eventBody["timestamp"] === undefined) eventBody["timestamp"] = new Date(now).toISOString();
    const dataset = ctx.dataset ?? (await this.eventDataset(ctx));
    const validated = validateRecord(eventBody, 0, dataset);
    if (!validated.ok) {
      throw new ApiError(400, EdgeErrorCodes.invalidEvent, `The event is not valid: ${validated.errors.map((e) => e.message).join("; ")}`, validated.errors.map((e) => ({ code: e.code, message: e.message, ...(e.path ? { field: e.path } : {}) })));
    }
    const record = validated.record;
    // Backpressure: when the hub forwarder's queue is full, refuse before storing anything.
    if (!this.deps.forwarder.admit()) {
      throw new ApiError(503, EdgeErrorCodes.busy, "The edge is forwarding a backlog of events to the hub; retry shortly");
    }

    // 2. Evaluate from the location's memory.
    const tk = ctx.tenantKey;
    const held = await store.lookup(tk, identity);
    const segments: InteractSegment[] = [];
    const changes: Array<{ definitionId: string; status: MembershipStatus; at: number }> = [];
    let carry: { plan: EdgePlan; revision: number; changes: EdgeDecision["changes"] } | null = null;
    if (ds.edgeSegmentation) {
      const set = await this.deps.catalog.get(tenant, "synchronous");
      if (set.definitions.length > 0) {
        const plan = await this.plans.get(set, ctx.scope);
        const view = cachedEvaluationProfile(held);
        const events: Record<string, unknown>[] = [];
        if (held) for (const e of held.events) events.push(e.body);
        events.push(record.body);
        const decision = plan.decide(held ?? null, view, held?.optedOut ?? false, events, now);
        for (const d of decision.qualifying) segments.push(segmentOf(d));
        for (const c of decision.changes) changes.push({ definitionId: c.definition.id, status: c.qualifies ? "realized" : "exited", at: now });
        if (held && decision.changes.length > 0) carry = { plan, revision: held.revision, changes: decision.changes };
      }
    }

    // 3. Store at the location, then queue the forward to the hub (written later, in batches).
    await store.collect(tk, identity, { id: record.eventId ?? (eventBody["_id"] as string), ts: record.timestamp ?? now, body: record.body }, now);
    if (changes.length > 0) {
      const iso = new Date(now).toISOString();
      await store.setEdgeMemberships(tk, identity, changes.map((c) => ({
        definitionId: c.definitionId,
        entry: { status: c.status, lastQualificationTime: c.status === "realized" ? iso : (held?.edgeMemberships.get(c.definitionId)?.lastQualificationTime ?? held?.hubMemberships[c.definitionId]?.lastQualificationTime ?? iso) },
      })));
      // The profile's cached results survive its own changes (not a projection in between).
      if (carry && held) carry.plan.carryForward(held, carry.revision, carry.changes);
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
        locationHint(location),
      ],
    };
  }

}
