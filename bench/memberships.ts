// Bulk membership write benchmark: a million changes in one call (one transaction),
// as a batch job writes them: applyMembershipChanges with and without the caller's
// previous status (`from`), and applyMembershipSets (typed arrays per definition, the
// batch jobs' path).
//
//   node --conditions=source --import tsx bench/memberships.ts \
//     [--changes 1000000] [--store embedded|postgres] [--defs 10] \
//     [--db bench/.data/memberships.db] [--sync full|normal] [--url postgres://127.0.0.1:5432/test]
//
// For each mode (without `from`, with `from`, sets) on a fresh store:
//   round 1 "enter": every change realizes a new membership (all are transitions);
//   round 2 "flip":  half of them exit, the other half stay realized (half are transitions).
// Prints µs per change of each round (wall and this process's CPU time), checks the two
// change modes returned the same transitions and that every mode left the same member counts.
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { withDefaultUser } from "../packages/server/src/platform/pg-url.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import type { MembershipChange, MembershipSet, ProfileStore } from "../packages/server/src/profiles/store.js";
import type { MembershipTransition, TenantScope } from "../packages/server/src/profiles/types.js";

const { values: args } = parseArgs({
  options: {
    changes: { type: "string", default: "1000000" },
    defs: { type: "string", default: "10" },
    store: { type: "string", default: "embedded" },
    db: { type: "string", default: "bench/.data/memberships.db" },
    sync: { type: "string", default: "full" },
    url: { type: "string", default: "postgres://127.0.0.1:5432/test" },
  },
});

const SCOPE: TenantScope = { orgId: "bench@AdobeOrg", sandboxName: "prod" };
const PG_SCHEMA = "bench_memberships";
const N = Number(args.changes);
const DEFS = Math.max(1, Number(args.defs));
const PROFILES = Math.max(1, Math.ceil(N / DEFS));
const AT = Date.UTC(2026, 10, 21);

async function freshStore(): Promise<ProfileStore> {
  if (args.store === "postgres") {
    const c = new pg.Client({ connectionString: withDefaultUser(args.url!) });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS ${PG_SCHEMA} CASCADE`);
    await c.end();
    return new PostgresProfileStore({ connectionString: args.url!, schema: PG_SCHEMA });
  }
  const file = path.resolve(args.db!);
  mkdirSync(path.dirname(file), { recursive: true });
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  return new EmbeddedProfileStore({ path: file, synchronous: args.sync === "normal" ? "normal" : "full" });
}

/** Change i: profile (i mod PROFILES) + 1, definition floor(i / PROFILES): a batch job's order (definition by definition). */
function changes(round: "enter" | "flip", withFrom: boolean): MembershipChange[] {
  const out: MembershipChange[] = new Array<MembershipChange>(N);
  for (let i = 0; i < N; i++) {
    const profileId = String((i % PROFILES) + 1);
    const definitionId = `def-${Math.floor(i / PROFILES)}`;
    const c: MembershipChange = round === "enter"
      ? { profileId, definitionId, status: "realized", source: "batch", at: AT }
      : { profileId, definitionId, status: i % 2 === 0 ? "exited" : "realized", source: "batch", at: AT + 1 };
    if (withFrom) c.from = round === "enter" ? null : "realized";
    out[i] = c;
  }
  return out;
}

/** The same rounds as sets: per definition, every profile enters; then the changes of even index exit. */
function sets(round: "enter" | "flip"): MembershipSet[] {
  const empty = () => new Float64Array(0);
  return Array.from({ length: DEFS }, (_, d) => {
    const lo = d * PROFILES, hi = Math.min(N, lo + PROFILES);
    const ids = Float64Array.from({ length: Math.max(0, hi - lo) }, (_, k) => k + 1);
    if (round === "enter") return { definitionId: `def-${d}`, entered: ids, reentered: empty(), exited: empty() };
    return { definitionId: `def-${d}`, entered: empty(), reentered: empty(), exited: ids.filter((_, k) => (lo + k) % 2 === 0) };
  });
}

function same(a: MembershipTransition[], b: MembershipTransition[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (x.profileId !== y.profileId || x.definitionId !== y.definitionId || x.from !== y.from || x.to !== y.to || x.source !== y.source || x.at !== y.at) return false;
  }
  return true;
}

async function main(): Promise<void> {
  console.log(`bulk membership writes: ${N} changes per call (${PROFILES} profiles × ${DEFS} definitions), store ${args.store}`);
  const results: Record<string, MembershipTransition[][]> = {};
  const members: Record<string, string> = {};
  for (const mode of ["without from", "with from", "sets"] as const) {
    const store = await freshStore();
    try {
      const list: MembershipTransition[][] = [];
      results[mode] = list;
      for (const round of ["enter", "flip"] as const) {
        // Built before the clock starts: the engine hands them over ready.
        const input: { sets: MembershipSet[] } | { changes: MembershipChange[] } = mode === "sets" ? { sets: sets(round) } : { changes: changes(round, mode === "with from") };
        const t0 = process.hrtime.bigint();
        const c0 = process.cpuUsage();
        let transitions: number;
        if ("changes" in input) {
          const out = await store.applyMembershipChanges(SCOPE, input.changes);
          list.push(out);
          transitions = out.length;
        } else {
          const counts = await store.applyMembershipSets(SCOPE, input.sets, { source: "batch", at: round === "enter" ? AT : AT + 1 });
          transitions = counts.realized + counts.exited;
        }
        const us = Number(process.hrtime.bigint() - t0) / 1000;
        const cpu = process.cpuUsage(c0);
        // CPU time of this process too: on shared cores wall time also counts other processes' work
        // (for postgres it leaves out the server's).
        console.log(`  ${mode.padEnd(12)} ${round.padEnd(5)}: ${(us / N).toFixed(2)} µs/change wall, ${((cpu.user + cpu.system) / N).toFixed(2)} µs/change cpu `
          + `(${(us / 1e6).toFixed(2)} s, ${transitions} transitions)`);
      }
      const counts = await Promise.all(Array.from({ length: DEFS }, (_, d) => store.countMembers(SCOPE, `def-${d}`)));
      members[mode] = JSON.stringify(counts);
      console.log(`  ${mode.padEnd(12)} def-0 members: ${counts[0]!.realized} realized, ${counts[0]!.exited} exited`);
    } finally {
      await store.close();
    }
  }
  const a = results["without from"]!, b = results["with from"]!;
  const ok = a.every((t, i) => same(t, b[i]!));
  console.log(ok ? "  transitions identical with and without from" : "  MISMATCH: transitions differ with and without from");
  const sameMembers = members["sets"] === members["with from"] && members["with from"] === members["without from"];
  console.log(sameMembers ? "  member counts identical in all modes" : "  MISMATCH: member counts differ between modes");
  if (!ok || !sameMembers) process.exitCode = 1;
}

await main();
