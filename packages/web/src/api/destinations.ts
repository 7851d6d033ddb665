/**
 * The Flow Service calls the Destinations page makes (docs/activation.md), over the
 * session's ApiClient. The routes' response schemas are open objects
 * (`{items: [object]}`), so the generated types say nothing useful about them: the
 * shapes here are written by hand, with only the fields the page reads, from
 * packages/server/src/activation (service.ts renderFlow/renderTarget, delivery's
 * flowRun and DeliveryStats).
 */
import type { ApiClient } from "./client.js";

export const FLOWSERVICE = "/data/foundation/flowservice";
/** segmentd's connection spec ids (connection-specs.ts). */
export const SPEC_IDS = { webhook: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a61", nats: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a62", file: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a63" } as const;
export const PROFILE_FLOW_SPEC_ID = "71471eba-b620-49e4-90fd-23f1fa0174d8";

export interface Listing<T> {
  items: T[];
  _page?: { count: number; total: number; start: number; limit: number };
}

export interface DeliveryStats {
  sent: number;
  failed: number;
  retrying: number;
  dead: number;
  lagSeconds: number;
  lastError: { at: string; message: string; status?: number } | null;
}

export interface SegmentSelectorOut {
  type: string;
  value: { id: string; name?: string; createTime?: string };
}

export interface ProfileSelector {
  type: "JSON_PATH";
  value: { path: string; operator: "EXISTS" };
}

export interface DeliverySettings {
  maxBatchSize: number;
  maxWaitMs: number;
  concurrency: number;
  ratePerSecond: number;
  retryPeriodMs: number;
  timeoutMs: number;
}

export interface Flow {
  id: string;
  name: string;
  description?: string;
  state: "enabled" | "disabled";
  createdAt: number;
  updatedAt: number;
  etag: string;
  targetConnectionIds: string[];
  transformations: Array<{ name: string; params: { segmentSelectors: { selectors: SegmentSelectorOut[] }; profileSelectors: { selectors: ProfileSelector[] } } }>;
  delivery: DeliverySettings;
  inheritedAttributes?: { targetConnections: Array<{ id: string; connectionSpec: { id: string } }> };
  /** Present when the server runs a deliverer. */
  deliveryStats?: DeliveryStats;
}

export interface TargetConnection {
  id: string;
  name: string;
  baseConnectionId: string;
  connectionSpec: { id: string };
  /** A webhook's: httpEndpoint and headers (values shown as "***"); a NATS subject's: subject and serverUrl; a file export's settings. */
  params: { httpEndpoint?: string; headers?: Record<string, string>; subject?: string; serverUrl?: string; format?: string; frequency?: string };
}

export interface BaseConnection {
  id: string;
  name: string;
  auth?: { specName: string; params?: Record<string, string> };
}

export interface RunError {
  code: string;
  message: string;
  at?: string;
}

export interface FlowRun {
  id: string;
  flowId: string;
  createdAt: number | string;
  updatedAt: number | string;
  metrics: {
    recordSummary: { inputRecordCount: number; outputRecordCount: number; failedRecordCount: number };
    segmentd?: { kind: string; failedAttempts: number };
  };
  activities?: Array<{ name: string }>;
  statusSummary: { status: string; errors?: RunError[] };
}

export interface DeadLetter {
  unitId: string;
  webhookId: string;
  items: number;
  attempts: number;
  lastError: { at?: string; message?: string; status?: number } | null;
}

/** A file flow's export run (GET /flows/{id}/exports), with its manifest once it succeeded. */
export interface ExportRun {
  runId: string;
  status: "queued" | "running" | "success" | "failed" | "expired" | string;
  trigger: "schedule" | "manual" | string;
  scheduledFor: string | null;
  rows: number;
  bytes: number;
  error: string | null;
  createdAt?: string | number;
  startedAt?: string | number | null;
  finishedAt?: string | number | null;
  manifest: { files: Array<{ name: string; audienceId: string; mode: string; rows: number; bytes: number; sha256: string }> } | null;
}

export interface Created {
  id: string;
  etag: string;
  signingSecret?: string;
}

const enc = encodeURIComponent;

export const destinationsApi = {
  flows(api: ApiClient, start = 0): Promise<Listing<Flow>> {
    return api.request("GET", `${FLOWSERVICE}/flows?start=${start}&limit=100`);
  },
  async flow(api: ApiClient, id: string): Promise<Flow> {
    return (await api.request<Listing<Flow>>("GET", `${FLOWSERVICE}/flows/${enc(id)}`)).items[0]!;
  },
  targets(api: ApiClient, start = 0): Promise<Listing<TargetConnection>> {
    return api.request("GET", `${FLOWSERVICE}/targetConnections?start=${start}&limit=100`);
  },
  async target(api: ApiClient, id: string): Promise<TargetConnection> {
    return (await api.request<Listing<TargetConnection>>("GET", `${FLOWSERVICE}/targetConnections/${enc(id)}`)).items[0]!;
  },
  async connection(api: ApiClient, id: string): Promise<BaseConnection> {
    return (await api.request<Listing<BaseConnection>>("GET", `${FLOWSERVICE}/connections/${enc(id)}`)).items[0]!;
  },
  createConnection(api: ApiClient, body: unknown): Promise<Created> {
    return api.request("POST", `${FLOWSERVICE}/connections`, body);
  },
  createTarget(api: ApiClient, body: unknown): Promise<Created> {
    return api.request("POST", `${FLOWSERVICE}/targetConnections`, body);
  },
  createFlow(api: ApiClient, body: unknown): Promise<Created> {
    return api.request("POST", `${FLOWSERVICE}/flows`, body);
  },
  deleteFlow(api: ApiClient, id: string): Promise<void> {
    return api.request("DELETE", `${FLOWSERVICE}/flows/${enc(id)}`);
  },
  deleteTarget(api: ApiClient, id: string): Promise<void> {
    return api.request("DELETE", `${FLOWSERVICE}/targetConnections/${enc(id)}`);
  },
  deleteConnection(api: ApiClient, id: string): Promise<void> {
    return api.request("DELETE", `${FLOWSERVICE}/connections/${enc(id)}`);
  },
  setState(api: ApiClient, id: string, op: "enable" | "disable"): Promise<Created> {
    return api.request("POST", `${FLOWSERVICE}/flows/${enc(id)}/action?op=${op}`);
  },
  /** AEP's "Activate now": every selected audience's current members again. */
  resend(api: ApiClient, id: string): Promise<{ runId: string }> {
    return api.request("POST", `${FLOWSERVICE}/flows/${enc(id)}/resend`, {});
  },
  rotateSecret(api: ApiClient, id: string): Promise<Created> {
    return api.request("POST", `${FLOWSERVICE}/flows/${enc(id)}/signingSecret`);
  },
  runs(api: ApiClient, flowId: string, limit = 20): Promise<Listing<FlowRun>> {
    const q = new URLSearchParams({ property: `flowId==${flowId}`, limit: String(limit) });
    return api.request("GET", `${FLOWSERVICE}/runs?${q.toString()}`);
  },
  async deadLetters(api: ApiClient, flowId: string): Promise<DeadLetter[]> {
    return (await api.request<Listing<DeadLetter>>("GET", `${FLOWSERVICE}/flows/${enc(flowId)}/deadLetters`)).items;
  },
  replayDead(api: ApiClient, flowId: string): Promise<{ replayed: number }> {
    return api.request("POST", `${FLOWSERVICE}/flows/${enc(flowId)}/deadLetters/replay`, {});
  },
  /** A file flow's export runs, newest first. */
  exportRuns(api: ApiClient, flowId: string, limit = 20): Promise<Listing<ExportRun>> {
    return api.request("GET", `${FLOWSERVICE}/flows/${enc(flowId)}/exports?limit=${limit}`);
  },
  /** "Export now": a run outside the schedule. */
  exportNow(api: ApiClient, flowId: string): Promise<{ runId: string }> {
    return api.request("POST", `${FLOWSERVICE}/flows/${enc(flowId)}/exports`);
  },
  /** One file of a successful run, as the browser saves it (a .gz file arrives decompressed). */
  downloadFile(api: ApiClient, flowId: string, runId: string, name: string): Promise<Blob> {
    return api.download(`${FLOWSERVICE}/flows/${enc(flowId)}/exports/${enc(runId)}/files/${enc(name)}`);
  },
};
