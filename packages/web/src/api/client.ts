/**
 * The one place the UI talks to segmentd. Every call carries the session's
 * headers (Adobe's: Authorization, x-api-key, x-gw-ims-org-id,
 * x-sandbox-name) and same-origin relative URLs only — the UI never contacts
 * another host. Failures become ApiFailure with a sentence to show.
 */
import { methodFilter } from "../methods.js";
import type { Session } from "../session.js";
import { ApiFailure, describeFailure, statusWords } from "./errors.js";
import type {
  AudienceMetrics,
  Backfill,
  BuilderEstimates,
  BuilderPalette,
  ComputedAttribute,
  DatasetExpiration,
  DefinitionPage,
  EligibilityAnswer,
  Explanation,
  ImpactAnswer,
  MemberPage,
  MembershipStatus,
  MergePolicy,
  Method,
  MetricWindow,
  QuotaEntry,
  SegmentDefinition,
  SegmentJob,
  UiConfig,
  WorkOrder,
} from "./types.js";

const UPS = "/data/core/ups";

/** A batch schedule as GET /config/schedules answers it (not in types.ts yet: the fields the tool reads). */
export interface BatchSchedule {
  id: string;
  name: string;
  type: string;
  properties?: { segments?: string[] };
  schedule: string;
  state: "active" | "inactive";
  nextRunTime?: string | number | null;
}

export interface DefinitionDraft {
  name: string;
  description: string;
  expression: string;
  mergePolicyId: string;
  method: Method;
}

export interface ListOptions {
  start: number;
  limit: number;
  method?: Method;
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

export async function fetchUiConfig(): Promise<UiConfig> {
  try {
    const res = await fetch("/ui/config.json", { headers: { accept: "application/json" } });
    if (!res.ok) return { devTenant: false };
    return (await res.json()) as UiConfig;
  } catch {
    return { devTenant: false };
  }
}

export class ApiClient {
  constructor(readonly session: Session) {}

  /** The session's credentials (and its sandbox) as request headers. */
  private authHeaders(sandbox: boolean): Record<string, string> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.session.token}`,
      "x-api-key": this.session.apiKey,
      "x-gw-ims-org-id": this.session.orgId,
    };
    if (sandbox) headers["x-sandbox-name"] = this.session.sandboxName;
    return headers;
  }

  async request<T>(method: string, path: string, body?: unknown, sandbox = true): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json", ...this.authHeaders(sandbox) };
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    } catch {
      throw new ApiFailure(0, statusWords(0));
    }
    const parsed = await readBody(res);
    if (!res.ok) throw describeFailure(res.status, parsed);
    return parsed as T;
  }

  /** A file the API serves (an export run's), with the session's headers: links cannot carry them. */
  async download(path: string): Promise<Blob> {
    let res: Response;
    try {
      res = await fetch(path, { headers: this.authHeaders(true) });
    } catch {
      throw new ApiFailure(0, statusWords(0));
    }
    if (!res.ok) throw describeFailure(res.status, await readBody(res));
    return res.blob();
  }

  listDefinitions(o: ListOptions): Promise<DefinitionPage> {
    const q = new URLSearchParams({ start: String(o.start), limit: String(o.limit), sort: "updateTime:desc" });
    if (o.method) for (const [flag, value] of Object.entries(methodFilter(o.method))) q.set(`evaluationInfo.${flag}.enabled`, String(value));
    return this.request("GET", `${UPS}/segment/definitions?${q.toString()}`);
  }

  getDefinition(id: string): Promise<SegmentDefinition> {
    return this.request("GET", `${UPS}/segment/definitions/${encodeURIComponent(id)}`);
  }

  private bodyOf(d: DefinitionDraft): Record<string, unknown> {
    return {
      name: d.name,
      description: d.description,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: d.expression },
      ...(d.mergePolicyId === "" ? {} : { mergePolicyId: d.mergePolicyId }),
      // One flag per method, as AEP's audience tool writes them: the choice
      // is exclusive in the UI even though the API allows combinations.
      evaluationInfo: {
        batch: { enabled: d.method === "batch" },
        continuous: { enabled: d.method === "continuous" },
        synchronous: { enabled: d.method === "synchronous" },
      },
    };
  }

  createDefinition(d: DefinitionDraft): Promise<SegmentDefinition> {
    return this.request("POST", `${UPS}/segment/definitions`, this.bodyOf(d));
  }

  updateDefinition(id: string, d: DefinitionDraft): Promise<SegmentDefinition> {
    return this.request("PATCH", `${UPS}/segment/definitions/${encodeURIComponent(id)}`, this.bodyOf(d));
  }

  deleteDefinition(id: string): Promise<{ status: boolean; message: string }> {
    return this.request("DELETE", `${UPS}/segment/definitions/${encodeURIComponent(id)}`);
  }

  /** The pql/text form of a pql/json expression (the server's conversion endpoint). */
  async pqlText(expression: SegmentDefinition["expression"]): Promise<string> {
    const r = await this.request<{ expression: { value: string } }>("POST", `${UPS}/segment/conversion`, { expression });
    return r.expression.value;
  }

  eligibility(expression: string, mergePolicyId: string): Promise<EligibilityAnswer> {
    return this.request("POST", `${UPS}/segment/eligibility`, {
      expression: { type: "PQL", format: "pql/text", value: expression },
      ...(mergePolicyId === "" ? {} : { mergePolicyId }),
    });
  }

  async mergePolicies(): Promise<MergePolicy[]> {
    const r = await this.request<{ children: MergePolicy[] }>("GET", `${UPS}/config/mergePolicies?limit=100`);
    return r.children;
  }

  metrics(id: string, window: MetricWindow): Promise<AudienceMetrics> {
    return this.request("GET", `${UPS}/segment/definitions/${encodeURIComponent(id)}/metrics?window=${window}`);
  }

  /** The audience's backfill (continuous and edge audiences); a 404 when it never had one. */
  backfill(id: string): Promise<Backfill> {
    return this.request("GET", `${UPS}/segment/definitions/${encodeURIComponent(id)}/backfill`);
  }

  /** Runs the audience's backfill again (queued behind the sandbox's others). */
  rerunBackfill(id: string): Promise<Backfill> {
    return this.request("POST", `${UPS}/segment/definitions/${encodeURIComponent(id)}/backfill`);
  }

  /** Why one profile is in or out of the audience now (segmentd's explain extension). */
  explain(id: string, namespace: string, entityId: string): Promise<Explanation> {
    const q = new URLSearchParams({ entityId, entityIdNS: namespace });
    return this.request("GET", `${UPS}/segment/definitions/${encodeURIComponent(id)}/explain?${q.toString()}`);
  }

  /** A page of the audience's members; `start` is the previous page's `_page.next`. */
  members(id: string, status: MembershipStatus, limit: number, start?: string): Promise<MemberPage> {
    const q = new URLSearchParams({ status, limit: String(limit) });
    if (start !== undefined) q.set("start", start);
    return this.request("GET", `${UPS}/segment/definitions/${encodeURIComponent(id)}/members?${q.toString()}`);
  }

  /** Who would enter, leave and stay if the audience had this expression and merge policy; nothing is saved. */
  impact(id: string, expression: string, mergePolicyId: string, sampleSize: number): Promise<ImpactAnswer> {
    return this.request("POST", `${UPS}/segment/definitions/${encodeURIComponent(id)}/impact`, {
      expression: { type: "PQL", format: "pql/text", value: expression },
      ...(mergePolicyId === "" ? {} : { mergePolicyId }),
      sampleSize,
    });
  }

  /** The visual builder's palette: attributes and event types found in the sandbox's data. */
  builderFields(refresh = false): Promise<BuilderPalette> {
    return this.request("GET", `${UPS}/segment/builder/fields${refresh ? "?refresh=true" : ""}`);
  }

  /** The sandbox's computed attributes, every page of them (a sandbox holds at most its limit, 100 by default). */
  async computedAttributes(): Promise<ComputedAttribute[]> {
    const out: ComputedAttribute[] = [];
    for (let offset = 0; offset < 10_000; offset += 40) {
      const r = await this.request<{ computedAttributes: ComputedAttribute[]; _page: { totalCount: number } }>("GET", `/data/core/ca/attributes?limit=40&offset=${offset}&sortBy=name`);
      out.push(...r.computedAttributes);
      if (r.computedAttributes.length < 40 || out.length >= r._page.totalCount) break;
    }
    return out;
  }

  /** Estimated sizes of up to 20 expressions, each equal to what POST /preview + GET /estimate answer. */
  builderEstimate(expressions: string[], graphType: "none" | "pdg"): Promise<BuilderEstimates> {
    return this.request("POST", `${UPS}/segment/builder/estimate`, { expressions, graphType });
  }

  createJob(segmentId: string): Promise<SegmentJob> {
    return this.request("POST", `${UPS}/segment/jobs`, [{ segmentId }]);
  }

  /** The latest successful jobs, newest first (for "last evaluated"). */
  async recentSucceededJobs(): Promise<SegmentJob[]> {
    const r = await this.request<{ children: SegmentJob[] }>("GET", `${UPS}/segment/jobs?status=SUCCEEDED&limit=100&sort=creationTime:desc`);
    return r.children;
  }

  getJob(id: string): Promise<SegmentJob> {
    return this.request("GET", `${UPS}/segment/jobs/${encodeURIComponent(id)}`);
  }

  /** The sandbox's batch schedules (segmentd keeps at most one per sandbox). */
  async schedules(): Promise<BatchSchedule[]> {
    const r = await this.request<{ children: BatchSchedule[] }>("GET", `${UPS}/config/schedules?limit=100`);
    return r.children;
  }

  /** Turns a schedule on or off, or moves it to another cron (JSON Patch, as AEP's API takes it). */
  patchSchedule(id: string, change: { state?: "active" | "inactive"; schedule?: string }): Promise<void> {
    const ops = Object.entries(change).map(([k, value]) => ({ op: "replace", path: `/${k}`, value }));
    return this.request("PATCH", `${UPS}/config/schedules/${encodeURIComponent(id)}`, ops);
  }

  /** A daily schedule evaluating every batch audience ("*"), active. */
  createDailySchedule(cron: string): Promise<BatchSchedule> {
    return this.request("POST", `${UPS}/config/schedules`, {
      name: "Daily batch evaluation",
      type: "batch_segmentation",
      properties: { segments: ["*"] },
      schedule: cron,
      state: "active",
    });
  }

  async quotas(): Promise<QuotaEntry[]> {
    const r = await this.request<{ quotas: QuotaEntry[] }>("GET", "/data/core/hygiene/quota", undefined, false);
    return r.quotas;
  }

  async workOrders(): Promise<WorkOrder[]> {
    const r = await this.request<{ results: WorkOrder[] }>("GET", "/data/core/hygiene/workorder?limit=50", undefined, false);
    return r.results;
  }

  async expirations(): Promise<DatasetExpiration[]> {
    const r = await this.request<{ results: DatasetExpiration[] }>("GET", "/data/core/hygiene/ttl?limit=50", undefined, false);
    return r.results;
  }
}
