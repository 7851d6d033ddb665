/**
 * Previews and estimates (segmentation-api.md §7). Creating a preview starts
 * one evaluation of the expression that serves both `/preview/{id}` (sample
 * members) and `/estimate/{id}` (estimated size with a 95% confidence
 * interval). States NEW → RUNNING → RESULT_READY | FAILED.
 *
 * Sampling as AEP describes it: fewer than 1M profiles → all of them; 1M to
 * 20M → a 1M sample; more → 5%. The sample is a deterministic hash of the
 * profile id (the same profiles every time while the data does not change).
 * The estimate scales the sample's match rate to the total, with the normal
 * approximation's standard error (finite-population corrected):
 *   p = matched / read, size = p × N, SE = N × sqrt(p(1−p)/read × (N−read)/(N−1)).
 * Evaluation runs on the resident columnar snapshot (refreshed from the
 * store's change feed, shared with jobs): the predicate runs over every
 * profile's columns and the sample is counted from the result, so an estimate
 * reads nothing from the store but the changed profiles. Without a snapshot
 * cache, one scan of the store.
 *
 * Opted-out profiles are excluded, as for a definition with the default
 * dataGovernancePolicy (decisions §2).
 */
import type { QueryExpander } from "../../services/definition-analysis.js";
import { randomUUID } from "node:crypto";
import { compile, format, parse, PqlError, toBoolean, walk, type Query } from "@segmentd/pql";
import type { Clock } from "../../platform/clock.js";
import type { Logger } from "../../platform/logger.js";
import type { MembershipReads } from "../../profiles/store.js";
import { NO_MERGE_POLICY, type MergePolicySpec, type TenantScope } from "../../profiles/types.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { membersOfPids, statusOverrides, type Snapshot, type SnapshotPart, type SnapshotStore } from "../columnar/snapshot.js";
import { ApiError, badRequest, ErrorCodes, notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../../platform/config.js";
import { costRefusal, EvaluationBudget } from "../../services/evaluation-budget.js";
import { usesEvents } from "../engine/uses-events.js";
import { BatchErrorCodes } from "../errors.js";
import type { BatchTenant } from "../jobs/job-service.js";
import type { BatchRepository } from "../store/types.js";
import type { EvaluationPool } from "../pool/evaluation-pool.js";
import { partFlags } from "../pool/part-flags.js";
import { mergeSamples, type FleetReads, type SampleCount } from "./fleet-reads.js";

export type { SampleCount } from "./fleet-reads.js";

const KIND = "preview" as const;
export const FULL_DATA_LIMIT = 1_000_000;
export const LARGE_DATA_LIMIT = 20_000_000;
/** Sample members kept for GET /preview pages. */
const MAX_KEPT_MEMBERS = 10_000;

export type PreviewState = "NEW" | "RUNNING" | "RESULT_READY" | "FAILED";

export interface PreviewInput {
  predicateExpression?: unknown;
  predicateType?: unknown;
  predicateModel?: unknown;
  graphType?: unknown;
}

interface StoredPreview {
  previewId: string;
  previewExecutionId: number;
  expression: string;
  graphType: "none" | "pdg";
  state: PreviewState;
  error?: string;
  totalRows: number;
  numRowsToRead: number;
  profilesReadSoFar: number;
  profilesMatchedSoFar: number;
  byNamespace: Record<string, number>;
  /** Matching sampled profiles: id and identities ("ns:id"). */
  members: Array<{ profileId: string; identities: string[] }>;
  createdAt: number;
}

export interface Estimate {
  estimatedSize: number;
  numRowsToRead: number;
  estimatedNamespaceDistribution: Array<{ namespaceId: string; profilesMatchedSoFar: number }>;
  state: PreviewState;
  profilesReadSoFar: number;
  standardError: number;
  error: { description: string; traceback: string };
  profilesMatchedSoFar: number;
  totalRows: number;
  confidenceInterval: "95%";
  /** segmentd extension: the 95% interval itself. */
  estimatedSizeRange: { low: number; high: number };
  _links: { preview: string };
}

/** Sample size for a population, as AEP documents it. */
export function sampleSize(total: number): number {
  if (total < FULL_DATA_LIMIT) return total;
  if (total <= LARGE_DATA_LIMIT) return FULL_DATA_LIMIT;
  return Math.ceil(total * 0.05);
}

/** The merge rule a preview's graphType asks for (the builder's estimates use it too). */
export function previewPolicy(graphType: "none" | "pdg" | undefined): MergePolicySpec {
  return graphType === "pdg" ? { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } } : NO_MERGE_POLICY;
}

/** A stable value in [0, 1) for a profile id (FNV-1a). */
function unit(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 4294967296;
}

export function estimateFrom(p: { totalRows: number; read: number; matched: number }): { size: number; standardError: number; low: number; high: number } {
  const { totalRows: n, read, matched } = p;
  if (read === 0) return { size: 0, standardError: 0, low: 0, high: 0 };
  const rate = matched / read;
  const fpc = n > 1 ? Math.max(0, (n - read) / (n - 1)) : 0;
  const se = n * Math.sqrt((rate * (1 - rate)) / read * fpc);
  const size = Math.round(rate * n);
  return { size, standardError: se, low: Math.max(0, Math.floor(size - 1.96 * se)), high: Math.ceil(size + 1.96 * se) };
}


/**
 * On the resident snapshot: one columnar predicate over every profile (in the evaluation pool
 * when there is one), then the sample (a stable hash of the profile id) is counted. The whole
 * snapshot is evaluated: that is cheaper than gathering the sample's rows. Previews and the
 * builder's live estimates count through it.
 */
export async function sampleOnSnapshot(snap: Snapshot, query: Query, fraction: number, now: number, inSegment: ReadonlyMap<string, Float64Array>, keepMembers: number, budget: EvaluationBudget, pool: EvaluationPool | null): Promise<SampleCount> {
  return countSample(snap, await entryFlags(snap, query, now, inSegment, budget, pool), fraction, keepMembers);
}

/** The predicate's flag of every entry row, per part of the snapshot (null for an empty part). */
export function entryFlags(snap: Snapshot, query: Query, now: number, inSegment: ReadonlyMap<string, Float64Array>, budget: EvaluationBudget, pool: EvaluationPool | null): Promise<Array<Uint8Array | null>> {
  const members = new Map<string, Uint8Array>();
  for (const [id, list] of inSegment) members.set(id, membersOfPids(snap, list));
  return partFlags(pool, snap, query, now, statusOverrides(snap, members), budget);
}

/** Ordinals counted between yields to the event loop (a few ms each at most). */
const COUNT_SLICE = 65_536;

/**
 * The sample's profiles (a stable hash of the id) counted from entry flags: a profile matches through
 * an entry that has not opted out. On the main thread (it reads the profile ids), in slices with a
 * yield between them, so a million profiles never hold the event loop at once.
 */
export async function countSample(snap: Snapshot, flags: ReadonlyArray<Uint8Array | null>, fraction: number, keepMembers: number): Promise<SampleCount> {
  return (await countSampleBySlot(snap, flags, fraction, keepMembers, null, 1))[0]!;
}

/**
 * countSample apart per slot (a worker's shard counted per partition, #44): `slots` gives each
 * global ordinal's slot in 0…n-1 (-1: not counted); null: every profile in slot 0. Up to
 * `keepMembers` members are kept per slot.
 */
export async function countSampleBySlot(snap: Snapshot, flags: ReadonlyArray<Uint8Array | null>, fraction: number, keepMembers: number, slots: Int32Array | null, n: number): Promise<SampleCount[]> {
  const out: SampleCount[] = Array.from({ length: n }, () => ({ read: 0, matched: 0, byNamespace: {}, members: [] }));
  for (const [k, { part, masked, offset }] of snap.parts().entries()) {
    const matches = flags[k];
    if (matches === null || matches === undefined) continue;
    const inSample = fraction < 1 ? sampleMask(part, fraction) : null;
    // A row's namespace codes are distinct (PartBuilder), so the matching row's codes count once each.
    const spaces = part.namespaces.length;
    const byCode = new Float64Array(n * spaces);
    const { ordinalStart, optedOut, nsStart, nsCodes } = part;
    for (let o = 0; o < part.ordinals; o++) {
      if (o % COUNT_SLICE === COUNT_SLICE - 1) await new Promise((res) => setImmediate(res));
      if (masked !== null && masked[o] === 1) continue;
      if (inSample !== null && inSample[o] === 0) continue;
      const slot = slots === null ? 0 : slots[offset + o]!;
      if (slot < 0) continue;
      const r = out[slot]!;
      r.read++;
      let matchRow = -1;
      for (let x = ordinalStart[o]!; x < ordinalStart[o + 1]!; x++) {
        if (matches[x] === 1 && optedOut[x] === 0) {
          matchRow = x;
          break;
        }
      }
      if (matchRow < 0) continue;
      r.matched++;
      for (let x = nsStart[matchRow]!; x < nsStart[matchRow + 1]!; x++) byCode[slot * spaces + nsCodes[x]!]!++;
      if (r.members.length < keepMembers) r.members.push({ profileId: part.profileIds[o]!, identities: part.identitiesOf(matchRow) });
    }
    out.forEach((r, slot) => {
      part.namespaces.forEach((ns, code) => {
        const c = byCode[slot * spaces + code]!;
        if (c > 0) r.byNamespace[ns] = (r.byNamespace[ns] ?? 0) + c;
      });
    });
  }
  return out;
}

/**
 * The sample's profiles of a part (1: in it), kept with the part: hashing a million ids costs
 * ~50 ms of the main thread, and every later preview of the same data reads the same sample.
 */
const samples = new WeakMap<SnapshotPart, { fraction: number; mask: Uint8Array }>();

function sampleMask(part: SnapshotPart, fraction: number): Uint8Array {
  const kept = samples.get(part);
  if (kept !== undefined && kept.fraction === fraction) return kept.mask;
  const mask = new Uint8Array(part.ordinals);
  for (let o = 0; o < part.ordinals; o++) mask[o] = unit(part.profileIds[o]!) < fraction ? 1 : 0;
  samples.set(part, { fraction, mask });
  return mask;
}

/** Stored members of the definitions the expression names with inSegment (the snapshot keeps no statuses). */
export async function inSegmentMemberPids(profiles: MembershipReads, scope: TenantScope, query: Query): Promise<Map<string, Float64Array>> {
  const ids = new Set<string>();
  walk(query, (n) => {
    if (n.type === "Call" && n.name === "inSegment" && n.args[0]?.type === "Literal" && typeof n.args[0].value === "string") ids.add(n.args[0].value);
  });
  const out = new Map<string, Float64Array>();
  for (const id of ids) out.set(id, await profiles.listMemberPids(scope, id, "realized"));
  return out;
}

/** Scans or the resident snapshot, and the realized members `inSegment` reads. */
export type PreviewStore = SnapshotStore & MembershipReads;

export class PreviewService {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly profiles: PreviewStore,
    private readonly repo: BatchRepository,
    private readonly clock: Clock,
    private readonly logger?: Pick<Logger, "error">,
    /** Resident snapshots (shared with the job runner): estimates without a scan. */
    private readonly snapshots?: SnapshotCache,
    /** Computed attribute paths become their aggregates, as a definition's save makes them (computed/expand.ts). */
    private readonly expand?: QueryExpander,
    /** On a hub whose workers evaluate (#44): the shards answer, not a snapshot here. */
    private readonly fleet?: FleetReads,
  ) {}

  async create(ctx: BatchTenant & { limits?: SandboxLimits }, input: PreviewInput): Promise<{ state: PreviewState; previewQueryId: string; previewQueryStatus: PreviewState; previewId: string; previewExecutionId: number }> {
    if (typeof input.predicateExpression !== "string" || input.predicateExpression.trim() === "") {
      throw badRequest("predicateExpression is required: the PQL text to preview", BatchErrorCodes.badPreview);
    }
    if (input.predicateType !== undefined && input.predicateType !== "pql/text") throw badRequest('predicateType must be "pql/text"', BatchErrorCodes.badPreview);
    const graphType = input.graphType ?? "none";
    if (graphType !== "none" && graphType !== "pdg") throw badRequest('graphType must be "none" or "pdg"', BatchErrorCodes.badPreview);
    // The same limit as a definition's expression: a preview evaluates it over every profile.
    const limits = ctx.limits ?? DEFAULT_LIMITS;
    const maxBytes = limits.expressionBytes;
    const bytes = Buffer.byteLength(input.predicateExpression, "utf8");
    if (bytes > maxBytes) throw new ApiError(400, ErrorCodes.limit, `predicateExpression is ${bytes} bytes; the limit is ${maxBytes} bytes`);
    let query: Query;
    try {
      query = parse(input.predicateExpression);
    } catch (e) {
      if (e instanceof PqlError) throw badRequest(`Invalid predicateExpression: ${e.message}`, BatchErrorCodes.badPreview);
      throw e;
    }
    let text = input.predicateExpression;
    if (this.expand !== undefined) {
      const expanded = await this.expand(ctx, query);
      if (expanded !== query) text = format(expanded);
      query = expanded;
    }
    // Refused before anything is stored: a preview evaluates the expression over every profile.
    const costly = costRefusal(text, query, limits, "predicateExpression");
    if (costly !== null) throw costly;
    const now = this.clock.now();
    // AEP's preview ids are opaque base64 strings.
    const previewId = Buffer.from(`${ctx.sandbox.sandboxName}:${randomUUID()}`).toString("base64url");
    const stored: StoredPreview = {
      previewId,
      previewExecutionId: 0,
      // What is evaluated: computed attributes' aggregates in place of their paths.
      expression: text,
      graphType,
      state: "NEW",
      totalRows: 0,
      numRowsToRead: 0,
      profilesReadSoFar: 0,
      profilesMatchedSoFar: 0,
      byNamespace: {},
      members: [],
      createdAt: now,
    };
    const scope = scopeOf(ctx);
    await this.repo.insert(KIND, { scope, id: previewId, status: "NEW", creationTime: now, doc: stored });
    const run = this.run(ctx, stored, new EvaluationBudget(limits, { deadline: true })).catch((err: unknown) => this.logger?.error({ err, previewId }, "preview failed"));
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return { state: "NEW", previewQueryId: previewId, previewQueryStatus: "NEW", previewId, previewExecutionId: 0 };
  }

  /** Resolves when every started preview has finished (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.running]);
  }

  private async save(ctx: BatchTenant, p: StoredPreview): Promise<void> {
    await this.repo.update(KIND, { scope: scopeOf(ctx), id: p.previewId, status: p.state, creationTime: p.createdAt, doc: p });
  }

  private async run(ctx: BatchTenant, p: StoredPreview, budget: EvaluationBudget): Promise<void> {
    const scope = scopeOf(ctx);
    try {
      const query = parse(p.expression);
      const policy = previewPolicy(p.graphType);
      const total = await this.profiles.countProfiles(scope);
      const want = sampleSize(total);
      const fraction = total === 0 ? 1 : want / total;
      p.state = "RUNNING";
      p.totalRows = total;
      p.numRowsToRead = want;
      await this.save(ctx, p);
      const now = this.clock.now();
      if (this.fleet !== undefined) {
        const answers = await this.fleet.read(scope, { kind: "sample", graphType: p.graphType, expressions: [p.expression], fraction, keepMembers: MAX_KEPT_MEMBERS, now });
        this.add(p, mergeSamples(answers, 1, MAX_KEPT_MEMBERS)[0]!);
      } else if (this.snapshots !== undefined) {
        const snap = await this.snapshotFor(scope, policy, query);
        const members = await inSegmentMemberPids(this.profiles, scope, query);
        await this.evaluateOnSnapshot(p, query, snap, fraction, now, members, budget);
      } else await this.evaluateByScan(p, query, scope, policy, fraction, now, budget);
      p.state = "RESULT_READY";
    } catch (e) {
      p.state = "FAILED";
      p.error = e instanceof Error ? e.message : String(e);
    }
    await this.save(ctx, p);
  }

  private snapshotFor(scope: TenantScope, policy: MergePolicySpec, query: Query): Promise<Snapshot> {
    return this.snapshots!.get(this.profiles, scope, policy, { events: policy.identityGraph.type !== "pdg" || usesEvents(query) });
  }

  private async evaluateOnSnapshot(p: StoredPreview, query: Query, snap: Snapshot, fraction: number, now: number, inSegment: Map<string, Float64Array>, budget: EvaluationBudget): Promise<void> {
    this.add(p, await sampleOnSnapshot(snap, query, fraction, now, inSegment, MAX_KEPT_MEMBERS, budget, this.snapshots!.pool));
  }

  private add(p: StoredPreview, r: SampleCount): void {
    p.profilesReadSoFar += r.read;
    p.profilesMatchedSoFar += r.matched;
    for (const [ns, n] of Object.entries(r.byNamespace)) p.byNamespace[ns] = (p.byNamespace[ns] ?? 0) + n;
    p.members.push(...r.members);
  }

  /** Without a snapshot cache: one scan of the store. */
  private async evaluateByScan(p: StoredPreview, query: Query, scope: TenantScope, policy: MergePolicySpec, fraction: number, now: number, budget: EvaluationBudget): Promise<void> {
    const evaluate = compile(query);
    for await (const chunk of this.profiles.scanProfiles(scope, policy, { chunkSize: 2000, events: p.graphType !== "pdg" || usesEvents(query) })) {
      let i = 0;
      while (i < chunk.length) {
        const pid = chunk[i]!.profileId;
        const inSample = fraction >= 1 || unit(pid) < fraction;
        let match = false;
        const identities = new Set<string>();
        for (; i < chunk.length && chunk[i]!.profileId === pid; i++) {
          const entry = chunk[i]!;
          if (!inSample || match || entry.optedOut) continue;
          if (toBoolean(budget.run(() => evaluate({ profile: entry.entity, events: entry.events.map((e) => e.body), now })))) {
            match = true;
            for (const id of entry.identities) identities.add(`${id.namespace}:${id.id}`);
          }
        }
        if (!inSample) continue;
        p.profilesReadSoFar++;
        if (!match) continue;
        p.profilesMatchedSoFar++;
        for (const ns of new Set([...identities].map((x) => x.slice(0, x.indexOf(":"))))) p.byNamespace[ns] = (p.byNamespace[ns] ?? 0) + 1;
        if (p.members.length < MAX_KEPT_MEMBERS) p.members.push({ profileId: pid, identities: [...identities] });
      }
    }
  }

  private async load(ctx: BatchTenant, id: string): Promise<StoredPreview> {
    const r = await this.repo.get<StoredPreview>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Preview", id);
    return r.doc;
  }

  async results(ctx: BatchTenant, id: string, offset: number, limit: number): Promise<{ state: PreviewState; results: Array<Record<string, unknown>>; total: number }> {
    const p = await this.load(ctx, id);
    const page = p.members.slice(offset, offset + limit);
    const results = page.map((m) => ({
      [m.profileId]: {
        _href: `/data/core/ups/models/profile/${m.profileId}`,
        endCustomerIds: Object.fromEntries(m.identities.map((x) => [x, { _href: `/data/core/ups/models/profile/${encodeURIComponent(x)}` }])),
      },
    }));
    return { state: p.state, results, total: p.members.length };
  }

  async estimate(ctx: BatchTenant, id: string): Promise<Estimate> {
    const p = await this.load(ctx, id);
    const e = estimateFrom({ totalRows: p.totalRows, read: p.profilesReadSoFar, matched: p.profilesMatchedSoFar });
    return {
      estimatedSize: e.size,
      numRowsToRead: p.numRowsToRead,
      estimatedNamespaceDistribution: Object.entries(p.byNamespace)
        .sort((a, b) => a[0].localeCompare(b[0]))
        .map(([namespaceId, n]) => ({ namespaceId, profilesMatchedSoFar: n })),
      state: p.state,
      profilesReadSoFar: p.profilesReadSoFar,
      standardError: e.standardError,
      error: { description: p.error ?? "", traceback: "" },
      profilesMatchedSoFar: p.profilesMatchedSoFar,
      totalRows: p.totalRows,
      confidenceInterval: "95%",
      estimatedSizeRange: { low: e.low, high: e.high },
      _links: { preview: `/data/core/ups/preview/${id}` },
    };
  }

  async delete(ctx: BatchTenant, id: string): Promise<void> {
    if (!(await this.repo.delete(KIND, scopeOf(ctx), id))) throw notFound("Preview", id);
  }
}
