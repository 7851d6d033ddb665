// Record builders for store-level tests.
import { randomUUID } from "node:crypto";
import type { ExpirationRecord, WorkOrderRecord } from "../../src/hygiene/records.js";

export function workOrder(orgId: string, overrides: Partial<WorkOrderRecord> = {}): WorkOrderRecord {
  const at = overrides.createdAt ?? Date.UTC(2026, 0, 15);
  return {
    workorderId: `DI-${randomUUID()}`,
    orgId,
    sandboxName: "prod",
    bundleId: `BN-${randomUUID()}`,
    action: "identity-delete",
    createdAt: at,
    updatedAt: at,
    operationCount: 1,
    targetServices: ["datalake", "identity", "profile", "ajo"],
    status: "received",
    createdBy: "tester",
    updatedBy: "tester",
    datasetId: "ALL",
    datasetName: "",
    displayName: "order",
    description: "",
    identities: [{ namespace: "email", id: "a@x.com" }],
    fieldChanges: null,
    productStatusDetails: [],
    failure: null,
    outcome: null,
    revision: 0,
    ...overrides,
  };
}

export function expiration(orgId: string, datasetId: string, overrides: Partial<ExpirationRecord> = {}): ExpirationRecord {
  const at = overrides.createdAt ?? Date.UTC(2026, 0, 15);
  return {
    ttlId: `SD-${randomUUID()}`,
    orgId,
    sandboxName: "prod",
    datasetId,
    datasetName: `name of ${datasetId}`,
    displayName: "expire it",
    description: "",
    status: "pending",
    expiry: at + 2 * 86_400_000,
    createdAt: at,
    updatedAt: at,
    updatedBy: "tester",
    history: [],
    revision: 0,
    ...overrides,
  };
}
