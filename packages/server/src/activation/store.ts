/**
 * Storage of base connections, target connections and flows: one table on both stores
 * (embedded SQLite `<dataDir>/activation.db`, or PostgreSQL in the URL's search_path),
 * a JSON document per row plus the columns the queries need, and the sealed secrets in
 * a column of their own. Every read and write is scoped by org and sandbox; writes that
 * check a reference (a target's base connection, a flow's target) or that delete run in
 * one transaction serialized per sandbox, so a reference can never dangle.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import type Database from "better-sqlite3";
import type pg from "pg";
import { migratePostgres, migrateSqlite, type Migration } from "../storage-kit/migrations.js";
import { createPool, withTransaction } from "../storage-kit/postgres.js";
import { openSqlite } from "../storage-kit/sqlite.js";
import type { TenantScope } from "./types.js";

export type ResourceKind = "connection" | "target" | "flow" | "source";

export interface StoredResource {
  kind: ResourceKind;
  scope: TenantScope;
  id: string;
  /** Flows: enabled | disabled; the others: enabled. */
  state: string;
  /** What the row refers to: a target's base connection, a flow's target connection. */
  ref: string | null;
  doc: Record<string, unknown>;
  /** Sealed (secrets.ts), or null. */
  secret: string | null;
  etag: string;
  version: number;
  created: number;
  updated: number;
}

export type InsertOutcome = "ok" | "missing-ref" | "limit";
export type DeleteOutcome = { ok: true } | { ok: false; reason: "missing" } | { ok: false; reason: "in-use"; by: string };

export interface InsertCheck {
  /** The row `r.ref` names must exist, of this kind, in the same sandbox. */
  refKind?: ResourceKind;
  /** At most this many rows of the kind per sandbox. */
  limit: number;
}

export interface ActivationStore {
  readonly kind: "embedded" | "postgres";
  insert(r: StoredResource, check: InsertCheck): Promise<InsertOutcome>;
  get(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource | null>;
  list(kind: ResourceKind, scope: TenantScope, page: { offset: number; limit: number }): Promise<{ items: StoredResource[]; total: number }>;
  /** Replaces the row when its etag is still `expectedEtag`; false otherwise (changed or gone). */
  replace(r: StoredResource, expectedEtag: string): Promise<boolean>;
  /** Deletes unless a row of `referencedBy` kind still refers to it. */
  delete(kind: ResourceKind, scope: TenantScope, id: string, referencedBy?: ResourceKind): Promise<DeleteOutcome>;
  /** Ids of the rows of `kind` in the sandbox that refer to `ref`. */
  referrers(kind: ResourceKind, scope: TenantScope, ref: string): Promise<string[]>;
  /** Every row of the kind in this state, every tenant (the deliverer's work list). */
  listByState(kind: ResourceKind, state: string): Promise<StoredResource[]>;
  close(): Promise<void>;
}

const MIGRATIONS = (jsonType: string, intType: string): Migration[] => [
  {
    version: 1,
    name: "activation resources",
    statements: [
      `CREATE TABLE IF NOT EXISTS activation_resources (
        kind TEXT NOT NULL, org TEXT NOT NULL, sandbox TEXT NOT NULL, id TEXT NOT NULL,
        state TEXT NOT NULL, ref TEXT, doc ${jsonType} NOT NULL, secret TEXT, etag TEXT NOT NULL,
        version ${intType} NOT NULL, created ${intType} NOT NULL, updated ${intType} NOT NULL,
        PRIMARY KEY (org, sandbox, kind, id))`,
      "CREATE INDEX IF NOT EXISTS activation_resources_ref ON activation_resources (org, sandbox, kind, ref)",
      "CREATE INDEX IF NOT EXISTS activation_resources_state ON activation_resources (kind, state)",
    ],
  },
];

interface Row {
  kind: string;
  org: string;
  sandbox: string;
  id: string;
  state: string;
  ref: string | null;
  doc: string | Record<string, unknown>;
  secret: string | null;
  etag: string;
  version: number | string;
  created: number | string;
  updated: number | string;
}

const COLUMNS = "kind, org, sandbox, id, state, ref, doc, secret, etag, version, created, updated";

function fromRow(r: Row): StoredResource {
  return {
    kind: r.kind as ResourceKind,
    scope: { orgId: r.org, sandboxName: r.sandbox },
    id: r.id,
    state: r.state,
    ref: r.ref,
    doc: typeof r.doc === "string" ? (JSON.parse(r.doc) as Record<string, unknown>) : r.doc,
    secret: r.secret,
    etag: r.etag,
    version: Number(r.version),
    created: Number(r.created),
    updated: Number(r.updated),
  };
}

function values(r: StoredResource): unknown[] {
  return [r.kind, r.scope.orgId, r.scope.sandboxName, r.id, r.state, r.ref, JSON.stringify(r.doc), r.secret, r.etag, r.version, r.created, r.updated];
}

export class SqliteActivationStore implements ActivationStore {
  readonly kind = "embedded" as const;

  constructor(private readonly db: Database.Database) {
    migrateSqlite(db, MIGRATIONS("TEXT", "INTEGER"), { table: "activation_migrations" });
  }

  async insert(r: StoredResource, check: InsertCheck): Promise<InsertOutcome> {
    const run = this.db.transaction((): InsertOutcome => {
      if (check.refKind !== undefined) {
        const found = this.db.prepare("SELECT 1 FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? AND id = ?").get(r.scope.orgId, r.scope.sandboxName, check.refKind, r.ref);
        if (!found) return "missing-ref";
      }
      const n = this.db.prepare("SELECT count(*) AS n FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ?").get(r.scope.orgId, r.scope.sandboxName, r.kind) as { n: number };
      if (n.n >= check.limit) return "limit";
      this.db.prepare(`INSERT INTO activation_resources (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(...values(r));
      return "ok";
    });
    return run.immediate();
  }

  async get(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource | null> {
    const row = this.db.prepare(`SELECT ${COLUMNS} FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? AND id = ?`).get(scope.orgId, scope.sandboxName, kind, id) as Row | undefined;
    return row ? fromRow(row) : null;
  }

  async list(kind: ResourceKind, scope: TenantScope, page: { offset: number; limit: number }): Promise<{ items: StoredResource[]; total: number }> {
    const total = (this.db.prepare("SELECT count(*) AS n FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ?").get(scope.orgId, scope.sandboxName, kind) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT ${COLUMNS} FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? ORDER BY created DESC, id LIMIT ? OFFSET ?`)
      .all(scope.orgId, scope.sandboxName, kind, page.limit, page.offset) as Row[];
    return { items: rows.map(fromRow), total };
  }

  async replace(r: StoredResource, expectedEtag: string): Promise<boolean> {
    const res = this.db
      .prepare("UPDATE activation_resources SET state = ?, ref = ?, doc = ?, secret = ?, etag = ?, version = ?, updated = ? WHERE org = ? AND sandbox = ? AND kind = ? AND id = ? AND etag = ?")
      .run(r.state, r.ref, JSON.stringify(r.doc), r.secret, r.etag, r.version, r.updated, r.scope.orgId, r.scope.sandboxName, r.kind, r.id, expectedEtag);
    return res.changes === 1;
  }

  async delete(kind: ResourceKind, scope: TenantScope, id: string, referencedBy?: ResourceKind): Promise<DeleteOutcome> {
    const run = this.db.transaction((): DeleteOutcome => {
      if (referencedBy !== undefined) {
        const by = this.db.prepare("SELECT id FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? AND ref = ? ORDER BY id LIMIT 1").get(scope.orgId, scope.sandboxName, referencedBy, id) as { id: string } | undefined;
        if (by) return { ok: false, reason: "in-use", by: by.id };
      }
      const res = this.db.prepare("DELETE FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? AND id = ?").run(scope.orgId, scope.sandboxName, kind, id);
      return res.changes === 1 ? { ok: true } : { ok: false, reason: "missing" };
    });
    return run.immediate();
  }

  async referrers(kind: ResourceKind, scope: TenantScope, ref: string): Promise<string[]> {
    const rows = this.db.prepare("SELECT id FROM activation_resources WHERE org = ? AND sandbox = ? AND kind = ? AND ref = ? ORDER BY id").all(scope.orgId, scope.sandboxName, kind, ref) as { id: string }[];
    return rows.map((r) => r.id);
  }

  async listByState(kind: ResourceKind, state: string): Promise<StoredResource[]> {
    return (this.db.prepare(`SELECT ${COLUMNS} FROM activation_resources WHERE kind = ? AND state = ? ORDER BY org, sandbox, id`).all(kind, state) as Row[]).map(fromRow);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

export class PgActivationStore implements ActivationStore {
  readonly kind = "postgres" as const;

  constructor(private readonly pool: pg.Pool) {}

  /** One transaction per sandbox at a time, across every server process sharing the database. */
  private tx<T>(scope: TenantScope, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return withTransaction(this.pool, fn, { lock: `segmentd-activation|${scope.orgId}|${scope.sandboxName}` });
  }

  async insert(r: StoredResource, check: InsertCheck): Promise<InsertOutcome> {
    return this.tx(r.scope, async (c) => {
      if (check.refKind !== undefined) {
        const found = await c.query("SELECT 1 FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 AND id = $4", [r.scope.orgId, r.scope.sandboxName, check.refKind, r.ref]);
        if (found.rowCount === 0) return "missing-ref";
      }
      const n = await c.query<{ n: string }>("SELECT count(*) AS n FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3", [r.scope.orgId, r.scope.sandboxName, r.kind]);
      if (Number(n.rows[0]!.n) >= check.limit) return "limit";
      await c.query(`INSERT INTO activation_resources (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, values(r));
      return "ok";
    });
  }

  async get(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource | null> {
    const r = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 AND id = $4`, [scope.orgId, scope.sandboxName, kind, id]);
    return r.rows[0] ? fromRow(r.rows[0]) : null;
  }

  async list(kind: ResourceKind, scope: TenantScope, page: { offset: number; limit: number }): Promise<{ items: StoredResource[]; total: number }> {
    return withTransaction(
      this.pool,
      async (c) => {
        const total = await c.query<{ n: string }>("SELECT count(*) AS n FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3", [scope.orgId, scope.sandboxName, kind]);
        const rows = await c.query<Row>(`SELECT ${COLUMNS} FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 ORDER BY created DESC, id LIMIT $4 OFFSET $5`, [
          scope.orgId, scope.sandboxName, kind, page.limit, page.offset,
        ]);
        return { items: rows.rows.map(fromRow), total: Number(total.rows[0]!.n) };
      },
      { snapshot: true },
    );
  }

  async replace(r: StoredResource, expectedEtag: string): Promise<boolean> {
    const res = await this.pool.query(
      "UPDATE activation_resources SET state = $1, ref = $2, doc = $3, secret = $4, etag = $5, version = $6, updated = $7 WHERE org = $8 AND sandbox = $9 AND kind = $10 AND id = $11 AND etag = $12",
      [r.state, r.ref, JSON.stringify(r.doc), r.secret, r.etag, r.version, r.updated, r.scope.orgId, r.scope.sandboxName, r.kind, r.id, expectedEtag],
    );
    return res.rowCount === 1;
  }

  async delete(kind: ResourceKind, scope: TenantScope, id: string, referencedBy?: ResourceKind): Promise<DeleteOutcome> {
    return this.tx(scope, async (c): Promise<DeleteOutcome> => {
      if (referencedBy !== undefined) {
        const by = await c.query<{ id: string }>("SELECT id FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 AND ref = $4 ORDER BY id LIMIT 1", [scope.orgId, scope.sandboxName, referencedBy, id]);
        if (by.rows[0]) return { ok: false, reason: "in-use", by: by.rows[0].id };
      }
      const res = await c.query("DELETE FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 AND id = $4", [scope.orgId, scope.sandboxName, kind, id]);
      return res.rowCount === 1 ? { ok: true } : { ok: false, reason: "missing" };
    });
  }

  async referrers(kind: ResourceKind, scope: TenantScope, ref: string): Promise<string[]> {
    const r = await this.pool.query<{ id: string }>("SELECT id FROM activation_resources WHERE org = $1 AND sandbox = $2 AND kind = $3 AND ref = $4 ORDER BY id", [scope.orgId, scope.sandboxName, kind, ref]);
    return r.rows.map((x) => x.id);
  }

  async listByState(kind: ResourceKind, state: string): Promise<StoredResource[]> {
    const r = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM activation_resources WHERE kind = $1 AND state = $2 ORDER BY org, sandbox, id`, [kind, state]);
    return r.rows.map(fromRow);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** PostgreSQL when a URL is set (tables in its search_path, like the hygiene store), else `<dataDir>/activation.db`. */
export async function openActivationStore(options: { dataDir: string; databaseUrl?: string | undefined }): Promise<ActivationStore> {
  if (options.databaseUrl !== undefined && options.databaseUrl !== "") {
    const pool = createPool(options.databaseUrl, { max: 4 });
    try {
      await migratePostgres(pool, MIGRATIONS("TEXT", "BIGINT"), { table: "activation_migrations", lock: "segmentd-activation-migrations" });
    } catch (err) {
      await pool.end().catch(() => {});
      throw err;
    }
    return new PgActivationStore(pool);
  }
  mkdirSync(options.dataDir, { recursive: true });
  return new SqliteActivationStore(openSqlite(path.join(options.dataDir, "activation.db")));
}
