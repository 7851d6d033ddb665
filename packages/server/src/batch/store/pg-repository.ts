/**
 * PostgreSQL BatchRepository: the same table as the embedded one, in the
 * given schema, documents as jsonb.
 */
import type pg from "pg";
import { createPool, withAdvisoryLock } from "../../storage-kit/postgres.js";
import type { TenantScope } from "../../profiles/types.js";
import type { BatchRepository, ResourceKind, ResourceListQuery, StoredResource } from "./types.js";

interface Row {
  org: string;
  sandbox: string;
  id: string;
  status: string;
  created: string;
  doc: unknown;
}

function fromRow<T>(r: Row): StoredResource<T> {
  return { scope: { orgId: r.org, sandboxName: r.sandbox }, id: r.id, status: r.status, creationTime: Number(r.created), doc: r.doc as T };
}

export interface PgBatchRepositoryOptions {
  connectionString: string;
  /** Schema holding the table (created when missing). */
  schema?: string;
  poolSize?: number;
}

export class PgBatchRepository implements BatchRepository {
  private readonly pool: pg.Pool;
  private readonly table: string;
  private ready: Promise<void> | null = null;

  constructor(private readonly opts: PgBatchRepositoryOptions) {
    this.pool = createPool(opts.connectionString, { max: opts.poolSize ?? 4 });
    this.table = `"${(opts.schema ?? "public").replace(/"/g, '""')}".batch_resources`;
  }

  private init(): Promise<void> {
    // CREATE ... IF NOT EXISTS is not safe against a concurrent creator (processes starting at once).
    this.ready ??= withAdvisoryLock(this.pool, "segmentd_batch_schema", async (c) => {
      const schema = `"${(this.opts.schema ?? "public").replace(/"/g, '""')}"`;
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await c.query(`CREATE TABLE IF NOT EXISTS ${this.table} (
        kind text NOT NULL, org text NOT NULL, sandbox text NOT NULL, id text NOT NULL,
        status text NOT NULL, created bigint NOT NULL, doc jsonb NOT NULL,
        PRIMARY KEY (kind, org, sandbox, id))`);
      await c.query(`CREATE INDEX IF NOT EXISTS batch_resources_status ON ${this.table} (kind, status, created)`);
    });
    return this.ready;
  }

  private async q<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    await this.init();
    return this.pool.query<R>(sql, params);
  }

  async insert<T>(kind: ResourceKind, r: StoredResource<T>): Promise<void> {
    await this.q(`INSERT INTO ${this.table} (kind, org, sandbox, id, status, created, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
      kind, r.scope.orgId, r.scope.sandboxName, r.id, r.status, r.creationTime, JSON.stringify(r.doc),
    ]);
  }

  async update<T>(kind: ResourceKind, r: StoredResource<T>): Promise<boolean> {
    const res = await this.q(`UPDATE ${this.table} SET status = $1, doc = $2 WHERE kind = $3 AND org = $4 AND sandbox = $5 AND id = $6`, [
      r.status, JSON.stringify(r.doc), kind, r.scope.orgId, r.scope.sandboxName, r.id,
    ]);
    return (res.rowCount ?? 0) > 0;
  }

  async updateIf<T>(kind: ResourceKind, r: StoredResource<T>, from: readonly string[]): Promise<boolean> {
    const res = await this.q(`UPDATE ${this.table} SET status = $1, doc = $2 WHERE kind = $3 AND org = $4 AND sandbox = $5 AND id = $6 AND status = ANY($7::text[])`, [
      r.status, JSON.stringify(r.doc), kind, r.scope.orgId, r.scope.sandboxName, r.id, [...from],
    ]);
    return (res.rowCount ?? 0) > 0;
  }

  async get<T>(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource<T> | null> {
    const res = await this.q<Row>(`SELECT org, sandbox, id, status, created, doc FROM ${this.table} WHERE kind = $1 AND org = $2 AND sandbox = $3 AND id = $4`, [kind, scope.orgId, scope.sandboxName, id]);
    const r = res.rows[0];
    return r === undefined ? null : fromRow<T>(r);
  }

  async list<T>(kind: ResourceKind, scope: TenantScope, q: ResourceListQuery): Promise<{ items: StoredResource<T>[]; total: number }> {
    const where = ["kind = $1", "org = $2", "sandbox = $3"];
    const params: unknown[] = [kind, scope.orgId, scope.sandboxName];
    if (q.status !== undefined) {
      params.push(q.status);
      where.push(`status = $${params.length}`);
    }
    const dir = q.direction === "asc" ? "ASC" : "DESC";
    const total = Number((await this.q<{ n: string }>(`SELECT count(*) AS n FROM ${this.table} WHERE ${where.join(" AND ")}`, params)).rows[0]!.n);
    const res = await this.q<Row>(
      `SELECT org, sandbox, id, status, created, doc FROM ${this.table} WHERE ${where.join(" AND ")} ORDER BY created ${dir}, id ${dir} LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, q.limit, q.offset],
    );
    return { items: res.rows.map((r) => fromRow<T>(r)), total };
  }

  async delete(kind: ResourceKind, scope: TenantScope, id: string): Promise<boolean> {
    const res = await this.q(`DELETE FROM ${this.table} WHERE kind = $1 AND org = $2 AND sandbox = $3 AND id = $4`, [kind, scope.orgId, scope.sandboxName, id]);
    return (res.rowCount ?? 0) > 0;
  }

  async listAllByStatus<T>(kind: ResourceKind, statuses: readonly string[]): Promise<StoredResource<T>[]> {
    const res = await this.q<Row>(`SELECT org, sandbox, id, status, created, doc FROM ${this.table} WHERE kind = $1 AND status = ANY($2::text[]) ORDER BY created, id`, [kind, [...statuses]]);
    return res.rows.map((r) => fromRow<T>(r));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
