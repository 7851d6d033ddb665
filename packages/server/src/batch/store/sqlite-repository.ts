/**
 * Embedded (SQLite) BatchRepository, in its own database file next to the
 * others in the data directory. Writes are synchronous and fsynced
 * (synchronous=FULL), so a job's status survives kill -9 once a call returns.
 */
import type Database from "better-sqlite3";
import { openSqlite } from "../../storage-kit/sqlite.js";
import type { TenantScope } from "../../profiles/types.js";
import type { BatchRepository, ResourceKind, ResourceListQuery, StoredResource } from "./types.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS batch_resources (
  kind TEXT NOT NULL, org TEXT NOT NULL, sandbox TEXT NOT NULL, id TEXT NOT NULL,
  status TEXT NOT NULL, created INTEGER NOT NULL, doc TEXT NOT NULL,
  PRIMARY KEY (kind, org, sandbox, id));
CREATE INDEX IF NOT EXISTS batch_resources_list ON batch_resources (kind, org, sandbox, created, id);
CREATE INDEX IF NOT EXISTS batch_resources_status ON batch_resources (kind, status, created);
`;

interface Row {
  org: string;
  sandbox: string;
  id: string;
  status: string;
  created: number;
  doc: string;
}

function fromRow<T>(r: Row): StoredResource<T> {
  return { scope: { orgId: r.org, sandboxName: r.sandbox }, id: r.id, status: r.status, creationTime: r.created, doc: JSON.parse(r.doc) as T };
}

export class SqliteBatchRepository implements BatchRepository {
  private readonly db: Database.Database;

  constructor(path: string) {
    this.db = openSqlite(path);
    this.db.exec(SCHEMA);
  }

  async insert<T>(kind: ResourceKind, r: StoredResource<T>): Promise<void> {
    this.db
      .prepare("INSERT INTO batch_resources (kind, org, sandbox, id, status, created, doc) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .run(kind, r.scope.orgId, r.scope.sandboxName, r.id, r.status, r.creationTime, JSON.stringify(r.doc));
  }

  async update<T>(kind: ResourceKind, r: StoredResource<T>): Promise<boolean> {
    const info = this.db
      .prepare("UPDATE batch_resources SET status = ?, doc = ? WHERE kind = ? AND org = ? AND sandbox = ? AND id = ?")
      .run(r.status, JSON.stringify(r.doc), kind, r.scope.orgId, r.scope.sandboxName, r.id);
    return info.changes > 0;
  }

  async updateIf<T>(kind: ResourceKind, r: StoredResource<T>, from: readonly string[]): Promise<boolean> {
    if (from.length === 0) return false;
    const info = this.db
      .prepare(`UPDATE batch_resources SET status = ?, doc = ? WHERE kind = ? AND org = ? AND sandbox = ? AND id = ? AND status IN (${from.map(() => "?").join(", ")})`)
      .run(r.status, JSON.stringify(r.doc), kind, r.scope.orgId, r.scope.sandboxName, r.id, ...from);
    return info.changes > 0;
  }

  async get<T>(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource<T> | null> {
    const r = this.db.prepare("SELECT org, sandbox, id, status, created, doc FROM batch_resources WHERE kind = ? AND org = ? AND sandbox = ? AND id = ?").get(kind, scope.orgId, scope.sandboxName, id) as Row | undefined;
    return r === undefined ? null : fromRow<T>(r);
  }

  async list<T>(kind: ResourceKind, scope: TenantScope, q: ResourceListQuery): Promise<{ items: StoredResource<T>[]; total: number }> {
    const where = ["kind = ?", "org = ?", "sandbox = ?"];
    const params: Array<string | number> = [kind, scope.orgId, scope.sandboxName];
    if (q.status !== undefined) {
      where.push("status = ?");
      params.push(q.status);
    }
    const dir = q.direction === "asc" ? "ASC" : "DESC";
    const total = (this.db.prepare(`SELECT count(*) AS n FROM batch_resources WHERE ${where.join(" AND ")}`).get(...params) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT org, sandbox, id, status, created, doc FROM batch_resources WHERE ${where.join(" AND ")} ORDER BY created ${dir}, id ${dir} LIMIT ? OFFSET ?`)
      .all(...params, q.limit, q.offset) as Row[];
    return { items: rows.map((r) => fromRow<T>(r)), total };
  }

  async delete(kind: ResourceKind, scope: TenantScope, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM batch_resources WHERE kind = ? AND org = ? AND sandbox = ? AND id = ?").run(kind, scope.orgId, scope.sandboxName, id).changes > 0;
  }

  async listAllByStatus<T>(kind: ResourceKind, statuses: readonly string[]): Promise<StoredResource<T>[]> {
    if (statuses.length === 0) return [];
    const rows = this.db
      .prepare(`SELECT org, sandbox, id, status, created, doc FROM batch_resources WHERE kind = ? AND status IN (${statuses.map(() => "?").join(", ")}) ORDER BY created, id`)
      .all(kind, ...statuses) as Row[];
    return rows.map((r) => fromRow<T>(r));
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
