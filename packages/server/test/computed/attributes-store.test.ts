/**
 * The computed attributes repository on the store under test (embedded or PostgreSQL): scoped
 * reads and writes, the unique name, the limit held under concurrent inserts, and migration 6
 * on a database of version 5.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { MetadataStore, TenantScope } from "../../src/stores/types.js";
import { ComputedAttributeLimitError, DuplicateComputedAttributeError, type ComputedAttributeRecord } from "../../src/stores/computed-attributes.js";
import { coreMigrations, MIGRATIONS_TABLE } from "../../src/stores/sql-common.js";
import { migratePostgres, migrateSqlite } from "../../src/storage-kit/migrations.js";
import { createPool } from "../../src/storage-kit/postgres.js";
import { openSqlite } from "../../src/storage-kit/sqlite.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

let handle: TestStoreHandle;
let store: MetadataStore;
before(async () => {
  handle = await createTestStore("ca-store");
  store = await handle.open();
});
after(async () => {
  await store.close();
  await handle.dispose();
});

const A: TenantScope = { orgId: "orgA", sandboxId: "sbA" };
const B: TenantScope = { orgId: "orgB", sandboxId: "sbA" };
const A2: TenantScope = { orgId: "orgA", sandboxId: "sbB" };

let n = 0;
function record(name: string, extra: Partial<ComputedAttributeRecord> = {}): ComputedAttributeRecord {
  n += 1;
  return {
    id: `id-${String(n).padStart(4, "0")}`,
    name,
    displayName: name,
    description: "",
    expression: { type: "PQL", format: "pql/text", value: "xEvent.count()" },
    keepCurrent: false,
    duration: { count: 1, unit: "DAYS" },
    mergeFunction: "COUNT",
    returnType: "integer",
    status: "NEW",
    createEpoch: 1000 + n,
    updateEpoch: 1000 + n,
    ...extra,
  };
}

test("insert, get, list, update and delete stay in their scope", async () => {
  const x = record("alpha");
  const y = record("beta", { status: "DRAFT" });
  await store.computedAttributes.insert(A, x, 10);
  await store.computedAttributes.insert(A, y, 10);
  assert.deepEqual(await store.computedAttributes.get(A, x.id), x);
  assert.equal(await store.computedAttributes.get(B, x.id), undefined);
  assert.equal(await store.computedAttributes.get(A2, x.id), undefined);
  assert.deepEqual(await store.computedAttributes.list(A), [x, y]);
  assert.deepEqual(await store.computedAttributes.list(B), []);
  const y2 = { ...y, status: "NEW" as const, description: "changed", updateEpoch: 9999 };
  assert.equal(await store.computedAttributes.update(B, y2), false);
  assert.deepEqual(await store.computedAttributes.get(A, y.id), y);
  assert.equal(await store.computedAttributes.update(A, y2), true);
  assert.deepEqual(await store.computedAttributes.get(A, y.id), y2);
  assert.equal(await store.computedAttributes.delete(B, y.id), false);
  assert.equal(await store.computedAttributes.delete(A, y.id), true);
  assert.deepEqual(await store.computedAttributes.list(A), [x]);
  // The same name in another org or sandbox is another attribute.
  await store.computedAttributes.insert(B, record("alpha"), 10);
  await store.computedAttributes.insert(A2, record("alpha"), 10);
  await assert.rejects(store.computedAttributes.insert(A, record("alpha"), 10), (e: unknown) => e instanceof DuplicateComputedAttributeError && e.attributeName === "alpha");
  assert.deepEqual((await store.computedAttributes.list(A)).map((r) => r.name), ["alpha"]);
});

test("the limit counts what is not DISABLED and holds under concurrent inserts", async () => {
  const S: TenantScope = { orgId: "orgL", sandboxId: "sbL" };
  await store.computedAttributes.insert(S, record("off", { status: "DISABLED" }), 3);
  const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.computedAttributes.insert(S, record(`c${i}`), 3)));
  assert.equal(results.filter((r) => r.status === "fulfilled").length, 3);
  for (const r of results) if (r.status === "rejected") assert.ok(r.reason instanceof ComputedAttributeLimitError && r.reason.limit === 3);
  const all = await store.computedAttributes.list(S);
  assert.equal(all.length, 4);
  assert.equal(all.filter((r) => r.status !== "DISABLED").length, 3);
});

async function migrateOnly(h: TestStoreHandle, keep: (version: number) => boolean): Promise<number[]> {
  const list = coreMigrations(h.kind === "postgres" ? "postgres" : "sqlite").filter((m) => keep(m.version));
  const query = `SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`;
  if (h.kind === "postgres") {
    const pool = createPool(h.databaseUrl!, { max: 1 });
    try {
      if (list.length > 0) await migratePostgres(pool, list, { table: MIGRATIONS_TABLE, lock: "segmentd_migrations" });
      return (await pool.query<{ version: number }>(query)).rows.map((r) => r.version);
    } finally {
      await pool.end();
    }
  }
  const db = openSqlite(path.join(h.dataDir, "metadata.sqlite"));
  try {
    if (list.length > 0) migrateSqlite(db, list, { table: MIGRATIONS_TABLE });
    return (db.prepare(query).all() as { version: number }[]).map((r) => r.version);
  } finally {
    db.close();
  }
}

test("migration 6: a database of version 5 opens and gains the table", async () => {
  const h = await createTestStore("ca-old5");
  try {
    assert.deepEqual(await migrateOnly(h, (v) => v <= 5), [1, 2, 3, 4, 5]);
    const m = await h.open();
    try {
      const x = record("afterUpgrade");
      await m.computedAttributes.insert(A, x, 5);
      assert.deepEqual(await m.computedAttributes.get(A, x.id), x);
    } finally {
      await m.close();
    }
    assert.deepEqual((await migrateOnly(h, () => false)).includes(6), true);
  } finally {
    await h.dispose();
  }
});
