/**
 * Explain (issue #28): why a profile is in or out of an audience. The profile is
 * read as the engines read it — merged under the definition's merge policy, its
 * events, its memberships in `segmentMembership.ups` — and the expression is
 * evaluated once by the reference interpreter with tracing on (services/pql.ts
 * traceQuery), so the trace's root is the result; the membership store gives
 * the status and the transitions that led to it. Each profile attribute the
 * expression reads is credited to the fragment that supplied it, found by the
 * merge's own fold (profiles/merge.ts attributeSource) over the fragments of the
 * same read as the profile.
 */
import type { Clock } from "../platform/clock.js";
import { threadCpuMs } from "../platform/thread-cpu.js";
import type { ComputedAttributeExplanation } from "../services/computed-explanation.js";
import { attributeSources, datasetRank } from "../profiles/merge.js";
import { fragmentRecordId } from "../profiles/quarantine.js";
import type { MembershipReads, ProfileReads } from "../profiles/store.js";
import type { Identity, JsonObject, MembershipTransition, MergePolicySpec, ProfileFragment } from "../profiles/types.js";
import { normalizeNamespace } from "../profiles/validate.js";
import { expressionText, parseChecked, type ExpressionInput } from "../services/definition-analysis.js";
import { EvaluationBudget } from "../services/evaluation-budget.js";
import { ApiError, ErrorCodes, badRequest, notFound } from "../services/errors.js";
import { canonicalText, compiledPredicate, eventWindowsMs, inSegmentReferences, parsePql, qualifies, traceQuery, type Query, type TraceNode } from "../services/pql.js";
import { profileAttributePaths } from "../services/pql-paths.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";

/** Events read per explain, newest kept (the streaming engine's bound on a loaded profile). */
export const EXPLAIN_MAX_EVENTS = 10_000;
/** Transitions shown per explain (the most recent). */
export const EXPLAIN_MAX_HISTORY = 100;
/** Instants tried when looking for the exit a window will make. */
export const EXPLAIN_MAX_EXIT_CHECKS = 1_000;
/**
 * CPU milliseconds the exit search may spend: past them it answers null (none found). An
 * expression quadratic in a 300-event profile's events, tried at ~400 midnights, took 1.6–3.8 s.
 */
export const EXPLAIN_EXIT_SEARCH_CPU_MS = 250;
const DAY_MS = 86_400_000;
const YEAR_MS = 366 * DAY_MS;
const ARRAY_SHOWN = 10;
const STRING_SHOWN = 256;
const DEPTH_SHOWN = 6;

export interface ExplainRequest {
  identity: { id: string; namespace: string };
  /** A stored definition, or a draft expression (with its merge policy, default the sandbox's). */
  definitionId?: string;
  draft?: { expression: ExpressionInput; mergePolicyId?: string };
}


/** Computed attributes, given by the composition root (app.ts): explain needs no module of theirs. */
export interface ExplainComputedAttributes {
  /** The query with computed attribute paths as their aggregates, as a definition's save makes them (refusing what cannot be read). */
  expand(ctx: TenantContext, query: Query): Promise<Query>;
  /** Each computed attribute the query as written reads, explained for these events at `now`. */
  explain(ctx: TenantContext, written: Query, events: readonly Record<string, unknown>[], now: number): Promise<ComputedAttributeExplanation[]>;
}

/** A profile attribute the expression reads, with the fragment and merge-policy rule that supplied its value. */
export interface AttributeProvenance {
  path: string;
  /** The merged profile's value (shown as the trace shows values); through an array, each item's. */
  value: unknown;
  /** The fragment whose value the merge kept: its dataset, record id (`namespace:id` of its primary identity) and time; null when none has one. */
  source: { datasetId: string; recordId: string; timestamp: string } | null;
  /** The merge policy's attribute rule that picked the source; identityGraph for identityMap (built from the graph); none when no fragment has a value. */
  rule: "timestampOrdered" | "dataSetPrecedence" | "identityGraph" | "none";
  /** dataSetPrecedence: the source's dataset's place in the policy's order (1 = first), null when unlisted or no source. */
  rank?: number | null;
}

export interface Explanation {
  segmentId: string | null;
  entityId: string;
  entityIdNS: string;
  profileId: string;
  evaluatedAt: string;
  mergePolicyId: string | null;
  /** What the expression gives for the profile now (consent exclusion applied). */
  result: boolean;
  /** The profile opted out of data use and the definition excludes opted-out profiles: out whatever the expression says. */
  excludedByConsent: boolean;
  /**
   * When the profile qualifies because of events in a window: the first instant, with no new data,
   * at which it stops qualifying — an event leaving a window, or a UTC midnight (the instants the
   * streaming sweep re-checks) — within a year or the longest window; null otherwise.
   */
  exitsAt: string | null;
  membership: { status: "realized" | "exited" | null; lastQualificationTime: string | null; history: Omit<MembershipTransition, "profileId" | "definitionId">[] };
  /** The profile's status in each audience the expression references with inSegment. */
  references: { id: string; status: "realized" | "exited" | null }[];
  /** Each profile attribute the expression reads (not segmentMembership.ups: `references`), in source order. */
  attributes: AttributeProvenance[];
  events: { read: number; truncated: boolean };
  /** Each computed attribute the expression reads (as written): its value now and the events that contribute to it. */
  computedAttributes: ComputedAttributeExplanation[];
  trace: TraceNode;
}

/** A value as the trace shows it: bounded arrays, strings and depth; events by id, type and time. */
export function shown(v: unknown, depth = 0): unknown {
  if (typeof v === "string") return v.length > STRING_SHOWN ? `${v.slice(0, STRING_SHOWN)}…` : v;
  if (v === null || typeof v !== "object") return v === undefined ? null : v;
  if (v instanceof Date) return v.toISOString();
  if (depth >= DEPTH_SHOWN) return Array.isArray(v) ? `[${v.length} items]` : "{…}";
  if (Array.isArray(v)) {
    const items = v.slice(0, ARRAY_SHOWN).map((x) => shown(x, depth + 1));
    return v.length > ARRAY_SHOWN ? { count: v.length, first: items } : items;
  }
  const o = v as Record<string, unknown>;
  if (typeof o["_id"] === "string" && "timestamp" in o) return { _id: o["_id"], eventType: o["eventType"] ?? null, timestamp: o["timestamp"] };
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, shown(x, depth + 1)]));
}

function shownTrace(n: TraceNode): TraceNode {
  return {
    kind: n.kind,
    text: n.text,
    value: shown(n.value),
    children: n.children.map(shownTrace),
    ...(n.items ? { items: { tested: n.items.tested, held: n.items.held, first: n.items.first.map((x) => shown(x)) } } : {}),
    ...(n.bounds ? { bounds: n.bounds } : {}),
  };
}

export class AudienceExplainer {
  constructor(
    private readonly meta: MetadataStore,
    private readonly hub: ProfileReads & MembershipReads,
    private readonly clock: Clock,
    private readonly computed?: ExplainComputedAttributes,
  ) {}

  async explain(ctx: TenantContext, req: ExplainRequest): Promise<Explanation> {
    const scope = scopeOf(ctx);
    let query: Query;
    let mergePolicyId: string | undefined;
    let excludeOptOut = true;
    // The expression as written: the stored text holds computed attributes' aggregates instead of their paths.
    let written: Query | null;
    if (req.definitionId !== undefined) {
      const rec = await this.meta.definitions.get(scope, req.definitionId);
      if (!rec) throw notFound("Segment definition", req.definitionId);
      query = parseChecked(rec.canonicalText, ctx.limits);
      mergePolicyId = rec.definition.mergePolicyId;
      excludeOptOut = rec.definition.dataGovernancePolicy.excludeOptOut;
      written = writtenQuery(rec.definition.expression);
    } else if (req.draft !== undefined) {
      written = parseChecked(expressionText(req.draft.expression, ctx.limits.expressionBytes).text, ctx.limits);
      // A draft reads computed attributes as a saved definition does: their aggregates, checked alike.
      query = this.computed === undefined ? written : await this.computed.expand(ctx, written);
      if (query !== written) parseChecked(canonicalText(query), ctx.limits);
      mergePolicyId = req.draft.mergePolicyId;
    } else {
      throw badRequest("Name a definition or send an expression to explain");
    }
    const policy = mergePolicyId !== undefined
      ? await this.meta.mergePolicies.get(scope, mergePolicyId)
      : await this.meta.mergePolicies.getDefault(scope, "_xdm.context.profile");
    if (!policy) {
      throw new ApiError(400, ErrorCodes.mergePolicy, mergePolicyId !== undefined
        ? `merge policy '${mergePolicyId}' does not exist in sandbox '${ctx.sandbox.sandboxName}'`
        : `sandbox '${ctx.sandbox.sandboxName}' has no default merge policy for schema class '_xdm.context.profile'; pass mergePolicyId`);
    }
    // A stored policy is a MergePolicySpec as it is (the profile routes' resolver passes it the same way).
    const spec: MergePolicySpec = policy.policy;
    const identity: Identity = { namespace: normalizeNamespace(req.identity.namespace), id: req.identity.id };
    const read = await this.hub.getProfileWithFragments(scope, identity, spec);
    if (read === null) throw notFound("Profile", `${req.identity.namespace}:${req.identity.id}`);
    const { profile, fragments } = read;

    const now = this.clock.now();
    const page = await this.hub.getEvents(scope, identity, spec, { order: "desc", limit: EXPLAIN_MAX_EVENTS });
    const events = page.events.map((e) => e.body).reverse();
    // The trace and the exit search evaluate the query: under the sandbox's budget (a stored definition
    // accepted before the cost model, or a profile past eventsPerProfile, ends with 422/503, not a stall).
    const budget = new EvaluationBudget(ctx.limits, { deadline: true });
    const { value, trace } = budget.run(() => traceQuery(query, { profile: profile.entity, events, now }));
    const excludedByConsent = excludeOptOut && profile.optedOut;
    const result = !excludedByConsent && qualifies(value);
    const exitsAt = result ? budget.run(() => nextExit(query, profile.entity, events, page.events.map((e) => e.timestamp), now)) : null;

    const memberships = await this.hub.getMemberships(scope, profile.profileId);
    const byDef = new Map(memberships.map((m) => [m.definitionId, m]));
    const mine = req.definitionId === undefined ? undefined : byDef.get(req.definitionId);
    const history = req.definitionId === undefined ? [] : await this.hub.listTransitions(scope, { definitionId: req.definitionId, profileIds: [profile.profileId], latestPerMembership: EXPLAIN_MAX_HISTORY });
    const refs = inSegmentReferences(query);
    const computed = this.computed === undefined || written === null ? [] : await this.computed.explain(ctx, written, events, now);
    return {
      segmentId: req.definitionId ?? null,
      entityId: req.identity.id,
      entityIdNS: req.identity.namespace,
      profileId: profile.profileId,
      evaluatedAt: new Date(now).toISOString(),
      mergePolicyId: policy.policy.id,
      result,
      excludedByConsent,
      exitsAt: exitsAt === null ? null : new Date(exitsAt).toISOString(),
      membership: {
        status: mine?.status ?? null,
        lastQualificationTime: mine?.lastQualificationTime ?? null,
        history: history.map((t) => ({ from: t.from, to: t.to, source: t.source, at: t.at })),
      },
      references: refs.map((id) => ({ id, status: byDef.get(id)?.status ?? null })),
      attributes: provenance(profileAttributePaths(query).filter((p) => !isOwnMembership(p)), profile.entity, fragments, spec),
      events: { read: events.length, truncated: page.next !== null },
      computedAttributes: computed,
      trace: shownTrace(trace),
    };
  }
}

/** A stored expression as written, when it names computed attributes (null otherwise, or when it no longer parses). */
function writtenQuery(expression: ExpressionInput): Query | null {
  if (!expression.value.includes("ComputedAttributes")) return null;
  try {
    return parsePql(expressionText(expression, Number.MAX_SAFE_INTEGER).text);
  } catch {
    return null;
  }
}

/** segmentMembership.ups is the service's own memberships (`references`); ingested namespaces are fragments' data. */
function isOwnMembership(path: readonly string[]): boolean {
  return path[0] === "segmentMembership" && (path.length === 1 || path[1] === "ups");
}

function provenance(paths: readonly (readonly string[])[], entity: JsonObject, fragments: readonly ProfileFragment[], policy: MergePolicySpec): AttributeProvenance[] {
  const sources = attributeSources(fragments, policy, paths);
  return paths.map((path, i): AttributeProvenance => {
    const at = { path: path.join("."), value: shown(valueAt(entity, path)) };
    if (path[0] === "identityMap") return { ...at, source: null, rule: "identityGraph" };
    const f = sources[i] ?? null;
    const rank = policy.attributeMerge.type === "dataSetPrecedence" ? { rank: f === null ? null : datasetRank(policy, f.datasetId) } : {};
    if (f === null) return { ...at, source: null, rule: "none", ...rank };
    const source = { datasetId: f.datasetId, recordId: fragmentRecordId(f.primary), timestamp: new Date(f.timestamp).toISOString() };
    return { ...at, source, rule: policy.attributeMerge.type, ...rank };
  });
}

/** The value at `path`; through an array, each item's (as PQL projects a field over an array). */
function valueAt(v: unknown, path: readonly string[]): unknown {
  let cur = v;
  for (let i = 0; i < path.length; i++) {
    if (Array.isArray(cur)) return cur.map((x) => valueAt(x, path.slice(i)) ?? null);
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, path[i]!)) return undefined;
    cur = (cur as Record<string, unknown>)[path[i]!];
  }
  return cur;
}

/**
 * The sweep's re-check instants after `now` (each event leaving each window, +1 ms as the sweep
 * schedules it; each UTC midnight), tried in order with the engines' compiled predicate: the
 * first at which the query no longer holds. Null when none does within the horizon (or within
 * EXPLAIN_EXIT_SEARCH_CPU_MS of CPU).
 */
function nextExit(query: Query, profile: Record<string, unknown>, events: Record<string, unknown>[], eventTimes: number[], now: number): number | null {
  const windows = eventWindowsMs(query);
  if (eventTimes.length === 0 || windows.length === 0) return null;
  // A window classify cannot size statically is re-checked at each midnight: look a year ahead at least.
  const horizon = now + Math.max(windows[windows.length - 1]!, YEAR_MS) + DAY_MS;
  const instants = new Set<number>();
  for (const t of eventTimes) for (const w of windows) if (t + w + 1 > now && t + w + 1 <= horizon) instants.add(t + w + 1);
  for (let d = (Math.floor(now / DAY_MS) + 1) * DAY_MS; d <= horizon; d += DAY_MS) instants.add(d);
  const holds = compiledPredicate(query);
  const cpu0 = threadCpuMs();
  let tried = 0;
  for (const t of [...instants].sort((a, b) => a - b).slice(0, EXPLAIN_MAX_EXIT_CHECKS)) {
    if (!holds({ profile, events, now: t })) return t;
    if (++tried % 8 === 0 && threadCpuMs() - cpu0 > EXPLAIN_EXIT_SEARCH_CPU_MS) return null;
  }
  return null;
}
