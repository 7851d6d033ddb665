/**
 * AEP's source side of a destination dataflow: the flow spec (which source and target
 * connection specs a flow joins) and source connections to the Profile store. AEP's
 * tutorials create one before the flow; segmentd keeps it so that those clients work
 * unchanged, and a flow's `sourceConnectionIds` must name ones of its sandbox. The
 * source is always the sandbox's profiles.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { TenantRef } from "../platform/tenant.js";
import { ApiError, ErrorCodes } from "../services/errors.js";
import { CONNECTION_SPEC_IDS, PROFILE_FLOW_SPEC_ID } from "./connection-specs.js";
import { invalid, LIMITS } from "./inputs.js";
import type { ActivationStore, StoredResource } from "./store.js";

type Obj = Record<string, unknown>;

/** AEP's connection spec of the Profile store: the source of every destination dataflow. */
export const PROFILE_SOURCE_SPEC_ID = "8a9c3494-9708-43d7-ae3f-cda01e5030e1";
const NOT_FOUND = "SEGMENTD-DESTINATION-404";

/** What `GET /flowSpecs` lists: the one flow spec of segmentd's destinations. */
export function flowSpecs(): Obj[] {
  return [{
    id: PROFILE_FLOW_SPEC_ID,
    name: "Profile-based destinations",
    providerId: "segmentd",
    version: "1.0",
    sourceConnectionSpecIds: [PROFILE_SOURCE_SPEC_ID],
    targetConnectionSpecIds: Object.values(CONNECTION_SPEC_IDS),
    transformationSpecs: [{ name: "GeneralTransform", spec: { type: "object", properties: { segmentSelectors: { type: "object" }, profileSelectors: { type: "object" } } } }],
    attributes: { isDestinationFlow: true },
  }];
}

/** `property=name==X` / `property=id==X` filters of AEP's list endpoints (other properties match nothing). */
export function matchesProperties(item: Obj, properties: string[]): boolean {
  return properties.every((p) => {
    const m = /^([A-Za-z]+)==(.*)$/.exec(p);
    if (m === null) return false;
    const want = m[2]!.replace(/^"(.*)"$/, "$1");
    return String(item[m[1]!]) === want;
  });
}

export class SourceConnections {
  constructor(private readonly store: ActivationStore, private readonly clock: Clock) {}

  private scope(t: TenantRef) {
    return { orgId: t.orgId, sandboxName: t.sandboxName };
  }

  async create(t: TenantRef, body: Obj, actor?: string): Promise<Obj> {
    const name = body.name;
    if (typeof name !== "string" || name.trim() === "") throw invalid("name is required");
    if (name.length > LIMITS.name) throw invalid(`name is longer than ${LIMITS.name} characters`);
    const description = body.description ?? "";
    if (typeof description !== "string" || description.length > LIMITS.description) throw invalid(`description must be a string of at most ${LIMITS.description} characters`);
    const spec = body.connectionSpec;
    const specId = typeof spec === "object" && spec !== null ? (spec as Obj).id : undefined;
    if (specId !== PROFILE_SOURCE_SPEC_ID) throw invalid(`connectionSpec.id must be the Profile store's, "${PROFILE_SOURCE_SPEC_ID}": a destination's source is the sandbox's profiles`);
    const now = this.clock.now();
    const r: StoredResource = {
      kind: "source", scope: this.scope(t), id: randomUUID(), state: "enabled", ref: null, secret: null, etag: randomUUID(), version: 1, created: now, updated: now,
      doc: { name, description, ...(actor === undefined ? {} : { createdBy: actor, updatedBy: actor }) },
    };
    const outcome = await this.store.insert(r, { limit: LIMITS.perSandbox });
    if (outcome === "limit") throw new ApiError(400, ErrorCodes.limit, `A sandbox holds at most ${LIMITS.perSandbox} source connections`);
    return { id: r.id, etag: `"${r.etag}"` };
  }

  render(r: StoredResource, t: TenantRef): Obj {
    const doc = r.doc as { name: string; description: string; createdBy?: string; updatedBy?: string };
    return {
      id: r.id, createdAt: r.created, updatedAt: r.updated,
      ...(doc.createdBy === undefined ? {} : { createdBy: doc.createdBy, updatedBy: doc.updatedBy }),
      sandboxId: t.sandboxId, sandboxName: t.sandboxName, imsOrgId: t.orgId,
      name: doc.name, description: doc.description, state: r.state,
      connectionSpec: { id: PROFILE_SOURCE_SPEC_ID, version: "1.0" },
      version: `"${r.etag}"`, etag: `"${r.etag}"`,
    };
  }

  async get(t: TenantRef, id: string): Promise<Obj> {
    const r = await this.store.get("source", this.scope(t), id);
    if (r === null) throw new ApiError(404, NOT_FOUND, `Source connection with id '${id.slice(0, 256)}' was not found`);
    return this.render(r, t);
  }

  async list(t: TenantRef, page: { offset: number; limit: number }): Promise<{ items: Obj[]; total: number }> {
    const p = await this.store.list("source", this.scope(t), page);
    return { items: p.items.map((r) => this.render(r, t)), total: p.total };
  }

  /** A flow's `sourceConnectionIds`: each a source connection of this sandbox. */
  async check(t: TenantRef, ids: string[]): Promise<void> {
    for (const [i, id] of ids.entries()) {
      if ((await this.store.get("source", this.scope(t), id)) === null) throw invalid(`sourceConnectionIds[${i}] '${id.slice(0, 256)}' does not name a source connection of this sandbox`);
    }
  }

  async delete(t: TenantRef, id: string): Promise<void> {
    const scope = this.scope(t);
    if ((await this.store.get("source", scope, id)) === null) throw new ApiError(404, NOT_FOUND, `Source connection with id '${id.slice(0, 256)}' was not found`);
    const flows = await this.store.list("flow", scope, { offset: 0, limit: LIMITS.perSandbox });
    const user = flows.items.find((f) => ((f.doc as { sourceConnectionIds?: string[] }).sourceConnectionIds ?? []).includes(id));
    if (user !== undefined) throw new ApiError(409, "SEGMENTD-DESTINATION-IN-USE-409", `Source connection '${id}' is used by flow '${user.id}'; delete that first`);
    await this.store.delete("source", scope, id);
  }
}
