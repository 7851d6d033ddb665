/**
 * The definitions an engine evaluates, compiled once per change instead of per
 * event. One catalog serves both engines: `continuous` (streaming) and
 * `synchronous` (edge). Entries are rebuilt lazily after a definition or merge
 * policy of the sandbox changes (bus events), so a request never compiles.
 */
import { classify, compilePredicate, parse } from "@segmentd/pql";
import type { EventBus } from "../platform/bus.js";
import type { MergePolicySpec } from "../profiles/types.js";
import { tenantKey } from "../platform/tenant.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { DefinitionRecord, MetadataStore, MergePolicyRecord, TenantScope } from "../stores/types.js";
import { isPublished } from "../stores/records.js";
import { footprintOf, ReverseIndex, type DefinitionFootprint } from "./reverse-index.js";

export type EvaluationMethod = "continuous" | "synchronous";

export interface PredicateContext {
  profile: Record<string, unknown>;
  events: readonly Record<string, unknown>[];
  now: number;
}

export interface LiveDefinition {
  id: string;
  name: string;
  mergePolicyId: string;
  policy: MergePolicySpec;
  queryType: string | null;
  /** True when the segment holds for this profile and events at `now` (PQL `true`, nothing else). */
  predicate: (ctx: PredicateContext) => boolean;
  footprint: DefinitionFootprint;
  /** Longest event window in ms (null when the definition has no event condition). */
  windowMs: number | null;
  /** Every distinct event window in ms (empty when the definition has no event condition): when an event leaves any of them the result can change. */
  windowsMs: number[];
  excludeOptOut: boolean;
  /**
   * True when no evaluation method other than streaming writes this definition's
   * memberships (continuous only: batch and edge disabled). Only then does the
   * streaming engine's state know the hub's membership status well enough to pass
   * it as `from` (see engine.ts, "The `from` rule").
   */
  streamingOnly: boolean;
}

export interface LiveSet {
  definitions: LiveDefinition[];
  index: ReverseIndex<LiveDefinition>;
  byId: Map<string, LiveDefinition>;
  /** The longest event window of the set: how much event history the engine must keep per profile. */
  maxWindowMs: number;
}

const PAGE = 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

function policySpec(p: MergePolicyRecord | undefined): MergePolicySpec {
  if (!p) return { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
  const am = p.policy.attributeMerge;
  return {
    id: p.policy.id,
    identityGraph: { type: p.policy.identityGraph.type },
    attributeMerge: am.order ? { type: am.type, order: am.order } : { type: am.type },
  };
}

export function liveDefinition(record: DefinitionRecord, policy: MergePolicyRecord | undefined): LiveDefinition {
  const d = record.definition;
  const query = parse(record.canonicalText);
  // The predicate reading: a segment's top level is a boolean position (pql.md §6.4), so a
  // `select ...` or filter result counts as true when non-empty, not only a literal `true`.
  const run = compilePredicate(query);
  const c = classify(query);
  const windows = c.events.map((e) => e.windowMs ?? DAY_MS);
  return {
    id: d.id,
    name: d.name,
    mergePolicyId: d.mergePolicyId,
    policy: policySpec(policy),
    queryType: d.classification.queryType,
    // The compiled query only reads the events: it is the predicate itself (no wrapper call, no copy).
    predicate: run as (ctx: PredicateContext) => boolean,
    footprint: footprintOf(query),
    windowMs: windows.length === 0 ? null : Math.max(...windows),
    windowsMs: [...new Set(windows)].sort((a, b) => a - b),
    excludeOptOut: d.dataGovernancePolicy.excludeOptOut,
    streamingOnly: d.evaluationInfo.continuous.enabled && !d.evaluationInfo.batch.enabled && !d.evaluationInfo.synchronous.enabled,
  };
}

function isLive(method: EvaluationMethod, record: DefinitionRecord, policy: MergePolicyRecord | undefined): boolean {
  const d = record.definition;
  if (!isPublished(d)) return false;
  if (method === "synchronous") {
    // decisions §1: edge-enabled, edge-eligible and tied to the merge policy active on edge.
    return d.evaluationInfo.synchronous.enabled && d.classification.synchronous && policy?.policy.isActiveOnEdge === true;
  }
  return d.evaluationInfo.continuous.enabled && d.classification.continuous;
}

/** A definition change as the catalog's followers hear it: after the catalog dropped what it held of the sandbox. */
export interface CatalogChange {
  tenant: TenantScope;
  change: "created" | "updated" | "deleted";
  definitionId: string;
}

export class DefinitionCatalog {
  private readonly cache = new Map<string, Promise<LiveSet>>();
  private readonly unsubscribe: Array<() => void> = [];
  private readonly followers = new Set<(e: CatalogChange) => void>();

  constructor(
    private readonly store: MetadataStore,
    bus?: EventBus,
  ) {
    if (bus) {
      const drop = (e: { tenant: TenantScope }) => this.invalidate(e.tenant);
      // Followers hear a definition change only once the engines' next read loads it (a backfill's fence comes after).
      const changed = (e: CatalogChange) => {
        this.invalidate(e.tenant);
        for (const f of this.followers) f(e);
      };
      this.unsubscribe.push(bus.subscribe("definition.changed", changed), bus.subscribe("mergePolicy.changed", drop));
    }
  }

  close(): void {
    for (const u of this.unsubscribe) u();
    this.followers.clear();
  }

  /** Calls `f` after each definition change the catalog took (bus events); returns the unsubscribe. */
  follow(f: (e: CatalogChange) => void): () => void {
    this.followers.add(f);
    return () => this.followers.delete(f);
  }

  invalidate(scope: TenantScope): void {
    for (const method of ["continuous", "synchronous"] as const) this.cache.delete(key(scope, method));
  }

  /** Drops every sandbox's sets (another hub's changes may have been missed: cluster/hub-invalidation.ts). */
  invalidateAll(): void {
    this.cache.clear();
  }

  get(tenant: TenantContext, method: EvaluationMethod): Promise<LiveSet> {
    const scope = scopeOf(tenant);
    const k = key(scope, method);
    let p = this.cache.get(k);
    if (!p) {
      p = this.load(scope, method);
      // A failed load must not stick: the next call retries.
      p.catch(() => this.cache.delete(k));
      this.cache.set(k, p);
    }
    return p;
  }

  private async load(scope: TenantScope, method: EvaluationMethod): Promise<LiveSet> {
    const records: DefinitionRecord[] = [];
    for (let offset = 0; ; offset += PAGE) {
      const page = await this.store.definitions.list(scope, {
        filters: { [method]: true },
        sort: [{ field: "id", direction: "asc" }],
        offset,
        limit: PAGE,
      });
      records.push(...page.items);
      if (page.items.length < PAGE) break;
    }
    const policies = await this.store.mergePolicies.getMany(scope, [...new Set(records.map((r) => r.definition.mergePolicyId))]);
    const definitions = records
      .filter((r) => isLive(method, r, policies.get(r.definition.mergePolicyId)))
      .map((r) => liveDefinition(r, policies.get(r.definition.mergePolicyId)));
    const maxWindowMs = Math.max(0, ...definitions.map((d) => d.windowMs ?? 0));
    return { definitions, index: new ReverseIndex(definitions), byId: new Map(definitions.map((d) => [d.id, d])), maxWindowMs };
  }
}

function key(scope: TenantScope, method: EvaluationMethod): string {
  return `${tenantKey(scope)}\u0000${method}`;
}
