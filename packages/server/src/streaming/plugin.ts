/**
 * Streaming evaluation as a capability: the live definition catalog and the streaming engine,
 * built from the metadata store and the hub's profile store, started with the app and stopped
 * when it closes (after the plugins registered later, which feed it, have closed).
 *
 *   await app.register(streamingPlugin, { meta, hub, clock, bus });
 *   await app.streaming!.engine.onRecordsStored(tenant, storedRecords);
 *
 * `createStreaming` builds the same without HTTP (tests, benches).
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { EventBus } from "../platform/bus.js";
import type { Clock } from "../platform/clock.js";
import type { TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { DefinitionCatalog } from "./definition-catalog.js";
import { StreamingEngine, type StreamingFeed, type StreamingHub } from "./engine.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The streaming capability; present when the streaming plugin is registered. */
    streaming?: Streaming;
  }
}

/** The plugin's name: what plugins that use `app.streaming` list in their `dependencies`. */
export const STREAMING_PLUGIN = "segmentd-streaming";

export interface StreamingDeps {
  meta: MetadataStore;
  hub: StreamingHub;
  clock: Clock;
  /** Definition and merge-policy changes drop the catalog's cached definitions. */
  bus?: EventBus;
  /** Sweep period (default 30 s: exits land within 30 s of a window closing). */
  sweepIntervalMs?: number;
  /** Profile states kept in memory (the engine's default when omitted). */
  maxCachedProfiles?: number;
  onError?: (err: unknown) => void;
}

/**
 * The streaming capability as the other plugins see it. On a hub whose streaming workers evaluate
 * (cluster/partition-feed-plugin.ts, registered under the same name), `engine` is the feed that
 * publishes the stored changes to them.
 */
export interface Streaming {
  catalog: DefinitionCatalog;
  engine: StreamingFeed;
  /** Starts the sweep timer. */
  start(): void;
  /** Closes the windows due by now (the sweep the timer runs; on a hub with workers, a tick to every partition). */
  sweep(): Promise<void>;
  /** Waits for the evaluations and membership writes in flight. */
  idle(): Promise<void>;
  close(): Promise<void>;
  /** On a hub whose streaming workers evaluate: hands a backfill's net change to the partitions' owners (cluster/partition-backfill.ts). */
  backfill?: PartitionedBackfillWriter;
}

/**
 * A backfill's writes on a hub with streaming workers (issue #40): the net change the hub computed
 * goes to each partition's owner in band, on the partition's ordered stream, and resolves once
 * every partition applied it. batch/backfill/ calls it structurally (its PartitionedBackfill).
 */
export interface PartitionedBackfillWriter {
  /** Resolves once every partition's owner has taken this version of the definition (before the fence). */
  switchTo(run: { tenant: TenantContext; definitionId: string; version: number; isCancelled(): boolean }): Promise<void>;
  write(run: {
    tenant: TenantContext;
    definitionId: string;
    /** updateTime of the definition version evaluated. */
    version: number;
    /** The change feed's version the snapshot read through. */
    fence: number;
    desired: ReadonlyMap<string, "realized" | "exited">;
    isCancelled(): boolean;
    /** Profiles of the net change the partitions applied so far. */
    onProgress(processed: number): Promise<void>;
  }): Promise<{ entered: number; exited: number; fenced: number }>;
}

export function createStreaming(deps: StreamingDeps): Streaming & { engine: StreamingEngine } {
  const catalog = new DefinitionCatalog(deps.meta, deps.bus);
  const engine = new StreamingEngine({
    catalog,
    hub: deps.hub,
    clock: deps.clock,
    sweepIntervalMs: deps.sweepIntervalMs,
    ...(deps.onError ? { onError: deps.onError } : {}),
    ...(deps.maxCachedProfiles !== undefined ? { maxCachedProfiles: deps.maxCachedProfiles } : {}),
  });
  return {
    catalog,
    engine,
    start: () => engine.start(),
    async sweep() {
      await engine.sweep();
    },
    idle: () => engine.idle(),
    async close() {
      try {
        await engine.stop();
      } finally {
        catalog.close();
      }
    },
  };
}

/** The streaming capability (not encapsulated: it decorates the app with `streaming`). */
export const streamingPlugin = fp(
  async (app: FastifyInstance, deps: StreamingDeps) => {
    const streaming = createStreaming(deps);
    app.decorate("streaming", streaming);
    streaming.start();
    app.addHook("onClose", async () => {
      await streaming.close();
    });
  },
  { name: STREAMING_PLUGIN, fastify: "5.x" },
);
