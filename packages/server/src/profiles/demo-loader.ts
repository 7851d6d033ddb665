// Loads the demo retail dataset through the public ingestion API (Catalog
// datasets + batch ingestion), exactly as a user's tooling would. Used by
// `segmentd demo` and by the dev bootstrap when the dev sandbox is empty.
//
// Loading it again is harmless: the sandbox's demo datasets are found by name
// and reused, and the records are the same ones (the 90-day window ends at the
// profile dataset's creation, not at the time of the run), so a profile's
// fragment is rewritten with identical values and events already held are
// skipped by their _id. More profiles or events than before only add records.
import { DEMO_DATASETS, demoEvents, demoProfiles, type DemoOptions } from "./demo.js";
import type { DatasetCatalog } from "./store.js";
import type { DatasetInput, JsonObject, TenantScope } from "./types.js";
import { SCHEMA_CLASS_IDS } from "./types.js";

export interface DemoTarget {
  /** Server base URL, e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  /** Authorization, x-api-key, x-gw-ims-org-id and x-sandbox-name. */
  headers: Record<string, string>;
}

export interface DemoLoadResult {
  datasets: { profiles: string; events: string };
  /** The sandbox already held the demo datasets (an earlier load): they were reused. */
  reused: boolean;
  batches: string[];
  recordsWritten: number;
  recordsFailed: number;
}

/** Records per uploaded file: keeps each upload a few MB. */
export const DEMO_FILE_RECORDS = 5000;

async function request(target: DemoTarget, method: string, path: string, body?: string, contentType = "application/json"): Promise<unknown> {
  const r = await fetch(target.baseUrl + path, { method, headers: { ...target.headers, ...(body === undefined ? {} : { "content-type": contentType }) }, ...(body === undefined ? {} : { body }) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path} failed with ${r.status}: ${text.slice(0, 500)}`);
  return text === "" ? undefined : JSON.parse(text);
}

/** What a load has done so far: records sent in a phase (uploads go DEMO_FILE_RECORDS at a time). */
export interface DemoProgress {
  phase: "profiles" | "events";
  sent: number;
  total: number;
  /** The batch's files are uploaded and the server is writing them (the longest step). */
  completing: boolean;
}

export interface DemoLoadOptions extends Omit<DemoOptions, "now"> {
  onProgress?: (p: DemoProgress) => void;
}

interface CatalogDataset {
  name: string;
  schemaClass: string;
  created: number;
}

/** The sandbox's datasets by id (a demo sandbox has few; pages of 100 otherwise). */
async function listDatasets(target: DemoTarget): Promise<Map<string, CatalogDataset>> {
  const all = new Map<string, CatalogDataset>();
  for (let start = 0; ; start += 100) {
    const page = Object.entries(await request(target, "GET", `/data/foundation/catalog/dataSets?limit=100&start=${start}`) as Record<string, CatalogDataset>);
    for (const [id, d] of page) all.set(id, d);
    if (page.length < 100) return all;
  }
}

async function createDataset(target: DemoTarget, d: DatasetInput): Promise<string> {
  const res = await request(target, "POST", "/data/foundation/catalog/dataSets", JSON.stringify({
    name: d.name, description: d.description, schemaRef: { id: SCHEMA_CLASS_IDS[d.schemaClass], contentType: "application/vnd.adobe.xed+json;version=1" },
    tags: { unifiedProfile: [`enabled:${d.profileEnabled === true}`], unifiedIdentity: [`enabled:${d.profileEnabled === true}`] },
  })) as string[];
  return res[0]!.replace("@/dataSets/", "");
}

async function loadBatch(target: DemoTarget, datasetId: string, records: Iterable<JsonObject>, progress: (sent: number, completing: boolean) => void): Promise<{ id: string; written: number; failed: number }> {
  const batch = await request(target, "POST", "/data/foundation/import/batches", JSON.stringify({ datasetId, inputFormat: { format: "json" } })) as { id: string };
  let lines: string[] = [];
  let part = 0;
  let sent = 0;
  const upload = async () => {
    await request(target, "PUT", `/data/foundation/import/batches/${batch.id}/datasets/${datasetId}/files/part-${part++}.ndjson`, lines.join("\n"), "application/octet-stream");
    sent += lines.length;
    lines = [];
    progress(sent, false);
  };
  for (const r of records) {
    lines.push(JSON.stringify(r));
    if (lines.length === DEMO_FILE_RECORDS) await upload();
  }
  if (lines.length > 0) await upload();
  progress(sent, true);
  const done = await request(target, "POST", `/data/foundation/import/batches/${batch.id}?action=COMPLETE`) as { metrics: { recordsWritten: number; failedRecordCount: number } };
  return { id: batch.id, written: done.metrics.recordsWritten, failed: done.metrics.failedRecordCount };
}

export async function loadDemoOverHttp(target: DemoTarget, opts: DemoLoadOptions): Promise<DemoLoadResult> {
  const existing = await listDatasets(target);
  const find = (d: DatasetInput) => [...existing].find(([, x]) => x.name === d.name && x.schemaClass === d.schemaClass)?.[0];
  const foundProfiles = find(DEMO_DATASETS.profiles);
  const foundEvents = find(DEMO_DATASETS.events);
  const profiles = foundProfiles ?? await createDataset(target, DEMO_DATASETS.profiles);
  const events = foundEvents ?? await createDataset(target, DEMO_DATASETS.events);
  // The window's end is part of every record: taking it from the dataset makes a second load write the same records.
  const created = foundProfiles !== undefined ? existing.get(foundProfiles)!.created
    : (Object.values(await request(target, "GET", `/data/foundation/catalog/dataSets/${profiles}`) as Record<string, CatalogDataset>)[0]!).created;
  const gen = { ...opts, now: created };
  const report = (phase: DemoProgress["phase"], total: number) => (sent: number, completing: boolean) => opts.onProgress?.({ phase, sent, total, completing });
  const p = await loadBatch(target, profiles, demoProfiles(gen), report("profiles", opts.profiles));
  const e = await loadBatch(target, events, demoEvents(gen), report("events", opts.events));
  return { datasets: { profiles, events }, reused: foundProfiles !== undefined || foundEvents !== undefined, batches: [p.id, e.id], recordsWritten: p.written + e.written, recordsFailed: p.failed + e.failed };
}

/** `npm start` in development: load a small demo into a sandbox that has no dataset yet; null when it had one. */
export async function loadDemoIfEmpty(profiles: DatasetCatalog, scope: TenantScope, target: DemoTarget, opts: DemoLoadOptions): Promise<DemoLoadResult | null> {
  if ((await profiles.listDatasets(scope, { limit: 1 })).length > 0) return null;
  return loadDemoOverHttp(target, opts);
}

/** The demo's datastream: interact requests name it to reach the edge audience. */
export const DEMO_DATASTREAM_NAME = "Demo retail web (edge)";

export interface DemoAudience {
  name: string;
  description: string;
  expression: string;
  /** How it is evaluated: edge (synchronous), streaming (continuous) or the batch job. */
  evaluatedBy: "edge" | "streaming" | "batch";
}

/**
 * One audience per evaluation method. The edge one qualifies a profile at its first product view
 * (the interact request's own event counts), so a single interact call shows it.
 */
export const DEMO_AUDIENCES: readonly DemoAudience[] = [
  {
    name: "Product viewers, last 24 hours (edge)",
    description: "Viewed a product in the last 24 hours: evaluated on the edge, in the interact response",
    expression: 'xEvent.exists(eventType = "commerce.productViews" and timestamp occurs < 24 hours before now)',
    evaluatedBy: "edge",
  },
  {
    name: "US cart adders, last 24 hours (streaming)",
    description: "US customers who added a product to their cart in the last 24 hours: evaluated as events stream in",
    expression: 'homeAddress.countryCode = "US" and xEvent.exists(eventType = "commerce.productListAdds" and timestamp occurs < 24 hours before now)',
    evaluatedBy: "streaming",
  },
  {
    name: "Gold and platinum repeat buyers (batch)",
    description: "Gold or platinum loyalty members with two or more purchases in 30 days: evaluated by the batch job",
    expression: 'loyalty.tier in ["gold", "platinum"] and xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 2',
    evaluatedBy: "batch",
  },
];

export interface DemoSetup {
  datastream: { id: string; name: string };
  audiences: Array<{ id: string; name: string; evaluatedBy: DemoAudience["evaluatedBy"]; created: boolean }>;
}

/** The sandbox's definitions' ids by name (pages of 100). */
async function definitionsByName(target: DemoTarget): Promise<Map<string, string>> {
  const byName = new Map<string, string>();
  for (let start = 0; ; start += 100) {
    const page = await request(target, "GET", `/data/core/ups/segment/definitions?limit=100&start=${start}`) as { segments: Array<{ id: string; name: string }> };
    for (const s of page.segments) byName.set(s.name, s.id);
    if (page.segments.length < 100) return byName;
  }
}

/**
 * The demo's datastream over its event dataset and its example audiences, each created once: an
 * existing one of the same name is kept as it is (the user may have edited it).
 */
export async function ensureDemoSetup(target: DemoTarget, eventDatasetId: string): Promise<DemoSetup> {
  const { datastreams } = await request(target, "GET", "/data/core/edge/datastreams") as { datastreams: Array<{ id: string; name: string }> };
  const ds = datastreams.find((d) => d.name === DEMO_DATASTREAM_NAME)
    ?? await request(target, "POST", "/data/core/edge/datastreams", JSON.stringify({ name: DEMO_DATASTREAM_NAME, eventDatasetId })) as { id: string; name: string };
  const known = await definitionsByName(target);
  const audiences: DemoSetup["audiences"] = [];
  for (const a of DEMO_AUDIENCES) {
    const id = known.get(a.name);
    if (id !== undefined) {
      audiences.push({ id, name: a.name, evaluatedBy: a.evaluatedBy, created: false });
      continue;
    }
    const created = await request(target, "POST", "/data/core/ups/segment/definitions", JSON.stringify({
      name: a.name,
      description: a.description,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: a.expression },
      evaluationInfo: { batch: { enabled: a.evaluatedBy === "batch" }, continuous: { enabled: a.evaluatedBy === "streaming" }, synchronous: { enabled: a.evaluatedBy === "edge" } },
    })) as { id: string };
    audiences.push({ id: created.id, name: a.name, evaluatedBy: a.evaluatedBy, created: true });
  }
  return { datastream: { id: ds.id, name: ds.name }, audiences };
}

/** The demo's datastream and audiences as an earlier start or `segmentd demo` left them; null without the datastream. */
export async function findDemoSetup(target: DemoTarget): Promise<DemoSetup | null> {
  const { datastreams } = await request(target, "GET", "/data/core/edge/datastreams") as { datastreams: Array<{ id: string; name: string }> };
  const ds = datastreams.find((d) => d.name === DEMO_DATASTREAM_NAME);
  if (ds === undefined) return null;
  const known = await definitionsByName(target);
  const audiences = DEMO_AUDIENCES.flatMap((a) => {
    const id = known.get(a.name);
    return id === undefined ? [] : [{ id, name: a.name, evaluatedBy: a.evaluatedBy, created: false }];
  });
  return { datastream: { id: ds.id, name: ds.name }, audiences };
}
