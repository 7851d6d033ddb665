/**
 * Datastreams: the small configuration resource that ties a `dataStreamId` (the
 * only thing an Edge Network request carries) to an organization, a sandbox
 * and the event dataset where collected events land in the hub. Edge
 * segmentation can be switched off per datastream (then the activation handle
 * is empty, as when the Adobe datastream lacks the Edge Segmentation option).
 *
 * Persistence: the metadata store (`MetadataStore.datastreams`, the
 * `datastreams` table of `metadata.sqlite` or of the PostgreSQL schema), like
 * definitions and merge policies. The tenant APIs (list, get, create, replace,
 * delete) read and write the store through its scoped methods, so another
 * sandbox's id reads as missing and is never changed.
 *
 * The interact path reads an in-memory map instead (`byId`: one Map lookup, no
 * allocation, no await): it is loaded from the store at start-up (`load`) and
 * written through by this process's creates, replaces and deletes once the
 * store's write has returned (the HTTP routes await it before answering).
 *
 * Several processes on one PostgreSQL database (each with its own map):
 *  - A datastream created by another process is not in the map. On a miss the
 *    interact request awaits `lookup(id)`, one primary-key read of the store
 *    (concurrent misses of one id share it); a datastream found is added to
 *    the map, so only its first request here waits. An id the store does not
 *    have is remembered as unknown for `missTtlMs` (1 s), so a client that
 *    keeps sending a deleted or mistyped id costs at most one read per second
 *    and process. The common path (a known id) stays synchronous.
 *  - Another process's replace or delete reaches this map through the periodic
 *    reload of every datastream (`refreshIntervalMs`, 30 s by default on
 *    PostgreSQL; off on the embedded store, whose only writer is this
 *    process). Until then this process keeps evaluating the previous version.
 *    Hubs sharing NATS are told at once (cluster/hub-invalidation.ts: `forget`,
 *    or `forgetAll` when messages may have been lost); the reload stays as a backstop.
 *
 * Datastreams of an earlier version lived in `<dataDir>/datastreams.json`;
 * `importDatastreamsFile` moves them into the store once, on start-up.
 */
import { randomUUID } from "node:crypto";
import { readFileSync, renameSync } from "node:fs";
import path from "node:path";
import type { EventBus } from "../platform/bus.js";
import type { Clock } from "../platform/clock.js";
import type { DatasetCatalog } from "../profiles/store.js";
import { ApiError } from "../services/errors.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { DatastreamRecord } from "../stores/records.js";
import type { DatastreamRepository, ScopedDatastream } from "../stores/types.js";
import { EdgeErrorCodes } from "./errors.js";

export type Datastream = DatastreamRecord;

export interface DatastreamInput {
  name: string;
  eventDatasetId: string;
  edgeSegmentation?: boolean;
}

export interface DatastreamServiceOptions {
  /**
   * Reload every datastream from the store this often (ms), so that other processes' replaces
   * and deletes reach the interact path; 0 (the default) = never.
   */
  refreshIntervalMs?: number;
  /** How long an id the store did not have is answered as unknown without another read (ms, default 1000). */
  missTtlMs?: number;
  /** A failed periodic reload (the map stays as it was). */
  onError?: (err: unknown) => void;
  /** Creates, replaces and deletes are published here (`datastream.changed`: the hub's feed to edge nodes). */
  bus?: EventBus;
}

interface PendingRead {
  promise: Promise<Datastream | undefined>;
  /** The datastream was deleted by this process while the store was read. */
  stale: boolean;
  /** Another process changed it while the store was read (`forget`): the row read is answered but not kept. */
  dropped?: boolean;
}

/** Most ids remembered as unknown at once; past it the oldest are forgotten. */
const MAX_MISSES = 10_000;

function invalid(message: string): ApiError {
  return new ApiError(400, EdgeErrorCodes.datastreamInvalid, message);
}

function notFound(id: string): ApiError {
  return new ApiError(404, EdgeErrorCodes.datastreamNotFound, `Datastream with id '${id}' was not found`);
}

function sameDatastream(a: Datastream, b: Datastream): boolean {
  return (
    a.id === b.id &&
    a.name === b.name &&
    a.imsOrgId === b.imsOrgId &&
    a.sandboxName === b.sandboxName &&
    a.eventDatasetId === b.eventDatasetId &&
    a.edgeSegmentation === b.edgeSegmentation &&
    a.creationTime === b.creationTime &&
    a.updateTime === b.updateTime
  );
}

export class DatastreamService {
  /** Every datastream of every tenant, by id: what the interact path reads. */
  private readonly known = new Map<string, Datastream>();
  /** Store reads of missed ids in flight (one per id); a local delete marks its id's read stale. */
  private readonly reads = new Map<string, PendingRead>();
  /** Ids the store did not have → until when (performance.now()) they are answered as unknown. */
  private readonly misses = new Map<string, number>();
  /** Bumped by every change of `known` other than a reload's, so that a reload that raced one is dropped. */
  private generation = 0;
  private timer: ReturnType<typeof setInterval> | null = null;
  private reloading: Promise<void> | null = null;
  private readonly refreshIntervalMs: number;
  private readonly missTtlMs: number;
  private readonly onError: (err: unknown) => void;
  private readonly bus: EventBus | undefined;

  constructor(
    private readonly store: DatastreamRepository,
    private readonly hub: Pick<DatasetCatalog, "getDataset">,
    private readonly clock: Clock,
    options: DatastreamServiceOptions = {},
  ) {
    this.refreshIntervalMs = options.refreshIntervalMs ?? 0;
    this.missTtlMs = options.missTtlMs ?? 1000;
    this.onError = options.onError ?? ((err: unknown) => console.error("segmentd datastreams:", err));
    this.bus = options.bus;
  }

  /** Fills the map from the store (start-up); also what the periodic refresh runs. */
  async load(): Promise<void> {
    await this.reload();
  }

  /** Starts the periodic reload (when `refreshIntervalMs` > 0). */
  start(): void {
    if (this.refreshIntervalMs <= 0 || this.timer !== null) return;
    this.timer = setInterval(() => {
      this.reload().catch(this.onError);
    }, this.refreshIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.reloading?.catch(() => {});
  }

  /** Replaces the map with the store's datastreams, keeping the objects of the unchanged ones. */
  reload(): Promise<void> {
    // One reload at a time; a caller during one waits for it.
    this.reloading ??= this.readAll().finally(() => {
      this.reloading = null;
    });
    return this.reloading;
  }

  private async readAll(): Promise<void> {
    const generation = this.generation;
    const rows = await this.store.all();
    // A change made here while the store was read may be missing from `rows`: the next reload.
    if (generation !== this.generation) return;
    const seen = new Set<string>();
    for (const r of rows) {
      seen.add(r.id);
      this.remember(r);
    }
    for (const id of this.known.keys()) if (!seen.has(id)) this.known.delete(id);
  }

  /**
   * Into the map; an unchanged datastream keeps its object (the interact service keeps what it
   * derived from a datastream for as long as it gets the same object).
   */
  private remember(r: Datastream): Datastream {
    const prev = this.known.get(r.id);
    if (prev !== undefined && sameDatastream(prev, r)) return prev;
    this.known.set(r.id, r);
    this.misses.delete(r.id);
    return r;
  }

  /**
   * Another process created, replaced or deleted this datastream (cluster/hub-invalidation.ts): the
   * map forgets it, and the next request reads it from the store (`lookup`).
   */
  forget(id: string): void {
    this.generation++;
    this.known.delete(id);
    this.misses.delete(id);
    const read = this.reads.get(id);
    if (read !== undefined) {
      read.dropped = true;
      this.reads.delete(id);
    }
  }

  /** Other processes' changes may have been missed (the hubs' NATS away): forget the misses and reload every datastream. */
  async forgetAll(): Promise<void> {
    this.misses.clear();
    for (const read of this.reads.values()) read.dropped = true;
    this.reads.clear();
    // A reload in flight may have read the store before the changes missed: a fresh one after it.
    await this.reloading?.catch(() => {});
    await this.reload();
  }

  /** For the interact endpoint: any organization's datastream, by id, from memory (no await, no allocation). */
  byId(id: string): Datastream | undefined {
    return this.known.get(id);
  }

  /**
   * For the interact endpoint after `byId` missed: the datastream from the store (created by
   * another process sharing it), added to the map; undefined when the store does not have it.
   */
  lookup(id: string): Promise<Datastream | undefined> {
    const hit = this.known.get(id);
    if (hit !== undefined) return Promise.resolve(hit);
    const until = this.misses.get(id);
    if (until !== undefined) {
      if (performance.now() < until) return Promise.resolve(undefined);
      this.misses.delete(id);
    }
    let r = this.reads.get(id);
    if (r === undefined) {
      const read: PendingRead = { stale: false, promise: Promise.resolve(undefined) };
      read.promise = this.read(id, read).finally(() => {
        if (this.reads.get(id) === read) this.reads.delete(id);
      });
      this.reads.set(id, read);
      r = read;
    }
    return r.promise;
  }

  private async read(id: string, read: PendingRead): Promise<Datastream | undefined> {
    const row = await this.store.findById(id);
    // Created or replaced here meanwhile: the map's version is the newer one.
    const now = this.known.get(id);
    if (now !== undefined) return now;
    // Deleted here meanwhile: the row read may predate the delete.
    if (read.stale) return undefined;
    // Changed by another process meanwhile: the row read may predate the change; the next miss reads again.
    if (read.dropped === true) return row;
    if (row === undefined) {
      if (this.misses.size >= MAX_MISSES) this.misses.delete(this.misses.keys().next().value!);
      this.misses.set(id, performance.now() + this.missTtlMs);
      return undefined;
    }
    this.generation++;
    return this.remember(row);
  }

  async list(tenant: TenantContext): Promise<Datastream[]> {
    return this.store.list(scopeOf(tenant));
  }

  /** Another tenant's datastream is reported exactly like a missing one. */
  async get(tenant: TenantContext, id: string): Promise<Datastream> {
    const d = await this.store.get(scopeOf(tenant), id);
    if (!d) throw notFound(id);
    return d;
  }

  async create(tenant: TenantContext, input: DatastreamInput): Promise<Datastream> {
    await this.check(tenant, input);
    const now = this.clock.now();
    const d: Datastream = {
      id: randomUUID(),
      name: input.name.trim(),
      imsOrgId: tenant.orgId,
      sandboxName: tenant.sandbox.sandboxName,
      eventDatasetId: input.eventDatasetId,
      edgeSegmentation: input.edgeSegmentation ?? true,
      creationTime: now,
      updateTime: now,
    };
    await this.store.insert(scopeOf(tenant), d);
    this.generation++;
    this.remember(d);
    this.bus?.publish("datastream.changed", { tenant: scopeOf(tenant), change: "created", datastreamId: d.id });
    return d;
  }

  async replace(tenant: TenantContext, id: string, input: DatastreamInput): Promise<Datastream> {
    const prev = await this.get(tenant, id);
    await this.check(tenant, input);
    const d: Datastream = {
      ...prev,
      name: input.name.trim(),
      eventDatasetId: input.eventDatasetId,
      edgeSegmentation: input.edgeSegmentation ?? prev.edgeSegmentation,
      updateTime: this.clock.now(),
    };
    // Deleted in between (by this or another process): nothing is written.
    if (!(await this.store.update(scopeOf(tenant), d))) throw notFound(id);
    this.generation++;
    this.known.set(d.id, d);
    this.bus?.publish("datastream.changed", { tenant: scopeOf(tenant), change: "updated", datastreamId: d.id });
    return d;
  }

  async delete(tenant: TenantContext, id: string): Promise<void> {
    if (!(await this.store.delete(scopeOf(tenant), id))) throw notFound(id);
    this.generation++;
    this.known.delete(id);
    const read = this.reads.get(id);
    if (read !== undefined) {
      read.stale = true;
      this.reads.delete(id);
    }
    this.bus?.publish("datastream.changed", { tenant: scopeOf(tenant), change: "deleted", datastreamId: id });
  }

  private async check(tenant: TenantContext, input: DatastreamInput): Promise<void> {
    if (input.name.trim() === "") throw invalid("name must not be empty");
    const ds = await this.hub.getDataset(scopeOf(tenant), input.eventDatasetId);
    if (!ds) throw invalid(`eventDatasetId '${input.eventDatasetId}' is not a dataset of sandbox '${tenant.sandbox.sandboxName}'`);
    if (ds.schemaClass !== "experienceevent") throw invalid(`eventDatasetId '${input.eventDatasetId}' must be an experience event dataset (it is a ${ds.schemaClass} dataset)`);
  }
}

/** The file an earlier version kept the datastreams in, under the data directory. */
export const DATASTREAMS_FILE = "datastreams.json";

export interface DatastreamsFileImport {
  file: string;
  /** How many datastreams the file holds. */
  count: number;
  /**
   * imported: into an empty store, the file renamed to `<file>.imported`.
   * already-imported: the store had every one of them (an import whose rename did not happen); renamed too.
   * kept: the store had other datastreams; nothing imported, the file left in place.
   */
  outcome: "imported" | "already-imported" | "kept";
}

/**
 * The one-time migration of `<dataDir>/datastreams.json` (an earlier version's store): when the
 * file exists and the metadata store holds no datastream, its datastreams are inserted in one
 * transaction and the file is renamed to `datastreams.json.imported`. Returns null when there is
 * no file. `sandboxIdOf` gives the store scope of a datastream's (org, sandbox name).
 */
export async function importDatastreamsFile(
  store: DatastreamRepository,
  dataDir: string,
  sandboxIdOf: (orgId: string, sandboxName: string) => string,
): Promise<DatastreamsFileImport | null> {
  const file = path.join(dataDir, DATASTREAMS_FILE);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  const parsed = JSON.parse(text) as unknown;
  if (!Array.isArray(parsed)) throw new Error(`${file}: expected an array of datastreams`);
  const items: ScopedDatastream[] = (parsed as Datastream[]).map((d) => {
    const record: Datastream = {
      id: d.id,
      name: d.name,
      imsOrgId: d.imsOrgId,
      sandboxName: d.sandboxName,
      eventDatasetId: d.eventDatasetId,
      edgeSegmentation: d.edgeSegmentation,
      creationTime: d.creationTime,
      updateTime: d.updateTime,
    };
    return { scope: { orgId: d.imsOrgId, sandboxId: sandboxIdOf(d.imsOrgId, d.sandboxName) }, record };
  });
  let outcome: DatastreamsFileImport["outcome"] = "imported";
  if (!(await store.importIfEmpty(items))) {
    const found = await Promise.all(items.map((i) => store.findById(i.record.id)));
    outcome = found.every((f) => f !== undefined) ? "already-imported" : "kept";
  }
  if (outcome !== "kept") renameSync(file, `${file}.imported`);
  return { file, count: items.length, outcome };
}
