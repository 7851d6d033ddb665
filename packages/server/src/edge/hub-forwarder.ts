/**
 * Every event collected at an edge location goes to the hub (architecture
 * flow 3, last step), together with the edge memberships the request decided.
 * The request is answered from the location's memory first; the forward
 * happens right after, group-committed: requests that arrive while a hub
 * write is in flight are written together by the next one, so the hub pays
 * one durable commit per group instead of one per request.
 *
 * After each group: edge transitions are recorded (source edge) against the
 * hub's profile ids, the streaming engine evaluates the stored events, and the
 * hub projects the profiles to the other locations that hold them.
 */
import type { MembershipChange, ProfileStore } from "../profiles/store.js";
import type { Identity, MembershipStatus, ValidRecord } from "../profiles/types.js";
import type { TenantContext } from "../services/tenancy.js";
import type { StreamingEngine } from "../streaming/engine.js";
import { profileScopeOf } from "../streaming/engine.js";
import type { EdgeProjector } from "./projector.js";
import { tenantKeyOf } from "./locations.js";

export interface ForwardItem {
  tenant: TenantContext;
  datasetId: string;
  record: ValidRecord;
  identity: Identity;
  location: string;
  /** The location did not hold the profile before this request: it lacks the hub's data. */
  newAtLocation: boolean;
  edgeChanges: ReadonlyArray<{ definitionId: string; status: MembershipStatus; at: number }>;
}

export interface HubForwarderDeps {
  hub: ProfileStore;
  projector: EdgeProjector;
  streaming?: StreamingEngine;
  maxIdentitiesPerGraph?: number;
  now: () => number;
  onError: (err: unknown) => void;
}

const MAX_GROUP = 2000;

export class HubForwarder {
  private queue: ForwardItem[] = [];
  private running: Promise<void> | null = null;

  constructor(private readonly deps: HubForwarderDeps) {}

  enqueue(item: ForwardItem): void {
    this.queue.push(item);
    this.running ??= this.drain();
  }

  /** Resolves when every item enqueued so far has reached the hub (and its follow-ups ran). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
  }

  get pending(): number {
    return this.queue.length;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, MAX_GROUP);
        const byTarget = new Map<string, ForwardItem[]>();
        for (const it of group) {
          const k = `${tenantKeyOf(it.tenant)}\u0000${it.datasetId}`;
          const list = byTarget.get(k);
          if (list) list.push(it);
          else byTarget.set(k, [it]);
        }
        for (const items of byTarget.values()) {
          try {
            await this.forward(items);
          } catch (err) {
            this.deps.onError(err);
          }
        }
      }
    } finally {
      this.running = null;
    }
  }

  private async forward(items: ForwardItem[]): Promise<void> {
    const { tenant, datasetId } = items[0]!;
    const scope = profileScopeOf(tenant);
    await this.deps.hub.append(scope, datasetId, items.map((i) => i.record), {
      ingestedAt: this.deps.now(),
      maxIdentitiesPerGraph: this.deps.maxIdentitiesPerGraph ?? 50,
    });
    const profileIds = await Promise.all(items.map((i) => this.deps.hub.findProfileId(scope, i.identity)));
    const changes: MembershipChange[] = [];
    items.forEach((it, n) => {
      const pid = profileIds[n];
      if (pid) for (const c of it.edgeChanges) changes.push({ profileId: pid, definitionId: c.definitionId, status: c.status, source: "edge", at: c.at });
    });
    if (changes.length > 0) await this.deps.hub.applyMembershipChanges(scope, changes);
    const streamed = this.deps.streaming ? await this.deps.streaming.onRecordsStored(tenant, items.map((i) => i.record)) : [];
    // Projection goes to every location holding the profile. The collecting location is
    // skipped when it already held the profile (earlier projections, its own events and its
    // own edge decisions keep it current) and the hub changed nothing else (no streaming
    // transition); the other holders always get it, since they lack this location's event.
    const hubChanged = new Set(streamed.map((t) => t.profileId));
    const bySkip = new Map<string, string[]>();
    items.forEach((it, n) => {
      const pid = profileIds[n];
      if (!pid) return;
      const skip = hubChanged.has(pid) || it.newAtLocation ? "" : it.location;
      const list = bySkip.get(skip);
      if (list) list.push(pid);
      else bySkip.set(skip, [pid]);
    });
    for (const [skip, pids] of bySkip) await this.deps.projector.project(tenant, pids, skip === "" ? new Set() : new Set([skip]));
  }
}
