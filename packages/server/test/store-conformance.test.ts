/**
 * One conformance suite for every MetadataStore implementation (the one
 * SEGMENTD_TEST_STORE selects): tenant scoping, unique names, limits inside
 * the write transaction, references, merge-policy invariants, datastreams,
 * reopen, and a database of an earlier version opening unchanged.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import path from "node:path";
import pg from "pg";
import {
  DuplicateAudienceError, DuplicateNameError, EdgePolicyConflictError, HasDependentsError, LimitExceededError, MergePolicyInUseError,
  type DatastreamRecord, type ExternalAudience, type DefinitionRecord, type MergePolicyRecord, type MetadataStore, type TenantScope,
} from "../src/stores/types.js";
import { DEFINITION_COLUMN_NAMES, definitionColumns } from "../src/stores/row-mapping.js";
import { coreMigrations } from "../src/stores/sql-common.js";
import { createTestStore, type TestStoreHandle } from "./helpers/test-store.js";

const A: TenantScope = { orgId: "orgA", sandboxId: "sb-1" };
const A2: TenantScope = { orgId: "orgA", sandboxId: "sb-2" };
const B: TenantScope = { orgId: "orgB", sandboxId: "sb-1" };
const LIMITS = { definitions: 100, streaming: 100, edge: 100 };

let handle: TestStoreHandle;
let store: MetadataStore;
before(async () => {
  handle = await createTestStore("conf");
  store = await handle.open();
});
after(async () => {
  await store.close();
  await handle.dispose();
});

let seq = 0;
function def(scope: TenantScope, name: string, opts: { refs?: string[]; edge?: boolean; streaming?: boolean; mp?: string } = {}): DefinitionRecord {
  const id = `def-${++seq}`;
  return {
    definition: {
      id, imsOrgId: scope.orgId, sandbox: { sandboxId: scope.sandboxId, sandboxName: "prod", type: "production", default: true },
      name, profileInstanceId: "ups", schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: "a = 1" }, mergePolicyId: opts.mp ?? "mp-1",
      evaluationInfo: { batch: { enabled: true }, continuous: { enabled: opts.streaming ?? false }, synchronous: { enabled: opts.edge ?? false } },
      dataGovernancePolicy: { excludeOptOut: true }, creationTime: 1000 + seq, updateEpoch: 1, updateTime: 1000 + seq,
      classification: { queryType: "profile-only", batch: true, continuous: true, synchronous: true, reasons: [], mergePolicyActiveOnEdge: true },
    },
    canonicalText: "a = 1",
    references: opts.refs ?? [],
  };
}

function mp(scope: TenantScope, id: string, opts: { isDefault?: boolean; edge?: boolean; schema?: string } = {}): MergePolicyRecord {
  return {
    policy: {
      id, name: id, imsOrgId: scope.orgId, sandbox: { sandboxId: scope.sandboxId, sandboxName: "prod", type: "production", default: true },
      schema: { name: opts.schema ?? "_xdm.context.profile" }, version: 1, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" },
      isActiveOnEdge: opts.edge ?? false, default: opts.isDefault ?? false, updateEpoch: 5,
    },
    creationTime: 5000,
  };
}

test("records are visible only in their own org and sandbox", async () => {
  const d = def(A, "scoped");
  await store.definitions.insert(A, d, LIMITS);
  assert.deepEqual(await store.definitions.get(A, d.definition.id), d);
  for (const other of [A2, B]) {
    assert.equal(await store.definitions.get(other, d.definition.id), undefined);
    assert.equal((await store.definitions.getMany(other, [d.definition.id])).size, 0);
    assert.equal((await store.definitions.list(other, { filters: {}, sort: [], offset: 0, limit: 10 })).total, 0);
    assert.equal(await store.definitions.delete(other, d.definition.id), false);
    assert.equal(await store.definitions.update(other, d, LIMITS), false);
  }
  assert.deepEqual(await store.definitions.get(A, d.definition.id), d);
});

test("names are unique per sandbox; a duplicate writes nothing", async () => {
  await store.definitions.insert(A, def(A, "uniq"), LIMITS);
  const dup = def(A, "uniq", { refs: ["x"] });
  await assert.rejects(store.definitions.insert(A, dup, LIMITS), DuplicateNameError);
  assert.equal(await store.definitions.get(A, dup.definition.id), undefined);
  assert.deepEqual(await store.definitions.dependents(A, "x"), []);
  await store.definitions.insert(A2, def(A2, "uniq"), LIMITS);
  await store.definitions.insert(B, def(B, "uniq"), LIMITS);
});

test("limits are checked in the write transaction; an update does not count itself", async () => {
  const s: TenantScope = { orgId: "orgL", sandboxId: "limits" };
  const lim = { definitions: 3, streaming: 2, edge: 1 };
  const e1 = def(s, "e1", { edge: true });
  await store.definitions.insert(s, e1, lim);
  await assert.rejects(store.definitions.insert(s, def(s, "e2", { edge: true }), lim), (e: unknown) => e instanceof LimitExceededError && e.limit === "edge" && e.max === 1);
  await store.definitions.insert(s, def(s, "s1", { streaming: true }), lim);
  await assert.rejects(store.definitions.insert(s, def(s, "s2", { streaming: true }), lim), (e: unknown) => e instanceof LimitExceededError && e.limit === "streaming");
  await store.definitions.insert(s, def(s, "b1"), lim);
  await assert.rejects(store.definitions.insert(s, def(s, "b2"), lim), (e: unknown) => e instanceof LimitExceededError && e.limit === "definitions");
  assert.equal(await store.definitions.update(s, { ...e1, definition: { ...e1.definition, description: "x" } }, lim), true);
  assert.equal((await store.definitions.get(s, e1.definition.id))!.definition.description, "x");
});

test("references: dependents are listed and block delete", async () => {
  const base = def(A, "ref-base");
  await store.definitions.insert(A, base, LIMITS);
  const d1 = def(A, "ref-d1", { refs: [base.definition.id, "ghost"] });
  await store.definitions.insert(A, d1, LIMITS);
  assert.deepEqual(await store.definitions.dependents(A, base.definition.id), [d1.definition.id]);
  await assert.rejects(store.definitions.delete(A, base.definition.id), (e: unknown) => e instanceof HasDependentsError && e.dependents[0] === d1.definition.id);
  assert.ok(await store.definitions.get(A, base.definition.id));
  // Rewriting d1 without the reference releases base.
  assert.equal(await store.definitions.update(A, { ...d1, references: [] }, LIMITS), true);
  assert.deepEqual(await store.definitions.dependents(A, base.definition.id), []);
  assert.equal(await store.definitions.delete(A, base.definition.id), true);
  assert.equal(await store.definitions.delete(A, base.definition.id), false);
});

test("merge policies: one default per schema class, one edge policy per sandbox, in-use delete refused", async () => {
  const s: TenantScope = { orgId: "orgM", sandboxId: "mp" };
  await store.mergePolicies.insert(s, mp(s, "p1", { isDefault: true, edge: true }));
  await store.mergePolicies.insert(s, mp(s, "p-event", { isDefault: true, schema: "_xdm.context.experienceevent" }));
  await store.mergePolicies.insert(s, mp(s, "p2", { isDefault: true }));
  assert.equal((await store.mergePolicies.getDefault(s, "_xdm.context.profile"))!.policy.id, "p2");
  const p1 = (await store.mergePolicies.get(s, "p1"))!.policy;
  assert.deepEqual([p1.default, p1.version], [false, 2]);
  assert.equal((await store.mergePolicies.getDefault(s, "_xdm.context.experienceevent"))!.policy.id, "p-event");
  await assert.rejects(store.mergePolicies.insert(s, mp(s, "p3", { edge: true })), (e: unknown) => e instanceof EdgePolicyConflictError && e.activeId === "p1");
  assert.equal(await store.mergePolicies.get(s, "p3"), undefined);
  assert.equal(await store.mergePolicies.count(s), 3);
  const user = def(s, "mp-user", { mp: "p2" });
  await store.definitions.insert(s, user, LIMITS);
  await assert.rejects(store.mergePolicies.delete(s, "p2"), (e: unknown) => e instanceof MergePolicyInUseError && e.total === 1);
  await store.definitions.delete(s, user.definition.id);
  assert.equal(await store.mergePolicies.delete(s, "p2"), true);
  const page = await store.mergePolicies.list(s, { filters: {}, order: { field: "name", direction: "desc" }, offset: 0, limit: 10 });
  assert.deepEqual(page.items.map((x) => x.policy.id), ["p1", "p-event"]);
  assert.equal((await store.mergePolicies.get(B, "p1")), undefined);
});

test("data survives closing and reopening the store (migrations are idempotent)", async () => {
  const d = def(A, "reopen");
  await store.definitions.insert(A, d, LIMITS);
  await store.close();
  store = await handle.open();
  assert.deepEqual(await store.definitions.get(A, d.definition.id), d);
  await store.ping();
});

function stream(scope: TenantScope, id: string, creationTime: number, name = id): DatastreamRecord {
  return { id, name, imsOrgId: scope.orgId, sandboxName: "prod", eventDatasetId: "ds-events", edgeSegmentation: true, creationTime, updateTime: creationTime };
}

test("datastreams: scoped reads and writes, oldest first, ids global", async () => {
  const s: TenantScope = { orgId: "orgD", sandboxId: "ds" };
  const other: TenantScope = { orgId: "orgD2", sandboxId: "ds" };
  const d2 = stream(s, "dst-2", 20);
  const d1 = stream(s, "dst-1", 20);
  const d0 = stream(s, "dst-0", 30);
  for (const d of [d2, d1, d0]) await store.datastreams.insert(s, d);
  const o = stream(other, "dst-o", 10);
  await store.datastreams.insert(other, o);
  // creationTime, then id.
  assert.deepEqual(await store.datastreams.list(s), [d1, d2, d0]);
  assert.deepEqual(await store.datastreams.list(other), [o]);
  assert.deepEqual(await store.datastreams.get(s, "dst-1"), d1);
  // The id is the key whatever the scope: a second insert of it fails.
  await assert.rejects(store.datastreams.insert(other, { ...d1, imsOrgId: other.orgId }));
  for (const x of [other, A, { orgId: s.orgId, sandboxId: "ds-other" }]) {
    assert.equal(await store.datastreams.get(x, "dst-1"), undefined);
    assert.equal(await store.datastreams.update(x, { ...d1, name: "hijacked" }), false);
    assert.equal(await store.datastreams.delete(x, "dst-1"), false);
  }
  assert.deepEqual(await store.datastreams.get(s, "dst-1"), d1, "nothing changed by the other scopes");
  const renamed = { ...d1, name: "renamed", edgeSegmentation: false, updateTime: 99 };
  assert.equal(await store.datastreams.update(s, renamed), true);
  assert.deepEqual(await store.datastreams.get(s, "dst-1"), renamed);
  // The cross-tenant reads of the edge path.
  assert.deepEqual(await store.datastreams.findById("dst-o"), o);
  assert.equal(await store.datastreams.findById("nope"), undefined);
  assert.deepEqual((await store.datastreams.all()).map((d) => d.id), ["dst-o", "dst-1", "dst-2", "dst-0"]);
  assert.equal(await store.datastreams.delete(s, "dst-2"), true);
  assert.equal(await store.datastreams.delete(s, "dst-2"), false);
  assert.deepEqual((await store.datastreams.list(s)).map((d) => d.id), ["dst-1", "dst-0"]);
  // importIfEmpty: the table holds datastreams, so nothing is written.
  assert.equal(await store.datastreams.importIfEmpty([{ scope: s, record: stream(s, "dst-late", 1) }]), false);
  assert.equal(await store.datastreams.findById("dst-late"), undefined);
});

function external(scope: TenantScope, id: string, audienceId: string, creationTime: number, namespace = "CustomerAudienceUpload"): ExternalAudience {
  return {
    id, audienceId, namespace, name: id, imsOrgId: scope.orgId, sandbox: { sandboxId: scope.sandboxId, sandboxName: "prod", type: "production", default: true },
    type: "ExternalSegment", originName: "CUSTOM_UPLOAD", lifecycleState: "published", labels: [], creationTime, updateTime: creationTime, updateEpoch: 1,
  };
}

test("external audiences: scoped, oldest first, one (namespace, audienceId) per sandbox", async () => {
  const s: TenantScope = { orgId: "orgE", sandboxId: "ea" };
  const other: TenantScope = { orgId: "orgE2", sandboxId: "ea" };
  const e2 = external(s, "ext-2", "aud-2", 20);
  const e1 = external(s, "ext-1", "aud-1", 20);
  const e0 = external(s, "ext-0", "aud-0", 10);
  for (const e of [e2, e1, e0]) await store.externalAudiences.insert(s, e);
  assert.deepEqual(await store.externalAudiences.list(s), [e0, e1, e2]);
  assert.equal(await store.externalAudiences.count(s), 3);
  await assert.rejects(store.externalAudiences.insert(s, external(s, "ext-dup", "aud-1", 30)), (err: unknown) =>
    err instanceof DuplicateAudienceError && err.namespace === "CustomerAudienceUpload" && err.audienceId === "aud-1");
  assert.equal(await store.externalAudiences.get(s, "ext-dup"), undefined, "nothing written");
  // The same audienceId in another namespace or another tenant is another audience.
  await store.externalAudiences.insert(s, external(s, "ext-aam", "aud-1", 40, "AAM"));
  await store.externalAudiences.insert(other, external(other, "ext-o", "aud-1", 5));
  for (const x of [other, A]) {
    assert.equal(await store.externalAudiences.get(x, "ext-1"), undefined);
    assert.equal((await store.externalAudiences.getMany(x, ["ext-1", "ext-2"])).size, 0);
    assert.equal(await store.externalAudiences.update(x, { ...e1, name: "hijacked" }), false);
    assert.equal(await store.externalAudiences.delete(x, "ext-1"), false);
  }
  assert.deepEqual(await store.externalAudiences.get(s, "ext-1"), e1, "nothing changed by the other scopes");
  const renamed = { ...e1, name: "renamed", lifecycleState: "inactive" as const, updateTime: 99 };
  assert.equal(await store.externalAudiences.update(s, renamed), true);
  assert.deepEqual([...(await store.externalAudiences.getMany(s, ["ext-1", "ext-2", "nope"])).keys()].sort(), ["ext-1", "ext-2"]);
  assert.deepEqual(await store.externalAudiences.get(s, "ext-1"), renamed);
  assert.equal(await store.externalAudiences.delete(s, "ext-2"), true);
  assert.equal(await store.externalAudiences.delete(s, "ext-2"), false);
  assert.deepEqual((await store.externalAudiences.list(s)).map((e) => e.id), ["ext-0", "ext-1", "ext-aam"]);
  assert.deepEqual((await store.externalAudiences.list(other)).map((e) => e.id), ["ext-o"]);
});

test("datastreams: importIfEmpty writes every item into an empty table, once", async () => {
  const h = await createTestStore("confimp");
  const m = await h.open();
  try {
    const s: TenantScope = { orgId: "orgI", sandboxId: "sb" };
    const t: TenantScope = { orgId: "orgJ", sandboxId: "sb" };
    const items = [{ scope: s, record: stream(s, "imp-1", 1) }, { scope: t, record: stream(t, "imp-2", 2) }];
    assert.equal(await m.datastreams.importIfEmpty(items), true);
    assert.equal(await m.datastreams.importIfEmpty([{ scope: s, record: stream(s, "imp-3", 3) }]), false);
    assert.deepEqual(await m.datastreams.all(), items.map((i) => i.record));
    assert.deepEqual(await m.datastreams.list(s), [items[0]!.record]);
    assert.deepEqual(await m.datastreams.list(t), [items[1]!.record]);
  } finally {
    await m.close();
    await h.dispose();
  }
});

test("datastreams: of two handles importing at once into an empty table, exactly one imports", async () => {
  const h = await createTestStore("confimp2");
  const m1 = await h.open();
  const m2 = await h.open();
  try {
    const s: TenantScope = { orgId: "orgI", sandboxId: "sb" };
    const one = [{ scope: s, record: stream(s, "one-1", 1) }, { scope: s, record: stream(s, "one-2", 2) }];
    const two = [{ scope: s, record: stream(s, "two-1", 1) }];
    const [r1, r2] = await Promise.all([m1.datastreams.importIfEmpty(one), m2.datastreams.importIfEmpty(two)]);
    assert.equal(Number(r1) + Number(r2), 1);
    assert.deepEqual(await m2.datastreams.all(), (r1 ? one : two).map((i) => i.record));
  } finally {
    await m1.close();
    await m2.close();
    await h.dispose();
  }
});

test("data survives closing and reopening the store (datastreams too)", async () => {
  const s: TenantScope = { orgId: "orgR", sandboxId: "sb" };
  const d = stream(s, "dst-reopen", 5);
  await store.datastreams.insert(s, d);
  await store.close();
  store = await handle.open();
  assert.deepEqual(await store.datastreams.get(s, d.id), d);
  assert.deepEqual(await store.datastreams.findById(d.id), d);
});

test("a database migrated by the previous version (no datastreams table) opens unchanged and gains the table", async () => {
  const h = await createTestStore("confold");
  const previous = coreMigrations(h.kind === "postgres" ? "postgres" : "sqlite").filter((m) => m.version <= 2);
  assert.deepEqual(previous.map((m) => m.version), [1, 2]);
  const d = def(A, "from the previous version");
  const cols = definitionColumns(A, d);
  // The database exactly as the previous version left it: migrations 1 and 2, one definition.
  if (h.kind === "postgres") {
    const c = new pg.Client({ connectionString: h.databaseUrl });
    await c.connect();
    try {
      await c.query("CREATE TABLE segmentd_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)");
      for (const m of previous) {
        for (const st of m.statements) await c.query(st);
        await c.query("INSERT INTO segmentd_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [m.version, m.name, 1]);
      }
      await c.query(`INSERT INTO definitions (${DEFINITION_COLUMN_NAMES}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(", ")})`, cols);
    } finally {
      await c.end();
    }
  } else {
    const db = new Database(path.join(h.dataDir, "metadata.sqlite"));
    db.exec("CREATE TABLE segmentd_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
    for (const m of previous) {
      for (const st of m.statements) db.exec(st);
      db.prepare("INSERT INTO segmentd_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, 1);
    }
    db.prepare(`INSERT INTO definitions (${DEFINITION_COLUMN_NAMES}) VALUES (${cols.map(() => "?").join(", ")})`).run(...cols);
    db.close();
  }
  let m = await h.open();
  try {
    assert.deepEqual(await m.definitions.get(A, d.definition.id), d);
    assert.deepEqual(await m.datastreams.all(), []);
    const x = stream(A, "dst-after-upgrade", 7);
    await m.datastreams.insert(A, x);
    // Opening again applies nothing twice.
    await m.close();
    m = await h.open();
    assert.deepEqual(await m.datastreams.list(A), [x]);
    assert.deepEqual(await m.definitions.get(A, d.definition.id), d);
  } finally {
    await m.close();
    await h.dispose();
  }
});
