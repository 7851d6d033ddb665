/**
 * Hub → edge configuration: segment definitions, merge policies and datastreams (with the event
 * dataset each names). The hub publishes a record's current state, or its deletion, to its
 * subject of the last-value stream SEGMENTD_CONFIG whenever it changes (the bus), and all of
 * them at start-up (a change whose publish a crash or an outage lost is published again). An
 * edge node applies them, in stream order, to its own metadata store and dataset replica, and
 * keeps the sequence it reached (feed-reader.ts) so that it resumes there.
 */
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { EventBus } from "../platform/bus.js";
import type { DatasetCatalog } from "../profiles/store.js";
import type { Dataset } from "../profiles/types.js";
import { scopeOf, type TenantContext, type TenantDirectory } from "../services/tenancy.js";
import type { DatastreamRecord, DefinitionRecord, MergePolicyRecord } from "../stores/records.js";
import { DuplicateNameError, type MetadataStore } from "../stores/types.js";
import { CONFIG_STREAM, configSubject, untoken, type ConfigKind } from "./subjects.js";
import { encode } from "./wire.js";

export type ConfigMessage =
  | { v: 1; kind: "definition"; orgId: string; sandboxName: string; id: string; record: DefinitionRecord | null }
  | { v: 1; kind: "mergePolicy"; orgId: string; sandboxName: string; id: string; record: MergePolicyRecord | null }
  | { v: 1; kind: "datastream"; orgId: string; sandboxName: string; id: string; record: DatastreamRecord | null; dataset: Dataset | null };

const PAGE = 500;
/** Generous limits for the replica: the hub enforced the real ones. */
const REPLICA_LIMITS = { definitions: 1_000_000, streaming: 1_000_000, edge: 1_000_000 };

export class ConfigPublisher {
  private readonly unsubscribe: Array<() => void> = [];
  /** Changes whose publish failed (the hub's NATS away): published again every second. */
  private readonly retry = new Map<string, () => Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  readonly stats = { published: 0, failed: 0 };

  constructor(
    private readonly deps: {
      js: JetStreamClient;
      jsm: JetStreamManager;
      meta: MetadataStore;
      datasets: Pick<DatasetCatalog, "getDataset">;
      bus: EventBus;
      tenants: TenantDirectory;
      onError: (err: unknown) => void;
    },
  ) {}

  async start(): Promise<void> {
    const { bus, tenants } = this.deps;
    const on = (kind: ConfigKind, scope: { orgId: string; sandboxId: string }, id: string) => {
      const tenant = tenants.bySandboxId(scope.sandboxId);
      if (tenant?.orgId === scope.orgId) this.schedule(kind, tenant, id);
    };
    this.unsubscribe.push(
      bus.subscribe("definition.changed", (e) => on("definition", e.tenant, e.definitionId)),
      bus.subscribe("mergePolicy.changed", (e) => on("mergePolicy", e.tenant, e.mergePolicyId)),
      bus.subscribe("datastream.changed", (e) => on("datastream", e.tenant, e.datastreamId)),
    );
    this.timer = setInterval(() => void this.flushRetries(), 1000);
    this.timer.unref();
    // In the background: the hub serves meanwhile, and what fails is published again every second.
    this.publishAll().catch(this.deps.onError);
  }

  stop(): void {
    for (const u of this.unsubscribe.splice(0)) u();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Every record of every tenant (start-up). A failure is retried later, record by record. */
  async publishAll(): Promise<void> {
    const { meta } = this.deps;
    for (const tenant of this.deps.tenants.all()) {
      const scope = scopeOf(tenant);
      for (let offset = 0; ; offset += PAGE) {
        const page = await meta.definitions.list(scope, { filters: {}, sort: [{ field: "id", direction: "asc" }], offset, limit: PAGE });
        for (const r of page.items) this.schedule("definition", tenant, r.definition.id);
        if (page.items.length < PAGE) break;
      }
      for (let offset = 0; ; offset += PAGE) {
        const page = await meta.mergePolicies.list(scope, { filters: {}, order: { field: "name", direction: "asc" }, offset, limit: PAGE });
        for (const r of page.items) this.schedule("mergePolicy", tenant, r.policy.id);
        if (page.items.length < PAGE) break;
      }
      for (const d of await meta.datastreams.list(scope)) this.schedule("datastream", tenant, d.id);
    }
    await this.flushRetries();
    await this.publishTombstones();
  }

  /**
   * A record deleted while its change could not be published (the hub's NATS away, then a crash)
   * is still in the stream as it was: every subject of the stream whose record the store no longer
   * has gets its deletion published.
   */
  private async publishTombstones(): Promise<void> {
    const info = await this.deps.jsm.streams.info(CONFIG_STREAM, { subjects_filter: "segmentd.cfg.>" });
    for (const subject of Object.keys(info.state.subjects ?? {})) {
      const [, , kind, sandboxToken, idToken] = subject.split(".");
      if (kind !== "definition" && kind !== "mergePolicy" && kind !== "datastream") continue;
      const sandboxId = untoken(sandboxToken ?? "");
      const tenant = this.deps.tenants.bySandboxId(sandboxId);
      if (!tenant) continue;
      const id = untoken(idToken ?? "");
      const scope = scopeOf(tenant);
      const repo = kind === "definition" ? this.deps.meta.definitions : kind === "mergePolicy" ? this.deps.meta.mergePolicies : this.deps.meta.datastreams;
      if ((await repo.get(scope, id)) === undefined) this.schedule(kind, tenant, id);
    }
    await this.flushRetries();
  }

  private schedule(kind: ConfigKind, tenant: TenantContext, id: string): void {
    const k = `${kind}\u0000${tenant.orgId}\u0000${tenant.sandbox.sandboxName}\u0000${id}`;
    const run = async () => {
      await this.publish(kind, tenant, id);
    };
    this.retry.set(k, run);
    void this.flushOne(k, run);
  }

  private async flushOne(k: string, run: () => Promise<void>): Promise<void> {
    try {
      await run();
      // A newer change of the same record may have been scheduled meanwhile: keep that one.
      if (this.retry.get(k) === run) this.retry.delete(k);
    } catch (err) {
      this.stats.failed++;
      if (this.stats.failed === 1 || this.stats.failed % 100 === 0) this.deps.onError(err);
    }
  }

  private flushing: Promise<void> | null = null;
  private async flushRetries(): Promise<void> {
    this.flushing ??= (async () => {
      for (const [k, run] of [...this.retry]) await this.flushOne(k, run);
    })().finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  /** Reads the record now and publishes what it is (or that it is gone). */
  private async publish(kind: ConfigKind, tenant: TenantContext, id: string): Promise<void> {
    const scope = scopeOf(tenant);
    const base = { v: 1 as const, orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName, id };
    let msg: ConfigMessage;
    if (kind === "definition") msg = { ...base, kind, record: (await this.deps.meta.definitions.get(scope, id)) ?? null };
    else if (kind === "mergePolicy") msg = { ...base, kind, record: (await this.deps.meta.mergePolicies.get(scope, id)) ?? null };
    else {
      const record = (await this.deps.meta.datastreams.get(scope, id)) ?? null;
      const dataset = record ? await this.deps.datasets.getDataset({ orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName }, record.eventDatasetId) : null;
      msg = { ...base, kind, record, dataset };
    }
    await this.deps.js.publish(configSubject(kind, tenant.sandbox.sandboxId, id), encode(msg), { timeout: 5000 });
    this.stats.published++;
  }
}

/** The edge node's datasets: only what its datastreams name (their event datasets). */
export interface DatasetReplica extends Pick<DatasetCatalog, "getDataset"> {
  putDataset(orgId: string, sandboxName: string, dataset: Dataset): void;
}

/**
 * Applies one configuration message to an edge node's metadata store. Idempotent: a message
 * applied again (the node crashed before it recorded the sequence) leaves the same state.
 */
export async function applyConfig(msg: ConfigMessage, deps: { meta: MetadataStore; bus: EventBus; tenants: TenantDirectory; datasets: DatasetReplica }): Promise<boolean> {
  const tenant = deps.tenants.resolve(msg.orgId, msg.sandboxName);
  if (!tenant) return false;
  const scope = scopeOf(tenant);
  const { meta } = deps;
  if (msg.kind === "definition") {
    const had = await meta.definitions.get(scope, msg.id);
    if (msg.record === null) {
      if (had) await meta.definitions.delete(scope, msg.id);
    } else if (had) await meta.definitions.update(scope, msg.record, REPLICA_LIMITS);
    else {
      try {
        await meta.definitions.insert(scope, msg.record, REPLICA_LIMITS);
      } catch (err) {
        if (!(err instanceof DuplicateNameError)) throw err;
        // A name the hub freed after a message this node has not reached yet (compacted away): the newer state wins.
        await removeByName(meta, scope, msg.record.definition.name);
        await meta.definitions.insert(scope, msg.record, REPLICA_LIMITS);
      }
    }
    deps.bus.publish("definition.changed", { tenant: scope, change: msg.record === null ? "deleted" : had ? "updated" : "created", definitionId: msg.id });
  } else if (msg.kind === "mergePolicy") {
    const had = await meta.mergePolicies.get(scope, msg.id);
    if (msg.record === null) {
      if (had) await meta.mergePolicies.delete(scope, msg.id);
    } else if (had) await meta.mergePolicies.update(scope, msg.record);
    else await meta.mergePolicies.insert(scope, msg.record);
    deps.bus.publish("mergePolicy.changed", { tenant: scope, change: msg.record === null ? "deleted" : had ? "updated" : "created", mergePolicyId: msg.id });
  } else {
    if (msg.dataset) deps.datasets.putDataset(msg.orgId, msg.sandboxName, msg.dataset);
    const had = await meta.datastreams.get(scope, msg.id);
    if (msg.record === null) {
      if (had) await meta.datastreams.delete(scope, msg.id);
    } else if (had) await meta.datastreams.update(scope, msg.record);
    else await meta.datastreams.insert(scope, msg.record);
  }
  return true;
}

async function removeByName(meta: MetadataStore, scope: ReturnType<typeof scopeOf>, name: string): Promise<void> {
  for (let offset = 0; ; offset += PAGE) {
    const page = await meta.definitions.list(scope, { filters: {}, sort: [{ field: "id", direction: "asc" }], offset, limit: PAGE });
    for (const r of page.items) if (r.definition.name === name) await meta.definitions.delete(scope, r.definition.id);
    if (page.items.length < PAGE) return;
  }
}
