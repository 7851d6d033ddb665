/**
 * Shared set-up for the batch tests: a profile store of the run's kind with
 * generated profiles and events ingested through the data plane, and the
 * reference membership computed by `evaluate` profile by profile.
 */
import fc from "fast-check";
import { evaluate, parse, type Query, toBoolean } from "@segmentd/pql";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore, ScannedProfile } from "../../src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import type { JobDefinition } from "../../src/batch/engine/evaluate-job.js";
import { NOW, eventArb, profileArb } from "./pql-gen.js";

export const SCOPE: TenantScope = { orgId: "ORG@AdobeOrg", sandboxName: "prod" };
export const PDG: MergePolicySpec & { id: string } = { id: "mp-pdg", identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };

function rec(values: readonly unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

export interface Population {
  profiles: number;
  crm: string;
  web: string;
}

/**
 * Ingests `n` generated profiles (ECID identities P0..Pn-1) with generated
 * events, deterministically from `seed`. Events keep only real timestamps
 * (ingestion requires one); profile attributes take every JSON kind.
 */
export async function populate(store: ProfileStore, n: number, seed: number): Promise<Population> {
  const crm = (await store.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
  const web = (await store.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
  const profiles = fc.sample(profileArb, { numRuns: n, seed });
  const events = fc.sample(fc.array(eventArb, { maxLength: 4 }), { numRuns: n, seed: seed + 1 });
  await ingestRecords(store, SCOPE, crm, rec(profiles.map((p, i) => ({ ...p, identityMap: { ECID: [{ id: `P${i}`, primary: true }] } }))), { now: NOW - 1000 });
  const evRecords: JsonObject[] = [];
  events.forEach((list, i) => {
    list.forEach((e, k) => {
      if (typeof e["timestamp"] !== "string" || Number.isNaN(Date.parse(e["timestamp"]))) return;
      evRecords.push({ ...(e as JsonObject), _id: `e-${i}-${k}`, identityMap: { ECID: [{ id: `P${i}`, primary: true }] } });
    });
  });
  const r = await ingestRecords(store, SCOPE, web, rec(evRecords), { now: NOW - 1000 });
  if (r.failed.length > 0) throw new Error(`fixture events rejected: ${JSON.stringify(r.failed.slice(0, 3))}`);
  return { profiles: n, crm, web };
}

export function definition(id: string, text: string, extra: Partial<JobDefinition> = {}): JobDefinition {
  const query = parse(text);
  const references: string[] = [];
  for (const m of text.matchAll(/inSegment\("([^"]+)"\)/g)) references.push(m[1]!);
  return { id, query, references, excludeOptOut: true, policy: PDG, ...extra };
}

/** Four definitions over profiles and events, two of them segments of segments (shard and fleet tests). */
export function segmentOfSegmentsDefinitions(): JobDefinition[] {
  return [
    definition("d0", "person.age > 20", { excludeOptOut: false }),
    definition("d1", 'xEvent[eventType = "purchase"].count() > 0', { excludeOptOut: false }),
    definition("d2", 'inSegment("d0") and inSegment("d1")', { excludeOptOut: false }),
    definition("d3", 'not inSegment("d1") or tier = "changed"', { excludeOptOut: false }),
  ];
}

/**
 * Reference members: every profile of the store, merged under the policy,
 * evaluated with `evaluate`. `segmentMembership` is replaced by `members` of
 * the definitions listed (the results expected for referenced definitions).
 */
export async function referenceMembers(
  store: ProfileStore,
  query: Query,
  opts: { excludeOptOut: boolean; policy?: MergePolicySpec; members?: Map<string, Set<string>>; scope?: TenantScope; now?: number },
): Promise<Set<string>> {
  const out = new Set<string>();
  const now = opts.now ?? NOW;
  for await (const chunk of store.scanProfiles(opts.scope ?? SCOPE, opts.policy ?? PDG)) {
    for (const p of chunk) {
      if (opts.excludeOptOut && p.optedOut) continue;
      let profile: Record<string, unknown> = p.entity;
      if (opts.members !== undefined) {
        // Only the listed definitions are replaced; other stored memberships stay.
        const stored = (p.entity["segmentMembership"] as { ups?: Record<string, unknown> } | undefined)?.ups ?? {};
        const ups: Record<string, unknown> = { ...stored };
        for (const id of opts.members.keys()) delete ups[id];
        for (const [id, set] of opts.members) if (set.has(p.profileId)) ups[id] = { status: "realized" };
        profile = { ...p.entity, segmentMembership: { ups } };
      }
      if (toBoolean(evaluate(query, { profile, events: p.events.map((e) => e.body), now }))) out.add(p.profileId);
    }
  }
  return out;
}

/** One scanned entry (as a store's scan yields it) with its events, for building snapshot parts by hand. */
export function scannedEntry(profileId: string, entity: JsonObject, events: JsonObject[] = [], extra: Partial<ScannedProfile> = {}): ScannedProfile {
  return {
    profileId,
    identities: [{ namespace: "ecid", id: `E${profileId}` }],
    entity,
    sources: [],
    lastModifiedAt: null,
    optedOut: false,
    events: events.map((body, k) => ({ datasetId: "ds", eventId: `${profileId}-${k}`, primary: { namespace: "ecid", id: `E${profileId}` }, timestamp: 0, body })),
    identity: null,
    ...extra,
  };
}
