/**
 * Previews, the builder's estimates and edit impact over the worker fleet (issue #44): what the
 * hub asks, what each partition answers, and the merge. Each worker answers over its shard, per
 * partition it holds (batch/shards/shard-reads.ts); the hub keeps one answer per partition
 * (cluster/fleet-reads.ts) and merges them here. The sample is a stable hash of the profile id and
 * every profile is in one partition, so the merged counts are the all-in-one's exactly: the same
 * sample read, the same profiles matched, the same interval. Only the members kept as a sample (up
 * to the preview's 10,000, impact's `sampleSize` per group) may be other profiles of the same groups.
 */
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";

/** A sample's count: profiles read, matched, matched per namespace, and members kept. */
export interface SampleCount {
  read: number;
  matched: number;
  byNamespace: Record<string, number>;
  members: Array<{ profileId: string; identities: string[] }>;
}

/** The three groups' counts and up to `wanted` profile ids each (a worker's answer per partition, #44). */
export interface ComparisonCounts {
  profiles: number;
  before: number;
  after: number;
  enter: { count: number; pids: string[] };
  leave: { count: number; pids: string[] };
  stay: { count: number; pids: string[] };
}

/** One version of a definition as impact sends it. */
export interface SideText {
  text: string;
  policy: MergePolicySpec;
  excludeOptOut: boolean;
}

export type ShardReadRequest =
  /** Sample counts of expressions (a preview: one, with members; the builder: several, counts only). */
  | { kind: "sample"; graphType: "none" | "pdg"; expressions: string[]; fraction: number; keepMembers: number; now: number }
  /** Edit impact: both versions and their groups. */
  | { kind: "compare"; before: SideText; after: SideText; now: number; wanted: number }
  /** Profiles qualifying for an expression (a computed attribute's first evaluation; opted-out ones included, no deadline, as a job). */
  | { kind: "count"; text: string; policy: MergePolicySpec; now: number };

export type ShardReadAnswer =
  | { kind: "sample"; counts: SampleCount[] }
  | { kind: "compare"; counts: ComparisonCounts }
  | { kind: "count"; profiles: number; qualifying: number };

/** The hub's side: every partition's answer, once each (cluster/fleet-reads.ts). */
export interface FleetReads {
  read(scope: TenantScope, request: ShardReadRequest): Promise<Map<number, ShardReadAnswer>>;
}

/** The partitions' sample counts as one, per expression; up to `keepMembers` members, by partition. */
export function mergeSamples(answers: ReadonlyMap<number, ShardReadAnswer>, expressions: number, keepMembers: number): SampleCount[] {
  const out: SampleCount[] = Array.from({ length: expressions }, () => ({ read: 0, matched: 0, byNamespace: {}, members: [] }));
  for (const p of [...answers.keys()].sort((a, b) => a - b)) {
    const a = answers.get(p)!;
    if (a.kind !== "sample") throw new Error(`partition ${p} answered a ${a.kind} read to a sample read`);
    a.counts.forEach((c, i) => {
      const t = out[i]!;
      t.read += c.read;
      t.matched += c.matched;
      for (const [ns, k] of Object.entries(c.byNamespace)) t.byNamespace[ns] = (t.byNamespace[ns] ?? 0) + k;
      for (const m of c.members) if (t.members.length < keepMembers) t.members.push(m);
    });
  }
  return out;
}

/** The partitions' comparisons as one; up to `wanted` ids per group, by partition. */
export function mergeComparisons(answers: ReadonlyMap<number, ShardReadAnswer>, wanted: number): ComparisonCounts {
  const out: ComparisonCounts = { profiles: 0, before: 0, after: 0, enter: { count: 0, pids: [] }, leave: { count: 0, pids: [] }, stay: { count: 0, pids: [] } };
  for (const p of [...answers.keys()].sort((a, b) => a - b)) {
    const a = answers.get(p)!;
    if (a.kind !== "compare") throw new Error(`partition ${p} answered a ${a.kind} read to a compare read`);
    const c = a.counts;
    out.profiles += c.profiles;
    out.before += c.before;
    out.after += c.after;
    for (const g of ["enter", "leave", "stay"] as const) {
      out[g].count += c[g].count;
      for (const id of c[g].pids) if (out[g].pids.length < wanted) out[g].pids.push(id);
    }
  }
  return out;
}

/** The partitions' counts as one. */
export function mergeCounts(answers: ReadonlyMap<number, ShardReadAnswer>): { profiles: number; qualifying: number } {
  const out = { profiles: 0, qualifying: 0 };
  for (const [p, a] of answers) {
    if (a.kind !== "count") throw new Error(`partition ${p} answered a ${a.kind} read to a count read`);
    out.profiles += a.profiles;
    out.qualifying += a.qualifying;
  }
  return out;
}
