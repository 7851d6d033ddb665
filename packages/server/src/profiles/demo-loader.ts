// Loads the demo retail dataset through the public ingestion API (Catalog
// datasets + batch ingestion), exactly as a user's tooling would. Used by
// `segmentd demo` and by the dev bootstrap when the dev sandbox is empty.
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

async function createDataset(target: DemoTarget, d: DatasetInput): Promise<string> {
  const res = await request(target, "POST", "/data/foundation/catalog/dataSets", JSON.stringify({
    name: d.name, description: d.description, schemaRef: { id: SCHEMA_CLASS_IDS[d.schemaClass], contentType: "application/vnd.adobe.xed+json;version=1" },
    tags: { unifiedProfile: [`enabled:${d.profileEnabled === true}`], unifiedIdentity: [`enabled:${d.profileEnabled === true}`] },
  })) as string[];
  return res[0]!.replace("@/dataSets/", "");
}

async function loadBatch(target: DemoTarget, datasetId: string, records: Iterable<JsonObject>): Promise<{ id: string; written: number; failed: number }> {
  const batch = await request(target, "POST", "/data/foundation/import/batches", JSON.stringify({ datasetId, inputFormat: { format: "json" } })) as { id: string };
  let lines: string[] = [];
  let part = 0;
  const upload = async () => {
    await request(target, "PUT", `/data/foundation/import/batches/${batch.id}/datasets/${datasetId}/files/part-${part++}.ndjson`, lines.join("\n"), "application/octet-stream");
    lines = [];
  };
  for (const r of records) {
    lines.push(JSON.stringify(r));
    if (lines.length === DEMO_FILE_RECORDS) await upload();
  }
  if (lines.length > 0) await upload();
  const done = await request(target, "POST", `/data/foundation/import/batches/${batch.id}?action=COMPLETE`) as { metrics: { recordsWritten: number; failedRecordCount: number } };
  return { id: batch.id, written: done.metrics.recordsWritten, failed: done.metrics.failedRecordCount };
}

export async function loadDemoOverHttp(target: DemoTarget, opts: DemoOptions): Promise<DemoLoadResult> {
  const profiles = await createDataset(target, DEMO_DATASETS.profiles);
  const events = await createDataset(target, DEMO_DATASETS.events);
  const p = await loadBatch(target, profiles, demoProfiles(opts));
  const e = await loadBatch(target, events, demoEvents(opts));
  return { datasets: { profiles, events }, batches: [p.id, e.id], recordsWritten: p.written + e.written, recordsFailed: p.failed + e.failed };
}

/** `npm start` in development: load a small demo into a sandbox that has no dataset yet; null when it had one. */
export async function loadDemoIfEmpty(profiles: DatasetCatalog, scope: TenantScope, target: DemoTarget, opts: DemoOptions): Promise<DemoLoadResult | null> {
  if ((await profiles.listDatasets(scope, { limit: 1 })).length > 0) return null;
  return loadDemoOverHttp(target, opts);
}
