/**
 * The destinations service: base connections, target connections and flows of one
 * sandbox, in AEP Flow Service shapes. Secrets are sealed before they reach the store
 * and never leave it except through the DataflowDirectory (the deliverer's view);
 * responses show "***". Destination URLs are checked for form and address (DNS) when
 * saved. Every change notifies the directory's listeners.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { TenantRef } from "../platform/tenant.js";
import { ApiError, ErrorCodes } from "../services/errors.js";
import { applyPatch, JsonPatchError, type JsonValue, type PatchOperation } from "../services/json-patch.js";
import { CONNECTION_SPEC_IDS, kindOfSpec, PROFILE_FLOW_SPEC_ID } from "./connection-specs.js";
import {
  authView, DEFAULT_DELIVERY, invalid, LIMITS, parseAuth, parseDelivery, parseTargetParams, parseTransformations, renderTransformations, checkNatsUrl,
  type FlowTransformations, type StoredSegmentSelector, type TargetParams,
} from "./inputs.js";
import { newSigningSecret, type SecretBox } from "./secrets.js";
import type { ActivationStore, ResourceKind, StoredResource } from "./store.js";
import type { Dataflow, DataflowDirectory, DeliveryPolicy, DestinationKind, DestinationTarget, TenantScope, WebhookAuth } from "./types.js";
import { assertPublicTarget, type Resolver } from "./url-safety.js";

type Obj = Record<string, unknown>;

export const NOT_FOUND_CODE = "SEGMENTD-DESTINATION-404";
export const IN_USE_CODE = "SEGMENTD-DESTINATION-IN-USE-409";
export const PRECONDITION_REQUIRED_CODE = "SEGMENTD-PRECONDITION-428";
export const PRECONDITION_FAILED_CODE = "SEGMENTD-PRECONDITION-412";

const WHAT: Record<ResourceKind, string> = { connection: "Connection", target: "Target connection", flow: "Flow", source: "Source connection" };

export function notFoundError(kind: ResourceKind, id: string): ApiError {
  return new ApiError(404, NOT_FOUND_CODE, `${WHAT[kind]} with id '${id.slice(0, 256)}' was not found`);
}

interface ConnectionDoc { name: string; description: string; specId: string; destKind: DestinationKind; auth: Obj; createdBy?: string; updatedBy?: string }
interface TargetDoc { name: string; description: string; specId: string; destKind: DestinationKind; baseConnectionId: string; params: Obj; createdBy?: string; updatedBy?: string }
interface FlowDoc {
  name: string; description: string; flowSpec: Obj; sourceConnectionIds: string[]; targetConnectionId: string; destKind: DestinationKind;
  transformations: FlowTransformations; delivery: DeliveryPolicy; createdBy?: string; updatedBy?: string;
}

export interface ActivationServiceDeps {
  store: ActivationStore;
  box: SecretBox;
  clock: Clock;
  allowPrivateNetworks: boolean;
  /** Which of these audience ids exist in the sandbox (id → name). */
  audiences(tenant: TenantRef, ids: string[]): Promise<Map<string, string>>;
  /** Unit tests only. */
  resolve?: Resolver;
  onError?: (err: unknown, what: string) => void;
  /** A flow's sourceConnectionIds must name source connections of the sandbox (source-connections.ts). */
  checkSources?: (tenant: TenantRef, ids: string[]) => Promise<void>;
  /** The server's own NATS (config `natsUrl`): where NATS flows without `params.serverUrl` publish. */
  natsUrl?: string;
}

const quote = (etag: string) => `"${etag}"`;

/** The If-Match value without quotes or W/; "*" matches any. */
export function unquoteEtag(v: string): string {
  return v.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

export class ActivationService implements DataflowDirectory {
  private readonly listeners = new Set<(scope: TenantScope, flowId: string) => void>();
  private readonly localListeners = new Set<(scope: TenantScope, flowId: string) => void>();

  constructor(private readonly deps: ActivationServiceDeps) {}

  // ---- DataflowDirectory -------------------------------------------------------------

  onChange(listener: (scope: TenantScope, flowId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Changes made through this service only (not another hub's): what the hubs' invalidation tells the others. */
  onLocalChange(listener: (scope: TenantScope, flowId: string) => void): () => void {
    this.localListeners.add(listener);
    return () => this.localListeners.delete(listener);
  }

  /** Another hub changed this flow in the shared store: the deliverer looks at it again now. */
  changedElsewhere(scope: TenantScope, flowId: string): void {
    for (const l of this.listeners) l({ orgId: scope.orgId, sandboxName: scope.sandboxName }, flowId);
  }

  private changed(scope: TenantScope, flowIds: string[]): void {
    for (const id of flowIds) {
      for (const l of this.listeners) l({ orgId: scope.orgId, sandboxName: scope.sandboxName }, id);
      for (const l of this.localListeners) l({ orgId: scope.orgId, sandboxName: scope.sandboxName }, id);
    }
  }

  async listEnabled(): Promise<Dataflow[]> {
    const out: Dataflow[] = [];
    for (const f of await this.deps.store.listByState("flow", "enabled")) {
      // One flow whose secrets cannot be opened (another key) must not stop every other flow.
      try {
        const d = await this.dataflowOf(f);
        if (d) out.push(d);
      } catch (err) {
        this.deps.onError?.(err, `reading flow ${f.id} of ${f.scope.orgId}/${f.scope.sandboxName}`);
      }
    }
    return out;
  }

  async get(scope: TenantScope, flowId: string): Promise<Dataflow | null> {
    const f = await this.deps.store.get("flow", scope, flowId);
    return f ? this.dataflowOf(f) : null;
  }

  /** The deliverer's view of a flow: its target and connection resolved, secrets opened. */
  private async dataflowOf(f: StoredResource): Promise<Dataflow | null> {
    const doc = f.doc as unknown as FlowDoc;
    const t = await this.deps.store.get("target", f.scope, doc.targetConnectionId);
    if (!t) return null;
    const tdoc = t.doc as unknown as TargetDoc;
    const c = await this.deps.store.get("connection", f.scope, tdoc.baseConnectionId);
    if (!c) return null;
    const bind = (r: StoredResource) => ({ orgId: r.scope.orgId, sandboxName: r.scope.sandboxName, kind: r.kind, id: r.id });
    let target: DestinationTarget;
    const p = tdoc.params;
    if (tdoc.destKind === "webhook") {
      const auth = c.secret === null ? ({ type: "none" } as WebhookAuth) : this.deps.box.open<WebhookAuth>(c.secret, bind(c));
      const headers = t.secret === null ? {} : this.deps.box.open<Record<string, string>>(t.secret, bind(t));
      const signingSecret = f.secret === null ? "" : this.deps.box.open<string>(f.secret, bind(f));
      target = { kind: "webhook", url: String(p.httpEndpoint), auth, headers, signingSecret };
    } else if (tdoc.destKind === "nats") {
      target = {
        kind: "nats", subject: String(p.subject),
        ...(typeof p.serverUrl === "string" ? { serverUrl: p.serverUrl } : this.deps.natsUrl === undefined ? {} : { fallbackUrl: this.deps.natsUrl }),
      };
    } else {
      const fp = parseTargetParams("file", p);
      if (fp.kind !== "file") return null;
      const { kind: _k, ...rest } = fp;
      target = { kind: "file", ...rest };
    }
    const tr = doc.transformations;
    return {
      scope: { orgId: f.scope.orgId, sandboxName: f.scope.sandboxName },
      flowId: f.id,
      name: doc.name,
      state: f.state === "enabled" ? "enabled" : "disabled",
      target,
      delivery: { ...DEFAULT_DELIVERY, ...doc.delivery },
      segmentSelectors: tr.segmentSelectors.map((s) => ({ audienceId: s.id, startTime: s.startTime, addedAt: s.addedAt })),
      profileSelectors: { attributes: [...tr.profileSelectors.attributes], identityNamespaces: [...tr.profileSelectors.identityNamespaces] },
      createdAt: f.created,
      updatedAt: f.updated,
      version: f.version,
    };
  }

  // ---- shared ------------------------------------------------------------------------

  private scope(t: TenantRef): TenantScope {
    return { orgId: t.orgId, sandboxName: t.sandboxName };
  }

  private resource(kind: ResourceKind, t: TenantRef, fields: { state?: string; ref: string | null; doc: Obj; secret?: (id: string) => string | null }): StoredResource {
    const now = this.deps.clock.now();
    const id = randomUUID();
    const scope = this.scope(t);
    return { kind, scope, id, state: fields.state ?? "enabled", ref: fields.ref, doc: fields.doc, secret: fields.secret?.(id) ?? null, etag: randomUUID(), version: 1, created: now, updated: now };
  }

  private seal(t: TenantRef, kind: ResourceKind, id: string, value: unknown): string {
    return this.deps.box.seal(value, { orgId: t.orgId, sandboxName: t.sandboxName, kind, id });
  }

  private async insert(r: StoredResource, refKind?: ResourceKind): Promise<void> {
    const outcome = await this.deps.store.insert(r, { limit: LIMITS.perSandbox, ...(refKind === undefined ? {} : { refKind }) });
    if (outcome === "missing-ref") throw invalid(`${refKind === "connection" ? "baseConnectionId" : "targetConnectionIds[0]"} '${String(r.ref)}' does not name a ${refKind === "connection" ? "connection" : "target connection"} of this sandbox`);
    if (outcome === "limit") throw new ApiError(400, ErrorCodes.limit, `A sandbox holds at most ${LIMITS.perSandbox} ${WHAT[r.kind].toLowerCase()}s`);
  }

  private async mustGet(kind: ResourceKind, t: TenantRef, id: string): Promise<StoredResource> {
    const r = await this.deps.store.get(kind, this.scope(t), id);
    if (!r) throw notFoundError(kind, id);
    return r;
  }

  private common(r: StoredResource, t: TenantRef): Obj {
    const doc = r.doc as { name: string; description: string; createdBy?: string; updatedBy?: string };
    return {
      id: r.id,
      createdAt: r.created,
      updatedAt: r.updated,
      ...(doc.createdBy === undefined ? {} : { createdBy: doc.createdBy }),
      ...(doc.updatedBy === undefined ? {} : { updatedBy: doc.updatedBy }),
      sandboxId: t.sandboxId,
      sandboxName: t.sandboxName,
      imsOrgId: t.orgId,
      name: doc.name,
      description: doc.description,
      state: r.state,
      version: quote(r.etag),
      etag: quote(r.etag),
    };
  }

  private async checkReachable(url: string): Promise<void> {
    await assertPublicTarget(url, { allowPrivateNetworks: this.deps.allowPrivateNetworks, ...(this.deps.resolve ? { resolve: this.deps.resolve } : {}) });
  }

  private static nameOf(body: Obj): { name: string; description: string } {
    const name = body.name;
    if (typeof name !== "string" || name.trim() === "") throw invalid("name is required");
    if (name.length > LIMITS.name) throw invalid(`name is longer than ${LIMITS.name} characters`);
    const description = body.description ?? "";
    if (typeof description !== "string") throw invalid("description must be a string");
    if (description.length > LIMITS.description) throw invalid(`description is longer than ${LIMITS.description} characters`);
    return { name, description };
  }

  private static specOf(body: Obj): { specId: string; destKind: DestinationKind } {
    const spec = body.connectionSpec;
    const id = typeof spec === "object" && spec !== null ? (spec as Obj).id : undefined;
    if (typeof id !== "string") throw invalid("connectionSpec.id is required");
    const destKind = kindOfSpec(id);
    if (destKind === null) throw invalid(`connectionSpec.id "${id.slice(0, 64)}" is not one of segmentd's connection specs (GET /connectionSpecs)`);
    return { specId: id, destKind };
  }

  // ---- base connections ------------------------------------------------------------

  async createConnection(t: TenantRef, body: Obj, actor?: string): Promise<Obj> {
    const { name, description } = ActivationService.nameOf(body);
    const { specId, destKind } = ActivationService.specOf(body);
    const auth = parseAuth(destKind, body.auth);
    if (auth.type === "oauth2") await this.checkReachable(auth.tokenUrl);
    const doc: ConnectionDoc = { name, description, specId, destKind, auth: authView(auth), ...(actor === undefined ? {} : { createdBy: actor, updatedBy: actor }) };
    const r = this.resource("connection", t, { ref: null, doc: doc as unknown as Obj, secret: (id) => (auth.type === "none" ? null : this.seal(t, "connection", id, auth)) });
    await this.insert(r);
    return { id: r.id, etag: quote(r.etag) };
  }

  private renderConnection(r: StoredResource, t: TenantRef): Obj {
    const doc = r.doc as unknown as ConnectionDoc;
    return { ...this.common(r, t), connectionSpec: { id: doc.specId, version: "1.0" }, auth: doc.auth };
  }

  async getConnection(t: TenantRef, id: string): Promise<Obj> {
    return this.renderConnection(await this.mustGet("connection", t, id), t);
  }

  async listConnections(t: TenantRef, page: { offset: number; limit: number }): Promise<{ items: Obj[]; total: number }> {
    const p = await this.deps.store.list("connection", this.scope(t), page);
    return { items: p.items.map((r) => this.renderConnection(r, t)), total: p.total };
  }

  async deleteConnection(t: TenantRef, id: string): Promise<void> {
    const out = await this.deps.store.delete("connection", this.scope(t), id, "target");
    if (!out.ok && out.reason === "missing") throw notFoundError("connection", id);
    if (!out.ok && out.reason === "in-use") throw new ApiError(409, IN_USE_CODE, `Connection '${id}' is used by target connection '${out.by}'; delete that first`);
  }

  /** JSON Patch over a resource's editable view under If-Match; the patched object. */
  private async patched(kind: ResourceKind, t: TenantRef, id: string, ops: PatchOperation[], ifMatch: string | undefined, view: (r: StoredResource) => Obj): Promise<{ r: StoredResource; body: Obj }> {
    if (ifMatch === undefined || ifMatch.trim() === "") throw new ApiError(428, PRECONDITION_REQUIRED_CODE, `If-Match header with the ${WHAT[kind].toLowerCase()}'s etag is required`);
    const r = await this.mustGet(kind, t, id);
    const wanted = unquoteEtag(ifMatch);
    if (wanted !== "*" && wanted !== r.etag) throw new ApiError(412, PRECONDITION_FAILED_CODE, `If-Match ${ifMatch.slice(0, 100)} does not match the ${WHAT[kind].toLowerCase()}'s current etag "${r.etag}"`);
    const editable = view(r);
    let out: JsonValue;
    try {
      out = applyPatch(editable as JsonValue, ops);
    } catch (err) {
      if (err instanceof JsonPatchError) throw invalid(`JSON Patch failed: ${err.message}`);
      throw err;
    }
    if (typeof out !== "object" || out === null || Array.isArray(out)) throw invalid(`JSON Patch must leave the ${WHAT[kind].toLowerCase()} an object`);
    for (const k of Object.keys(out)) if (!(k in editable)) throw invalid(`/${k.slice(0, 64)} cannot be patched (editable: ${Object.keys(editable).join(", ")})`);
    return { r, body: out as Obj };
  }

  private async commit(r: StoredResource, doc: Obj, secret: string | null, flowIds: () => Promise<string[]>): Promise<Obj> {
    const next: StoredResource = { ...r, doc, secret, etag: randomUUID(), version: r.version + 1, updated: this.deps.clock.now() };
    if (!(await this.deps.store.replace(next, r.etag))) throw new ApiError(412, PRECONDITION_FAILED_CODE, `${WHAT[r.kind]} '${r.id}' changed while this request ran; read it again and retry with its new etag`);
    this.changed(r.scope, await flowIds());
    return { id: r.id, etag: quote(next.etag) };
  }

  private bindingOf(r: StoredResource) {
    return { orgId: r.scope.orgId, sandboxName: r.scope.sandboxName, kind: r.kind, id: r.id };
  }

  /** AEP's PATCH /connections/{id}: /name, /description, /auth. A secret left as "***" keeps its stored value. */
  async patchConnection(t: TenantRef, id: string, ops: PatchOperation[], ifMatch: string | undefined, actor?: string): Promise<Obj> {
    const { r, body } = await this.patched("connection", t, id, ops, ifMatch, (x) => {
      const d = x.doc as unknown as ConnectionDoc;
      return { name: d.name, description: d.description, auth: d.auth };
    });
    const doc = r.doc as unknown as ConnectionDoc;
    const { name, description } = ActivationService.nameOf(body);
    const old: WebhookAuth = r.secret === null ? { type: "none" } : this.deps.box.open<WebhookAuth>(r.secret, this.bindingOf(r));
    const given = body.auth;
    if (typeof given === "object" && given !== null && typeof (given as Obj).params === "object" && (given as Obj).params !== null) {
      const params = (given as Obj).params as Obj;
      if (params.token === "***" && old.type === "bearer") params.token = old.token;
      if (params.clientSecret === "***" && old.type === "oauth2") params.clientSecret = old.clientSecret;
    }
    const auth = parseAuth(doc.destKind, given);
    if (auth.type === "oauth2") await this.checkReachable(auth.tokenUrl);
    const next: ConnectionDoc = { ...doc, name, description, auth: authView(auth), ...(actor === undefined ? {} : { updatedBy: actor }) };
    return this.commit(r, next as unknown as Obj, auth.type === "none" ? null : this.seal(t, "connection", r.id, auth), async () => {
      const flows: string[] = [];
      for (const target of await this.deps.store.referrers("target", r.scope, r.id)) flows.push(...(await this.deps.store.referrers("flow", r.scope, target)));
      return flows;
    });
  }

  /** AEP's PATCH /targetConnections/{id}: /name, /description, /params. A header value left as "***" keeps its stored value. */
  async patchTarget(t: TenantRef, id: string, ops: PatchOperation[], ifMatch: string | undefined, actor?: string): Promise<Obj> {
    const { r, body } = await this.patched("target", t, id, ops, ifMatch, (x) => {
      const d = x.doc as unknown as TargetDoc;
      return { name: d.name, description: d.description, params: d.params };
    });
    const doc = r.doc as unknown as TargetDoc;
    const { name, description } = ActivationService.nameOf(body);
    const oldHeaders = r.secret === null ? {} : this.deps.box.open<Record<string, string>>(r.secret, this.bindingOf(r));
    const given = body.params;
    if (typeof given === "object" && given !== null && typeof (given as Obj).headers === "object" && (given as Obj).headers !== null) {
      const headers = (given as Obj).headers as Obj;
      for (const [k, v] of Object.entries(headers)) if (v === "***" && oldHeaders[k] !== undefined) headers[k] = oldHeaders[k];
    }
    const params = parseTargetParams(doc.destKind, given);
    if (params.kind === "webhook") await this.checkReachable(params.url);
    if (params.kind === "nats" && params.serverUrl !== undefined) await this.checkReachable(checkNatsUrl(params.serverUrl).addressUrl);
    const headers = params.kind === "webhook" ? params.headers : {};
    const next: TargetDoc = { ...doc, name, description, params: publicParams(params), ...(actor === undefined ? {} : { updatedBy: actor }) };
    return this.commit(r, next as unknown as Obj, Object.keys(headers).length === 0 ? null : this.seal(t, "target", r.id, headers), () => this.deps.store.referrers("flow", r.scope, r.id));
  }

  // ---- target connections ----------------------------------------------------------

  async createTarget(t: TenantRef, body: Obj, actor?: string): Promise<Obj> {
    const { name, description } = ActivationService.nameOf(body);
    const { specId, destKind } = ActivationService.specOf(body);
    const baseConnectionId = body.baseConnectionId;
    if (typeof baseConnectionId !== "string" || baseConnectionId === "") throw invalid("baseConnectionId is required");
    const data = body.data;
    if (data !== undefined && (typeof data !== "object" || data === null || ((data as Obj).format !== undefined && (data as Obj).format !== "json"))) throw invalid('data.format must be "json"');
    const params = parseTargetParams(destKind, body.params);
    const base = await this.deps.store.get("connection", this.scope(t), baseConnectionId);
    if (!base) throw invalid(`baseConnectionId '${baseConnectionId.slice(0, 256)}' does not name a connection of this sandbox`);
    if ((base.doc as unknown as ConnectionDoc).specId !== specId) throw invalid(`baseConnectionId '${baseConnectionId}' is a connection of another connection spec`);
    if (params.kind === "webhook") await this.checkReachable(params.url);
    if (params.kind === "nats" && params.serverUrl !== undefined) await this.checkReachable(checkNatsUrl(params.serverUrl).addressUrl);
    const doc: TargetDoc = { name, description, specId, destKind, baseConnectionId, params: publicParams(params), ...(actor === undefined ? {} : { createdBy: actor, updatedBy: actor }) };
    const headers = params.kind === "webhook" ? params.headers : {};
    const r = this.resource("target", t, { ref: baseConnectionId, doc: doc as unknown as Obj, secret: (id) => (Object.keys(headers).length === 0 ? null : this.seal(t, "target", id, headers)) });
    await this.insert(r, "connection");
    return { id: r.id, etag: quote(r.etag) };
  }

  private renderTarget(r: StoredResource, t: TenantRef): Obj {
    const doc = r.doc as unknown as TargetDoc;
    return { ...this.common(r, t), baseConnectionId: doc.baseConnectionId, connectionSpec: { id: doc.specId, version: "1.0" }, data: { format: "json" }, params: doc.params };
  }

  async getTarget(t: TenantRef, id: string): Promise<Obj> {
    return this.renderTarget(await this.mustGet("target", t, id), t);
  }

  async listTargets(t: TenantRef, page: { offset: number; limit: number }): Promise<{ items: Obj[]; total: number }> {
    const p = await this.deps.store.list("target", this.scope(t), page);
    return { items: p.items.map((r) => this.renderTarget(r, t)), total: p.total };
  }

  async deleteTarget(t: TenantRef, id: string): Promise<void> {
    const out = await this.deps.store.delete("target", this.scope(t), id, "flow");
    if (!out.ok && out.reason === "missing") throw notFoundError("target", id);
    if (!out.ok && out.reason === "in-use") throw new ApiError(409, IN_USE_CODE, `Target connection '${id}' is used by flow '${out.by}'; delete that first`);
  }

  // ---- flows -------------------------------------------------------------------------

  /** A flow body (create, or a patched view) → the stored document. */
  private async flowDoc(t: TenantRef, body: Obj, previous: FlowDoc | null): Promise<FlowDoc> {
    const { name, description } = ActivationService.nameOf(body);
    const targets = body.targetConnectionIds;
    if (!Array.isArray(targets) || targets.length !== 1 || typeof targets[0] !== "string" || targets[0] === "") throw invalid("targetConnectionIds must hold exactly one target connection id");
    const targetConnectionId = targets[0];
    if (previous !== null && previous.targetConnectionId !== targetConnectionId) throw new ApiError(400, ErrorCodes.immutable, "targetConnectionIds cannot change; create another flow");
    const sources = body.sourceConnectionIds ?? [];
    if (!Array.isArray(sources) || sources.length > 10 || sources.some((s) => typeof s !== "string" || s.length > 256)) throw invalid("sourceConnectionIds must be an array of at most 10 ids");
    await this.deps.checkSources?.(t, sources as string[]);
    const flowSpec = body.flowSpec ?? { id: PROFILE_FLOW_SPEC_ID, version: "1.0" };
    if (typeof flowSpec !== "object" || flowSpec === null || typeof (flowSpec as Obj).id !== "string") throw invalid("flowSpec must be an object {id, version}");
    const now = this.deps.clock.now();
    const transformations = parseTransformations(body.transformations, now, previous?.transformations.segmentSelectors ?? []);
    const delivery = parseDelivery(body.delivery, previous?.delivery ?? DEFAULT_DELIVERY);
    const target = await this.deps.store.get("target", this.scope(t), targetConnectionId);
    if (!target) throw invalid(`targetConnectionIds[0] '${targetConnectionId.slice(0, 256)}' does not name a target connection of this sandbox`);
    await this.checkAudiences(t, transformations.segmentSelectors);
    const tdoc = target.doc as unknown as TargetDoc;
    if (tdoc.destKind === "nats" && typeof tdoc.params.serverUrl !== "string" && this.deps.natsUrl === undefined) {
      throw invalid(`targetConnectionIds[0] '${targetConnectionId}' names no NATS server (params.serverUrl) and this server has no natsUrl configured; give the target connection a serverUrl`);
    }
    return {
      name, description, flowSpec: { id: (flowSpec as Obj).id, version: String((flowSpec as Obj).version ?? "1.0") },
      sourceConnectionIds: sources as string[], targetConnectionId, destKind: (target.doc as unknown as TargetDoc).destKind, transformations, delivery,
    };
  }

  private async checkAudiences(t: TenantRef, selectors: StoredSegmentSelector[]): Promise<void> {
    if (selectors.length === 0) return;
    const found = await this.deps.audiences(t, selectors.map((s) => s.id));
    const i = selectors.findIndex((s) => !found.has(s.id));
    if (i >= 0) throw invalid(`segmentSelectors.selectors[${i}]: audience '${selectors[i]!.id.slice(0, 256)}' does not exist in this sandbox`);
    for (const s of selectors) if (s.value.name === undefined) s.value.name = found.get(s.id)!;
  }

  async createFlow(t: TenantRef, body: Obj, actor?: string): Promise<Obj> {
    const doc = await this.flowDoc(t, body, null);
    const state = body.state === undefined ? "enabled" : body.state;
    if (state !== "enabled" && state !== "disabled") throw invalid('state must be "enabled" or "disabled"');
    const signingSecret = doc.destKind === "webhook" ? newSigningSecret() : null;
    const stored = { ...doc, ...(actor === undefined ? {} : { createdBy: actor, updatedBy: actor }) };
    const r = this.resource("flow", t, { state, ref: doc.targetConnectionId, doc: stored as unknown as Obj, secret: (id) => (signingSecret === null ? null : this.seal(t, "flow", id, signingSecret)) });
    await this.insert(r, "target");
    this.changed(r.scope, [r.id]);
    return { id: r.id, etag: quote(r.etag), ...(signingSecret === null ? {} : { signingSecret }) };
  }

  renderFlow(r: StoredResource, t: TenantRef): Obj {
    const doc = r.doc as unknown as FlowDoc;
    return {
      ...this.common(r, t),
      flowSpec: doc.flowSpec,
      sourceConnectionIds: doc.sourceConnectionIds,
      targetConnectionIds: [doc.targetConnectionId],
      transformations: renderTransformations(doc.transformations),
      delivery: { ...DEFAULT_DELIVERY, ...doc.delivery },
      inheritedAttributes: { targetConnections: [{ id: doc.targetConnectionId, connectionSpec: { id: CONNECTION_SPEC_IDS[doc.destKind], version: "1.0" } }] },
      runs: `/runs?property=flowId==${r.id}`,
    };
  }

  async findFlow(t: TenantRef, id: string): Promise<StoredResource | null> {
    return this.deps.store.get("flow", this.scope(t), id);
  }

  async getFlowRecord(t: TenantRef, id: string): Promise<StoredResource> {
    return this.mustGet("flow", t, id);
  }

  async listFlows(t: TenantRef, page: { offset: number; limit: number }): Promise<{ items: StoredResource[]; total: number }> {
    return this.deps.store.list("flow", this.scope(t), page);
  }

  /** JSON Patch over the flow's editable view, under If-Match (AEP's etag). */
  async patchFlow(t: TenantRef, id: string, ops: PatchOperation[], ifMatch: string | undefined, actor?: string): Promise<Obj> {
    if (ifMatch === undefined || ifMatch.trim() === "") throw new ApiError(428, PRECONDITION_REQUIRED_CODE, "If-Match header with the flow's etag is required");
    const r = await this.mustGet("flow", t, id);
    const wanted = unquoteEtag(ifMatch);
    if (wanted !== "*" && wanted !== r.etag) throw new ApiError(412, PRECONDITION_FAILED_CODE, `If-Match ${ifMatch.slice(0, 100)} does not match the flow's current etag "${r.etag}"`);
    const before = r.doc as unknown as FlowDoc;
    const view = this.renderFlow(r, t);
    const editable = {
      name: view.name, description: view.description, state: view.state, flowSpec: view.flowSpec, sourceConnectionIds: view.sourceConnectionIds,
      targetConnectionIds: view.targetConnectionIds, transformations: view.transformations, delivery: view.delivery,
    } as JsonValue;
    let patched: JsonValue;
    try {
      patched = applyPatch(editable, ops);
    } catch (err) {
      if (err instanceof JsonPatchError) throw invalid(`JSON Patch failed: ${err.message}`);
      throw err;
    }
    if (typeof patched !== "object" || patched === null || Array.isArray(patched)) throw invalid("JSON Patch must leave the flow an object");
    const body = patched as Obj;
    for (const k of Object.keys(body)) if (!(k in (editable as Obj))) throw invalid(`/${k.slice(0, 64)} cannot be patched (editable: name, description, state, transformations, delivery)`);
    const doc = await this.flowDoc(t, body, before);
    const state = body.state;
    if (state !== "enabled" && state !== "disabled") throw invalid('state must be "enabled" or "disabled"');
    return this.replaceFlow(t, r, { ...doc, ...(before.createdBy === undefined ? {} : { createdBy: before.createdBy }), ...(actor === undefined ? {} : { updatedBy: actor }) }, state);
  }

  private async replaceFlow(t: TenantRef, r: StoredResource, doc: FlowDoc, state: string): Promise<Obj> {
    const next: StoredResource = { ...r, state, doc: doc as unknown as Obj, etag: randomUUID(), version: r.version + 1, updated: this.deps.clock.now() };
    if (!(await this.deps.store.replace(next, r.etag))) {
      throw new ApiError(412, PRECONDITION_FAILED_CODE, `Flow '${r.id}' changed while this request ran; read it again and retry with its new etag`);
    }
    this.changed(r.scope, [r.id]);
    return { id: r.id, etag: quote(next.etag) };
  }

  /** AEP's POST /flows/{id}/action?op=enable|disable. */
  async setFlowState(t: TenantRef, id: string, state: "enabled" | "disabled", actor?: string): Promise<Obj> {
    const r = await this.mustGet("flow", t, id);
    const doc = { ...(r.doc as unknown as FlowDoc), ...(actor === undefined ? {} : { updatedBy: actor }) };
    return this.replaceFlow(t, r, doc, state);
  }

  /** A new signing secret for a webhook flow, returned once (segmentd extension; the old one stops signing at once). */
  async rotateSigningSecret(t: TenantRef, id: string, actor?: string): Promise<Obj> {
    const r = await this.mustGet("flow", t, id);
    const doc = { ...(r.doc as unknown as FlowDoc), ...(actor === undefined ? {} : { updatedBy: actor }) };
    if (doc.destKind !== "webhook") throw invalid(`Flow '${id}' does not send webhooks; it has no signing secret`);
    const signingSecret = newSigningSecret();
    const next: StoredResource = { ...r, doc: doc as unknown as Obj, secret: this.seal(t, "flow", r.id, signingSecret), etag: randomUUID(), version: r.version + 1, updated: this.deps.clock.now() };
    if (!(await this.deps.store.replace(next, r.etag))) throw new ApiError(412, PRECONDITION_FAILED_CODE, `Flow '${r.id}' changed while this request ran; retry`);
    this.changed(r.scope, [r.id]);
    return { id: r.id, etag: quote(next.etag), signingSecret };
  }

  async deleteFlow(t: TenantRef, id: string): Promise<void> {
    const out = await this.deps.store.delete("flow", this.scope(t), id);
    if (!out.ok) throw notFoundError("flow", id);
    this.changed(this.scope(t), [id]);
  }

  /** The audiences a flow selects (resend's default, and its check). */
  selectedAudiences(r: StoredResource): string[] {
    return (r.doc as unknown as FlowDoc).transformations.segmentSelectors.map((s) => s.id);
  }
}

/** What a target connection shows: the parameters, header values as "***". */
function publicParams(p: TargetParams): Obj {
  switch (p.kind) {
    case "webhook":
      return { httpEndpoint: p.url, headers: Object.fromEntries(Object.keys(p.headers).map((k) => [k, "***"])) };
    case "nats":
      return { subject: p.subject, ...(p.serverUrl === undefined ? {} : { serverUrl: p.serverUrl }) };
    case "file":
      return { format: p.format, compression: p.gzip ? "GZIP" : "NONE", exportMode: p.mode === "full" ? "DAILY_FULL_EXPORT" : "FIRST_FULL_THEN_INCREMENTAL", frequency: p.frequency };
  }
}
