/**
 * The batch engine over a real profile store: member sets equal `evaluate`
 * run profile by profile, for SQL-covered and in-memory definitions alike,
 * with dependency order, opt-out and realized/existing/exited accounting.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { evaluateJob, JobCancelledError, type JobDefinition } from "../../src/batch/engine/evaluate-job.js";
import { DependencyCycleError, dependencyOrder } from "../../src/batch/engine/dependency-order.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { MembershipSet, ScanOptions } from "../../src/profiles/store.js";
import { NO_MERGE_POLICY } from "../../src/profiles/types.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";
import { NOW, coveredQuery } from "./pql-gen.js";
import { SCOPE, definition, populate, referenceMembers, type Population } from "./fixtures.js";

const N = 80;

/** Profiles a job makes realized (entered or re-entered) or exited for a definition. */
function membersOf(sets: readonly MembershipSet[], id: string, status: string): Set<string> {
  const s = sets.find((x) => x.definitionId === id);
  const lists = s === undefined ? [] : status === "realized" ? [s.entered, s.reentered] : status === "exited" ? [s.exited] : [];
  return new Set(lists.flatMap((l) => Array.from(l, String)));
}

describe("batch engine", () => {
  let ts: TestStore;
  let pop: Population;
  before(async () => {
    ts = openTestStore();
    pop = await populate(ts.store, N, 7);
  });
  after(async () => {
    await ts.cleanup();
  });

  it("orders inSegment dependencies first and rejects cycles", () => {
    const order = dependencyOrder([
      { id: "c", references: ["b"] },
      { id: "a", references: [] },
      { id: "b", references: ["a", "outside"] },
    ]);
    assert.deepEqual(order.map((n) => n.id), ["a", "b", "c"]);
    assert.throws(
      () => dependencyOrder([{ id: "x", references: ["y"] }, { id: "y", references: ["z"] }, { id: "z", references: ["x"] }]),
      (e: unknown) => e instanceof DependencyCycleError && e.message === "inSegment references form a cycle: x -> y -> z -> x",
    );
  });

  it("member sets equal evaluate profile by profile, on every back end", async () => {
    const texts = fc.sample(coveredQuery, { numRuns: 25, seed: 11 });
    texts.push(
      "person.age + 1 > 19", // arithmetic: in memory
      'xEvent[eventType = "purchase"].count() >= 1 or person.name.matches("^a")',
      "xEvent[timestamp occurs before person.birthDate].count() > 0", // a reference read from data: in memory
      "xEvent[timestamp occurs this month].count() > 0", // a calendar period: bounds from occursBounds, in SQL
    );
    const defs = texts.map((t, i) => definition(`d${i}`, t));
    for (const backend of ["columnar", "sql", "js"] as const) {
      const out = await evaluateJob(ts.store, SCOPE, defs, { now: NOW, backend });
      assert.equal(out.totalProfiles, N);
      if (backend === "columnar") {
        assert.deepEqual(out.sqlDefinitions, []);
        assert.ok((out.columnarDefinitions ?? []).length >= 25, `the generated conditions run over columns (${out.columnarDefinitions?.length})`);
      } else if (backend === "sql") {
        assert.ok(out.sqlDefinitions.length >= 25, `SQL covers the generated conditions (${out.sqlDefinitions.length})`);
        assert.equal(out.inMemoryDefinitions["d25"], "Binary where a field path is needed");
        assert.equal(out.inMemoryDefinitions["d26"], "method matches");
        assert.equal(out.inMemoryDefinitions["d27"], "a time reference or unit the SQL back end does not resolve");
        assert.ok(out.sqlDefinitions.includes("d28"), "calendar periods compile to SQL");
      } else {
        assert.deepEqual(out.sqlDefinitions, []);
      }
      for (const d of defs) {
        const want = await referenceMembers(ts.store, d.query, { excludeOptOut: true });
        assert.deepEqual(membersOf(out.memberships, d.id, "realized"), want, `${backend}: ${texts[Number(d.id.slice(1))]}`);
        const c = out.counters.get(d.id)!;
        assert.equal(c.qualified, want.size);
        assert.equal(c.realized, want.size, "first job: every member is new");
        assert.equal(c.existing + c.exited, 0);
        assert.equal(c.byNamespace["ecid"] ?? 0, want.size);
      }
    }
  });

  it("evaluates inSegment after the referenced definitions of the same job", async () => {
    const base = definition("base", "person.age >= 18");
    const mid = definition("mid", 'inSegment("base") and xEvent.count() > 0');
    const top = definition("top", 'not inSegment("mid")');
    const baseSet = await referenceMembers(ts.store, base.query, { excludeOptOut: true });
    const midSet = await referenceMembers(ts.store, mid.query, { excludeOptOut: true, members: new Map([["base", baseSet]]) });
    const topSet = await referenceMembers(ts.store, top.query, { excludeOptOut: true, members: new Map([["mid", midSet]]) });
    assert.ok(baseSet.size > 0 && midSet.size > 0 && midSet.size < baseSet.size + 1);
    for (const backend of ["columnar", "sql", "js"] as const) {
      const out = await evaluateJob(ts.store, SCOPE, [top, mid, base], { now: NOW, backend });
      assert.deepEqual(membersOf(out.memberships, "base", "realized"), baseSet, backend);
      assert.deepEqual(membersOf(out.memberships, "mid", "realized"), midSet, backend);
      assert.deepEqual(membersOf(out.memberships, "top", "realized"), topSet, backend);
      assert.deepEqual(out.sqlDefinitions, backend === "sql" ? ["base"] : [], backend);
    }
  });

  it("a job reading segmentMembership directly falls back to the in-memory back end and sees stored memberships", async () => {
    const base = definition("storedBase", "person.age >= 18");
    const first = await evaluateJob(ts.store, SCOPE, [base], { now: NOW });
    // Read before the write: the worker store takes (detaches) the arrays.
    const stored = membersOf(first.memberships, "storedBase", "realized");
    await ts.store.applyMembershipSets(SCOPE, first.memberships, { source: "batch", at: NOW });
    assert.ok(stored.size > 0);
    const direct = definition("direct", 'segmentMembership.ups.storedBase.status = "realized"');
    const out = await evaluateJob(ts.store, SCOPE, [direct], { now: NOW });
    assert.deepEqual(membersOf(out.memberships, "direct", "realized"), stored);
    assert.match(out.inMemoryDefinitions["direct"] ?? "", /^in-memory: definition direct reads segmentMembership directly/);
    // Undo: later tests start from no stored memberships.
    await ts.store.applyMembershipChanges(SCOPE, [...stored].map((profileId) => ({ profileId, definitionId: "storedBase", status: "exited" as const, source: "batch" as const, at: NOW })));
  });

  it("excludes opted-out profiles when excludeOptOut, and only then", async () => {
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { ECID: [{ id: "P0", primary: true }] }, consents: { marketing: { preferred: "n" } }, _repo: { modifyDate: new Date(NOW - 500).toISOString() } } },
    ], { now: NOW - 500 });
    const pid = await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: "P0" });
    assert.ok(pid !== null);
    const all = (extra: Partial<JobDefinition>) => definition(`all-${String(extra.excludeOptOut)}`, "true", extra);
    const out = await evaluateJob(ts.store, SCOPE, [all({ excludeOptOut: true }), all({ excludeOptOut: false })], { now: NOW });
    const strict = membersOf(out.memberships, "all-true", "realized");
    const loose = membersOf(out.memberships, "all-false", "realized");
    assert.equal(loose.size, N);
    assert.equal(strict.size, N - 1);
    assert.ok(!strict.has(pid) && loose.has(pid));
  });

  it("a second job records exited for profiles that left, keeps the others existing", async () => {
    const d = definition("adults", "person.age >= 18", { excludeOptOut: false });
    const first = await evaluateJob(ts.store, SCOPE, [d], { now: NOW });
    const members = membersOf(first.memberships, "adults", "realized");
    await ts.store.applyMembershipSets(SCOPE, first.memberships, { source: "batch", at: NOW });
    assert.ok(members.size >= 2, "fixture has adults");
    // Two members become minors; one non-member becomes an adult.
    const pidToEcid = new Map<string, string>();
    for (let i = 0; i < N; i++) pidToEcid.set((await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: `P${i}` }))!, `P${i}`);
    const leaving = [...members].slice(0, 2);
    const joining = [...pidToEcid.keys()].find((p) => !members.has(p))!;
    const t = NOW + 1000;
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      ...leaving.map((p, index) => ({ index, value: { identityMap: { ECID: [{ id: pidToEcid.get(p)!, primary: true }] }, person: { age: 5 }, _repo: { modifyDate: new Date(t).toISOString() } } })),
      { index: 2, value: { identityMap: { ECID: [{ id: pidToEcid.get(joining)!, primary: true }] }, person: { age: 40 }, _repo: { modifyDate: new Date(t).toISOString() } } },
    ], { now: t });
    const second = await evaluateJob(ts.store, SCOPE, [d], { now: t + 1000 });
    const c = second.counters.get("adults")!;
    assert.deepEqual(membersOf(second.memberships, "adults", "exited"), new Set(leaving));
    assert.deepEqual(membersOf(second.memberships, "adults", "realized"), new Set([joining]));
    assert.equal(c.exited, 2);
    assert.equal(c.realized, 1);
    assert.equal(c.existing, members.size - 2);
    assert.equal(c.qualified, members.size - 1);
    assert.deepEqual(await ts.store.applyMembershipSets(SCOPE, second.memberships, { source: "batch", at: t + 1000 }), { realized: 1, exited: 2 });
    const transitions = await ts.store.listTransitions(SCOPE, { definitionId: "adults", since: t + 1000 });
    assert.equal(transitions.length, 3);
    assert.ok(transitions.every((tr) => tr.source === "batch"));
    assert.deepEqual((await ts.store.getMemberships(SCOPE, leaving[0]!)).find((m) => m.definitionId === "adults")?.status, "exited");
  });

  it("with identityGraph none, evaluates each identity on its own; a profile qualifies when one does", async () => {
    // Two profiles get a second fragment keyed by an Email identity linked to their ECID.
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { Email: [{ id: "p1@x.com", primary: true }], ECID: [{ id: "P1" }] }, tier: "email-only" } },
      { index: 1, value: { identityMap: { Email: [{ id: "p2@x.com", primary: true }], ECID: [{ id: "P2" }] }, tier: "email-only", person: { age: 99 } } },
    ], { now: NOW - 400 });
    const none = { ...NO_MERGE_POLICY, id: "mp-none" };
    const texts = ['tier = "email-only"', "person.age = 99", 'tier = "email-only" and person.age.isNull()'];
    const defs = texts.map((t, i) => definition(`none${i}`, t, { policy: none, excludeOptOut: false }));
    const out = await evaluateJob(ts.store, SCOPE, defs, { now: NOW });
    const p1 = await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: "P1" });
    for (const d of defs) {
      const want = await referenceMembers(ts.store, d.query, { excludeOptOut: false, policy: NO_MERGE_POLICY });
      assert.deepEqual(membersOf(out.memberships, d.id, "realized"), want, d.id);
    }
    assert.ok(membersOf(out.memberships, "none0", "realized").has(p1!), "the Email entry qualifies the profile");
    assert.equal(out.profilesByPolicy["mp-none"], out.totalProfiles + 2, "two profiles are scanned once per identity");
  });

  it("stops between chunks when cancelled, having written nothing", async () => {
    const before = await ts.store.listTransitions(SCOPE);
    for (const backend of ["columnar", "sql"] as const) {
      let calls = 0;
      await assert.rejects(
        evaluateJob(ts.store, SCOPE, [definition("c1", "true")], { now: NOW, backend, chunkSize: 10, isCancelled: () => ++calls > 2 }),
        (e: unknown) => e instanceof JobCancelledError,
      );
      assert.equal(calls, 3, backend);
    }
    assert.deepEqual(await ts.store.listTransitions(SCOPE), before);
  });

  it("reads events only when a definition of the scan does, or identities are not stitched", async () => {
    const seen: Array<boolean | undefined> = [];
    const spy = new Proxy(ts.store, {
      get(target, prop, receiver) {
        if (prop !== "scanProfiles") return Reflect.get(target, prop, receiver) as unknown;
        return (scope: typeof SCOPE, policy: Parameters<typeof target.scanProfiles>[1], o?: ScanOptions) => {
          seen.push(o?.events);
          return target.scanProfiles(scope, policy, o);
        };
      },
    });
    await evaluateJob(spy, SCOPE, [definition("attr", "person.age > 3")], { now: NOW });
    await evaluateJob(spy, SCOPE, [definition("attr", "person.age > 3"), definition("ev", "xEvent.count() > 1")], { now: NOW });
    await evaluateJob(spy, SCOPE, [definition("attr-none", "person.age > 3", { policy: { ...NO_MERGE_POLICY, id: "none" } })], { now: NOW });
    assert.deepEqual(seen, [false, true, true]);
  });

  it("reports progress in profiles processed", async () => {
    for (const backend of ["columnar", "sql"] as const) {
      const seen: number[] = [];
      await evaluateJob(ts.store, SCOPE, [definition("p1", "true")], { now: NOW, backend, chunkSize: 25, onProgress: (n) => seen.push(n) });
      assert.deepEqual(seen, [25, 50, 75, N], backend);
    }
  });
});
