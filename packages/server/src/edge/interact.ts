/**
 * Edge evaluation (architecture flow 3): an Edge-Network-style interact request
 * is checked (datastream, location, exactly one primary identity, a valid
 * event) before anything is stored; then the edge definitions of the
 * datastream's sandbox are evaluated against the location's copy of the
 * profile (projected attributes + batch/streaming memberships for inSegment)
 * and its recent events plus the incoming one. The answer comes from memory;
 * the event and the edge membership changes are then stored at the location
 * and forwarded to the hub, and the answer is sent once they are durable: in
 * the all-in-one once the hub forwarder committed them at the hub (batched with
 * the requests that arrive meanwhile: acknowledged-forwarding.ts), on an edge
 * node once its site stored them. When the forwarding queue is full the request
 * is refused with a 503 before anything is stored (backpressure).
 *
 * Segment of segments: once a profile qualifies at the edge it stays in; only
 * the 24-hourly disqualification pass (disqualification.ts) takes it out.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import { tenantKey, type TenantRef } from "../platform/tenant.js";
import type { DatasetCatalog } from "../profiles/store.js";
import type { Dataset, Identity, JsonObject, MembershipStatus, ValidRecord } from "../profiles/types.js";
import { validateRecord } from "../profiles/validate.js";
import { ApiError } from "../services/errors.js";
import { scopeOf, type TenantContext, type TenantDirectory } from "../services/tenancy.js";
import type { DefinitionRepository } from "../stores/types.js";
import type { DefinitionCatalog, LiveDefinition, LiveSet } from "../streaming/definition-catalog.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import type { Datastream, DatastreamService } from "./datastreams.js";
import { EdgeErrorCodes } from "./errors.js";
import { EdgePlans, type EdgeDecision, type EdgePlan } from "./evaluation-plan.js";
import type { ForwardItem } from "./hub-forwarder.js";
import { buildEvaluationView, isLocalLocationStore, type EdgeEvent, type EdgeProfile, type EvaluationView, type LocalLocationStore, type LocationStore } from "./location-store.js";
import type { EdgeLocations } from "./locations.js";
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
  forwarder: EdgeForwarding;
  hub: Pick<DatasetCatalog, "getDataset">;
  clock: Clock;
}

/**
 * Where a collected event goes: the hub forwarder in the all-in-one (`enqueue` resolves once the
 * hub committed it: acknowledged-forwarding.ts), or an edge node's site JetStream or outbox
 * (`enqueue` resolves once it is stored there). The request is answered only then; a rejection
 * is its error answer. A `void` return answers at once (tests' forwarders).
 */
export interface EdgeForwarding {
  /** Whether one more request may be accepted (asked before anything is stored). */
  admit(): boolean;
  enqueue(item: ForwardItem): void | Promise<void>;
}

/** How long a client should keep sending to the hinted location (Adobe's hint TTL is 30 min). */
const LOCATION_HINT_TTL_SECONDS = 1800;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function bad(message: string, code: string = EdgeErrorCodes.badRequest): ApiError {
  return new ApiError(400, code, message);
}

/**
 * What the definitions see of the profile: projected attributes + memberships (edge results
 * win). The location store keeps it current (location-store.ts), so a request builds nothing;
 * a profile the location does not hold sees no attributes and no memberships.
 */
export function evaluationProfile(p: EdgeProfile | undefined): EvaluationView {
  return p === undefined ? buildEvaluationView({}, {}, new Map()) : p.view;
}

/** What a request needs of its datastream, resolved once per datastream version (not per request). */
interface DatastreamContext {
  /** The repository object this was built from: a PUT replaces it, which invalidates the context. */
  ds: Datastream;
  tenant: TenantContext;
  tenantKey: string;
  /** The tenant for both stores (the plan reads the definitions' queries; the hub, the event dataset). */
  scope: TenantRef;
  /** The event dataset, read from the hub on the first request. */
  dataset: Dataset | null;
  /**
   * The catalog's promise of the sandbox's edge definitions last seen, with its value: while the
   * catalog hands out the same promise (until the definitions change), the request reads the
   * value here instead of awaiting it again (each await is a turn of the microtask queue).
   */
  setPromise: Promise<LiveSet> | null;
  set: LiveSet | null;
  /** The evaluation plan of `set` (plan.set === set), once built. */
  plan: EdgePlan | null;
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

/** A request that passed the checks of step 1 (but the event's validation). */
interface CheckedRequest {
  ds: Datastream;
  ctx: DatastreamContext;
  location: string;
  store: LocationStore;
  identity: Identity;
  now: number;
  /** The event as it will be validated and stored (`_id` and `timestamp` filled in). */
  eventBody: JsonObject;
}

type EdgeChange = { definitionId: string; status: MembershipStatus; at: number };

/** The decision of the plan (null: no edge definition applies); fills `segments` and `changes`. */
function decideFor(req: CheckedRequest, record: ValidRecord, plan: EdgePlan | null, held: EdgeProfile | undefined, segments: InteractSegment[], changes: EdgeChange[]): EdgeDecision | null {
  if (plan === null) return null;
  const now = req.now;
  const view = evaluationProfile(held);
  const events: Record<string, unknown>[] = [];
  if (held) for (const e of held.events) events.push(e.body);
  events.push(record.body);
  const decision = plan.decide(held ?? null, view, held?.optedOut ?? false, events, now);
  for (const d of decision.qualifying) segments.push(segmentOf(d));
  for (const c of decision.changes) changes.push({ definitionId: c.definition.id, status: c.qualifies ? "realized" : "exited", at: now });
  return decision;
}

function eventOf(req: CheckedRequest, record: ValidRecord): EdgeEvent {
  return { id: record.eventId ?? (req.eventBody["_id"] as string), ts: record.timestamp ?? req.now, body: record.body };
}

/** The location's membership entries of the request's changes. */
function membershipEntries(changes: readonly EdgeChange[], held: EdgeProfile | undefined, now: number): Array<{ definitionId: string; entry: MembershipEntry }> {
  const iso = new Date(now).toISOString();
  const entries = new Array<{ definitionId: string; entry: MembershipEntry }>(changes.length);
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!;
    // An exit keeps the time of the last qualification, as the hub does.
    const since = c.status === "realized" ? iso : (held?.edgeMemberships.get(c.definitionId)?.lastQualificationTime ?? held?.hubMemberships[c.definitionId]?.lastQualificationTime ?? iso);
    entries[i] = { definitionId: c.definitionId, entry: { status: c.status, lastQualificationTime: since } };
  }
  return entries;
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
    const ctx: DatastreamContext = { ds, tenant, tenantKey: tenantKey(tenant), scope: scopeOf(tenant), dataset: null, setPromise: null, set: null, plan: null };
    this.contexts.set(ds.id, ctx);
    return ctx;
  }

  private async eventDataset(ctx: DatastreamContext): Promise<Dataset> {
    const { ds } = ctx;
    const d = await this.deps.hub.getDataset(ctx.scope, ds.eventDatasetId);
    if (!d) throw bad(`Datastream '${ds.id}' sends events to dataset '${ds.eventDatasetId}', which no longer exists`, EdgeErrorCodes.datastreamUnknown);
    ctx.dataset = d;
    return d;
  }

  /** The plan of the datastream's edge definitions; null when none applies (edge segmentation off, no definition). */
  private async planOf(ctx: DatastreamContext): Promise<EdgePlan | null> {
    if (!ctx.ds.edgeSegmentation) return null;
    const p = this.deps.catalog.get(ctx.tenant, "synchronous");
    let set: LiveSet;
    if (p === ctx.setPromise && ctx.set !== null) set = ctx.set;
    else {
      set = await p;
      ctx.setPromise = p;
      ctx.set = set;
    }
    if (set.definitions.length === 0) return null;
    if (ctx.plan !== null && ctx.plan.set === set) return ctx.plan;
    const plan = await this.plans.get(set, ctx.scope);
    // Only the newest set's plan is kept (a request that awaited an older one must not win).
    if (ctx.set === set) ctx.plan = plan;
    return plan;
  }

  /** The plan when it is known without waiting (the request path's common case), else undefined. */
  private planNow(ctx: DatastreamContext): EdgePlan | null | undefined {
    if (!ctx.ds.edgeSegmentation) return null;
    const p = this.deps.catalog.get(ctx.tenant, "synchronous");
    if (p !== ctx.setPromise || ctx.set === null) return undefined;
    if (ctx.set.definitions.length === 0) return null;
    return ctx.plan !== null && ctx.plan.set === ctx.set ? ctx.plan : undefined;
  }

  async interact(locationName: string | undefined, dataStreamId: string | undefined, body: unknown, requestId: string): Promise<InteractResponse> {
    return this.interactNow(locationName, dataStreamId, body, requestId);
  }

  /**
   * `interact`, answered synchronously when nothing needs waiting for (the request path's common
   * case: the datastream in this process's memory, the event dataset read, the definition set's
   * plan built, the location's store in this process); a promise otherwise. Errors are thrown (or
   * reject the promise). The HTTP route returns the answer as it comes: Fastify sends a plain
   * value without a promise and a turn of the microtask queue. The steps are small synchronous
   * functions; only what is not known yet is awaited.
   */
  interactNow(locationName: string | undefined, dataStreamId: string | undefined, body: unknown, requestId: string): InteractResponse | Promise<InteractResponse> {
    if (dataStreamId === undefined || dataStreamId === "") throw bad("The dataStreamId query parameter is required");
    // The datastream from memory (the common case); one this process does not know yet (created
    // by another process on the same metadata store) is read from the store first.
    const ds = this.deps.datastreams.byId(dataStreamId);
    if (ds === undefined) return this.interactAfterLookup(locationName, dataStreamId, body, requestId);
    return this.interactWith(ds, locationName, body, requestId);
  }

  /** A datastream missing from memory: read from the store, then as usual; unknown there too → 400. */
  private async interactAfterLookup(locationName: string | undefined, dataStreamId: string, body: unknown, requestId: string): Promise<InteractResponse> {
    const ds = await this.deps.datastreams.lookup(dataStreamId);
    if (ds === undefined) throw bad(`Unknown dataStreamId '${dataStreamId.slice(0, 100)}'`, EdgeErrorCodes.datastreamUnknown);
    return this.interactWith(ds, locationName, body, requestId);
  }

  private interactWith(ds: Datastream, locationName: string | undefined, body: unknown, requestId: string): InteractResponse | Promise<InteractResponse> {
    // 1. Everything that can make the request fail is checked before anything is stored.
    const req = this.check(ds, locationName, body);
    if (req.ctx.dataset === null) return this.interactAfterDataset(req, requestId);
    const record = this.validate(req);
    // 2. Evaluate from the location's memory. The plan is resolved first (awaited only when the
    // definitions changed), so that with a store in this process (the default) nothing is
    // awaited between reading the profile and storing the request's changes to it.
    const known = this.planNow(req.ctx);
    const store = req.store;
    if (known !== undefined && isLocalLocationStore(store)) return this.evaluateLocal(req, record, known, store, requestId);
    return this.evaluate(req, record, known, requestId);
  }

  /** The first request of a datastream: its event dataset is read first. */
  private async interactAfterDataset(req: CheckedRequest, requestId: string): Promise<InteractResponse> {
    await this.eventDataset(req.ctx);
    const record = this.validate(req);
    return this.evaluate(req, record, this.planNow(req.ctx), requestId);
  }

  /** Steps 2 and 3 when the plan must be awaited (`known` undefined) or the store is not in this process. */
  private async evaluate(req: CheckedRequest, record: ValidRecord, known: EdgePlan | null | undefined, requestId: string): Promise<InteractResponse> {
    const plan = known === undefined ? await this.planOf(req.ctx) : known;
    const store = req.store;
    if (isLocalLocationStore(store)) return this.evaluateLocal(req, record, plan, store, requestId);
    return this.evaluateRemote(req, record, plan, requestId);
  }

  private check(ds: Datastream, locationName: string | undefined, body: unknown): CheckedRequest {
    const location = locationName ?? this.deps.locations.defaultLocation;
    const store = this.deps.locations.get(location);
    if (!store) throw new ApiError(404, EdgeErrorCodes.locationUnknown, `Unknown edge location '${location.slice(0, 100)}'; configured: ${this.deps.locations.names().join(", ")}`);
    const ctx = this.context(ds);
    const xdm = isObject(body) && isObject(body["event"]) ? body["event"]["xdm"] : undefined;
    if (!isObject(xdm)) throw bad("The body must be {event: {xdm: {identityMap, eventType, timestamp, ...}}}");
    const identity = primaryIdentityOf(xdm["identityMap"]);
    const now = this.deps.clock.now();
    const eventBody: JsonObject = { ...(xdm as JsonObject) };
    if (typeof eventBody["_id"] !== "string" || eventBody["_id"] === "") eventBody["_id"] = randomUUID();
    // An event sent without a time happened before the request reached us: it is stamped 1 ms
    // before the server time. Stamped at the server time itself it would not count at its own
    // request, as PQL's windows before `now` end strictly before now (`< 30 minutes before now`:
    // now − 30 min < T < now), and a single-event audience could never qualify on its event.
    if (eventBody["timestamp"] === undefined) eventBody["timestamp"] = new Date(now - 1).toISOString();
    return { ds, ctx, location, store, identity, now, eventBody };
  }

  /** The event, validated against its dataset (read by then); admitted to the hub's queue. */
  private validate(req: CheckedRequest): ValidRecord {
    const validated = validateRecord(req.eventBody, 0, req.ctx.dataset!);
    if (!validated.ok) {
      throw new ApiError(400, EdgeErrorCodes.invalidEvent, `The event is not valid: ${validated.errors.map((e) => e.message).join("; ")}`, validated.errors.map((e) => ({ code: e.code, message: e.message, ...(e.path ? { field: e.path } : {}) })));
    }
    // Backpressure: when the hub forwarder's queue is full, refuse before storing anything.
    if (!this.deps.forwarder.admit()) {
      throw new ApiError(503, EdgeErrorCodes.busy, "The edge is forwarding a backlog of events to the hub; retry shortly");
    }
    return validated.record;
  }

  /** Steps 2 and 3 with a store in this process: synchronous, on the profile entry found once. */
  private evaluateLocal(req: CheckedRequest, record: ValidRecord, plan: EdgePlan | null, store: LocalLocationStore, requestId: string): InteractResponse | Promise<InteractResponse> {
    const tk = req.ctx.tenantKey;
    const held = store.lookupNow(tk, req.identity);
    // The profile's revision the decision is made at (carryForward checks it is the only change since).
    const revisionBefore = held?.revision ?? 0;
    const segments: InteractSegment[] = [];
    const changes: EdgeChange[] = [];
    const decision = decideFor(req, record, plan, held, segments, changes);
    // 3. Store at the location, then forward to the hub (answered once that is durable).
    const stored = store.collectNow(tk, req.identity, eventOf(req, record), req.now);
    if (changes.length > 0) {
      // Into the entry the event went to (the same turn: nothing came in between).
      store.applyEdgeMemberships(stored, membershipEntries(changes, held, req.now));
      // The profile's cached results survive its own changes (not a projection in between).
      if (held && plan !== null && decision !== null) plan.carryForward(held, revisionBefore, decision.changes);
    }
    return this.finish(req, record, held, segments, changes, requestId);
  }

  /** Steps 2 and 3 with a store behind an asynchronous interface (another process). */
  private async evaluateRemote(req: CheckedRequest, record: ValidRecord, plan: EdgePlan | null, requestId: string): Promise<InteractResponse> {
    const { store, identity, now } = req;
    const tk = req.ctx.tenantKey;
    const held = await store.lookup(tk, identity);
    const revisionBefore = held?.revision ?? 0;
    const segments: InteractSegment[] = [];
    const changes: EdgeChange[] = [];
    const decision = decideFor(req, record, plan, held, segments, changes);
    await store.collect(tk, identity, eventOf(req, record), now);
    if (changes.length > 0) {
      await store.setEdgeMemberships(tk, identity, membershipEntries(changes, held, now));
      if (held && plan !== null && decision !== null) plan.carryForward(held, revisionBefore, decision.changes);
    }
    return this.finish(req, record, held, segments, changes, requestId);
  }

  /** Forwards to the hub and answers once that is durable (the hub's commit, or an edge node's site); the response. */
  private finish(req: CheckedRequest, record: ValidRecord, held: EdgeProfile | undefined, segments: InteractSegment[], changes: EdgeChange[], requestId: string): InteractResponse | Promise<InteractResponse> {
    const { ds, location } = req;
    const stored = this.deps.forwarder.enqueue({ tenant: req.ctx.tenant, datasetId: ds.eventDatasetId, record, identity: req.identity, location, newAtLocation: held === undefined, edgeChanges: changes });
    const response: InteractResponse = {
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
    return stored === undefined ? response : stored.then(() => response);
  }
}
