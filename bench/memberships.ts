// Bulk membership write benchmark: applyMembershipChanges with a million changes in
// one call (one transaction), as a batch job writes them, with and without the
// caller's previous status (`from`).
//
//   node --conditions=source --import tsx bench/memberships.ts \
//     [--changes 1000000] [--store embedded|postgres] [--defs 10] \
//     [--db bench/.data/memberships.db] [--sync full|normal] [--url postgres://127.0.0.1:5432/test]
//
// For each mode (without `from`, then with `from`) on a fresh store:
//   round 1 "enter": every change realizes a new membership (all are transitions);
//   round 2 "flip":  half of them exit, the other half stay realized (half are transitions).
// Prints µs per change of each round (wall and this process's CPU time) and checks both
// modes returned the same transitions.
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { withDefaultUser } from "../packages/server/src/platform/pg-url.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import type { MembershipChange, ProfileStore } from "../packages/server/src/profiles/store.js";
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

function same(a: MembershipTransition[], b: MembershipTransition[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (x.profileId !== y.profileId || x.definitionId !== y.definitionId || x.from !== y.from || x.to !== y.to || x.source !== y.source || x.at !== y.at) return false;
  }
  return true;
}

async function main(): Promise<void> {
  console.log(`applyMembershipChanges: ${N} changes per call (${PROFILES} profiles × ${DEFS} definitions), store ${args.store}`);
  const results: Record<string, MembershipTransition[][]> = {};
  for (const withFrom of [false, true]) {
    const mode = withFrom ? "with from" : "without from";
    const store = await freshStore();
    try {
      const list: MembershipTransition[][] = [];
      results[mode] = list;
      for (const round of ["enter", "flip"] as const) {
        const batch = changes(round, withFrom);
        const t0 = process.hrtime.bigint();
        const c0 = process.cpuUsage();
        const out = await store.applyMembershipChanges(SCOPE, batch);
        const us = Number(process.hrtime.bigint() - t0) / 1000;
        const cpu = process.cpuUsage(c0);
        list.push(out);
        // CPU time of this process too: on shared cores wall time also counts other processes' work
        // (for postgres it leaves out the server's).
        console.log(`  ${mode.padEnd(12)} ${round.padEnd(5)}: ${(us / N).toFixed(2)} µs/change wall, ${((cpu.user + cpu.system) / N).toFixed(2)} µs/change cpu `
          + `(${(us / 1e6).toFixed(2)} s, ${out.length} transitions)`);
      }
      const counts = await store.countMembers(SCOPE, "def-0");
      console.log(`  ${mode.padEnd(12)} def-0 members: ${counts.realized} realized, ${counts.exited} exited`);
    } finally {
      await store.close();
    }
  }
  const a = results["without from"]!, b = results["with from"]!;
  const ok = a.every((t, i) => same(t, b[i]!));
  console.log(ok ? "  transitions identical with and without from" : "  MISMATCH: transitions differ with and without from");
  if (!ok) process.exitCode = 1;
}

await main();
