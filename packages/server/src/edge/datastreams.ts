/**
 * Datastreams: the small configuration resource that ties a `dataStreamId` (the
 * only thing an Edge Network request carries) to an organization, a sandbox
 * and the event dataset where collected events land in the hub. Edge
 * segmentation can be switched off per datastream (then the activation handle
 * is empty, as when the Adobe datastream lacks the Edge Segmentation option).
 *
 * Persistence: the repository is an interface; the embedded default keeps the
 * datastreams in a JSON file in the data directory (written atomically), since
 * there are few of them and they change rarely. Moving them into the metadata
 * store is a later step that needs a migration in both stores.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Clock } from "../platform/clock.js";
import type { ProfileStore } from "../profiles/store.js";
import { ApiError } from "../services/errors.js";
import type { TenantContext } from "../services/tenancy.js";
import { EdgeErrorCodes } from "./errors.js";

export interface Datastream {
  id: string;
  name: string;
  imsOrgId: string;
  sandboxName: string;
  /** Hub dataset (experience event class) that receives every collected event. */
  eventDatasetId: string;
  /** Adobe's "Edge Segmentation" option of the datastream's Experience Platform service. */
  edgeSegmentation: boolean;
  /** Epoch ms. */
  creationTime: number;
  updateTime: number;
}

export interface DatastreamInput {
  name: string;
  eventDatasetId: string;
  edgeSegmentation?: boolean;
}

export interface DatastreamRepository {
  get(id: string): Datastream | undefined;
  list(orgId: string, sandboxName: string): Datastream[];
  put(d: Datastream): void;
  delete(id: string): boolean;
}

export class InMemoryDatastreams implements DatastreamRepository {
  protected readonly byId = new Map<string, Datastream>();

  get(id: string): Datastream | undefined {
    return this.byId.get(id);
  }

  list(orgId: string, sandboxName: string): Datastream[] {
    return [...this.byId.values()].filter((d) => d.imsOrgId === orgId && d.sandboxName === sandboxName).sort((a, b) => a.creationTime - b.creationTime || a.id.localeCompare(b.id));
  }

  put(d: Datastream): void {
    this.byId.set(d.id, d);
  }

  delete(id: string): boolean {
    return this.byId.delete(id);
  }
}

/** Datastreams in `<dataDir>/datastreams.json`, rewritten whole (write + rename) on every change. */
export class FileDatastreams extends InMemoryDatastreams {
  private readonly file: string;

  constructor(dataDir: string) {
    super();
    mkdirSync(dataDir, { recursive: true });
    this.file = path.join(dataDir, "datastreams.json");
    let text: string | null = null;
    try {
      text = readFileSync(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    if (text !== null) for (const d of JSON.parse(text) as Datastream[]) this.byId.set(d.id, d);
  }

  override put(d: Datastream): void {
    super.put(d);
    this.save();
  }

  override delete(id: string): boolean {
    const had = super.delete(id);
    if (had) this.save();
    return had;
  }

  private save(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify([...this.byId.values()], null, 2));
    renameSync(tmp, this.file);
  }
}

function invalid(message: string): ApiError {
  return new ApiError(400, EdgeErrorCodes.datastreamInvalid, message);
}

export class DatastreamService {
  constructor(
    private readonly repo: DatastreamRepository,
    private readonly hub: ProfileStore,
    private readonly clock: Clock,
  ) {}

  /** For the interact endpoint: any organization's datastream, by id. */
  byId(id: string): Datastream | undefined {
    return this.repo.get(id);
  }

  list(tenant: TenantContext): Datastream[] {
    return this.repo.list(tenant.orgId, tenant.sandbox.sandboxName);
  }

  get(tenant: TenantContext, id: string): Datastream {
    const d = this.repo.get(id);
    // Another tenant's datastream is reported exactly like a missing one.
    if (!d || d.imsOrgId !== tenant.orgId || d.sandboxName !== tenant.sandbox.sandboxName) {
      throw new ApiError(404, EdgeErrorCodes.datastreamNotFound, `Datastream with id '${id}' was not found`);
    }
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
    this.repo.put(d);
    return d;
  }

  async replace(tenant: TenantContext, id: string, input: DatastreamInput): Promise<Datastream> {
    const prev = this.get(tenant, id);
    await this.check(tenant, input);
    const d: Datastream = {
      ...prev,
      name: input.name.trim(),
      eventDatasetId: input.eventDatasetId,
      edgeSegmentation: input.edgeSegmentation ?? prev.edgeSegmentation,
      updateTime: this.clock.now(),
    };
    this.repo.put(d);
    return d;
  }

  delete(tenant: TenantContext, id: string): void {
    this.get(tenant, id);
    this.repo.delete(id);
  }

  private async check(tenant: TenantContext, input: DatastreamInput): Promise<void> {
    if (input.name.trim() === "") throw invalid("name must not be empty");
    const ds = await this.hub.getDataset({ orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName }, input.eventDatasetId);
    if (!ds) throw invalid(`eventDatasetId '${input.eventDatasetId}' is not a dataset of sandbox '${tenant.sandbox.sandboxName}'`);
    if (ds.schemaClass !== "experienceevent") throw invalid(`eventDatasetId '${input.eventDatasetId}' must be an experience event dataset (it is a ${ds.schemaClass} dataset)`);
  }
}
