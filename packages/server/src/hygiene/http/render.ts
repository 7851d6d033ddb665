/**
 * Response shapes of the hygiene API (hygiene-api.md §3.2, §4.1–4.3, §5.1–5.2):
 * records to JSON, timestamps as ISO-8601 UTC.
 */
import type { ExpirationRecord, WorkOrderRecord } from "../records.js";

const iso = (ms: number) => new Date(ms).toISOString();

export function workOrderJson(o: WorkOrderRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {
    workorderId: o.workorderId,
    orgId: o.orgId,
    bundleId: o.bundleId,
    action: o.action,
    createdAt: iso(o.createdAt),
    updatedAt: iso(o.updatedAt),
    operationCount: o.operationCount,
    targetServices: o.targetServices,
    status: o.status,
    createdBy: o.createdBy,
    datasetId: o.datasetId,
    datasetName: o.datasetName,
    displayName: o.displayName,
    description: o.description,
  };
  if (o.fieldChanges) out.fieldUpdates = o.fieldChanges;
  if (o.productStatusDetails.length > 0) {
    out.productStatusDetails = o.productStatusDetails.map((p) => ({ productName: p.productName, productStatus: p.productStatus, createdAt: iso(p.createdAt) }));
  }
  if (o.failure !== null) out.failureReason = o.failure;
  return out;
}

export function expirationJson(e: ExpirationRecord, withHistory: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ttlId: e.ttlId,
    datasetId: e.datasetId,
    datasetName: e.datasetName,
    sandboxName: e.sandboxName,
    displayName: e.displayName,
    description: e.description,
    imsOrg: e.orgId,
    status: e.status,
    expiry: iso(e.expiry),
    updatedAt: iso(e.updatedAt),
    updatedBy: e.updatedBy,
  };
  if (withHistory) out.history = e.history.map((h) => ({ status: h.status, expiry: iso(h.expiry), updatedAt: iso(h.updatedAt), updatedBy: h.updatedBy }));
  return out;
}
