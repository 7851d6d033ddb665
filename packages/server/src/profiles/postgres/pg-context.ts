// What the split-out parts of the PostgreSQL profile store (pg-*.ts) need from
// the store itself, declared here so they never import pg-store.ts back.
import type pg from "pg";
import type { QuarantineKind } from "../quarantine.js";
import type { IngestBatch } from "../store.js";
import type { Dataset, Identity, JsonObject, TenantScope } from "../types.js";

export type Q = pg.PoolClient | pg.Pool;

export interface BatchRow { id: string; ds: string; status: string; created: number; updated: number; completed: number | null; records_read: number; records_written: number; records_failed: number; files: string[]; errors: IngestBatch["errors"] }
export interface EventRow { seq: number; pid: number; ds: string; eid: string; ns: string; idv: string; ts: number; body: unknown }

export const NO_TENANT = -1;
/** Rows per membership statement (unnest arrays): bounds one statement's size for million-change calls. */
export const MEMBERSHIP_CHUNK = 20_000;
/** Identities per findProfileIds statement (unnest arrays): bounds one statement's size. */
export const IDENTITY_CHUNK = 20_000;

export async function queryRows<R extends pg.QueryResultRow>(c: Q, sql: string, params: unknown[] = []): Promise<R[]> {
  return (await c.query<R>(sql, params)).rows;
}

/** The store's pool, tenant ids, write queue and read-time checks, as the split-out parts use them. */
export interface PgStoreContext {
  readonly pool: pg.Pool;
  /** The tenant id of a scope (NO_TENANT when it has none and create is false). */
  tid(c: Q, scope: TenantScope, create: boolean): Promise<number>;
  /** Queues a group-committed write for the scope's tenant. */
  write<T>(scope: TenantScope, fn: (c: pg.PoolClient, tid: number) => Promise<T>): Promise<T>;
  requireDataset(c: Q, tid: number, scope: TenantScope, id: string): Promise<Dataset>;
  /** A stored body when it can be served safely; otherwise null (the record is quarantined). */
  servable(scope: TenantScope, kind: QuarantineKind, datasetId: string, recordId: string, identity: Identity, pid: number | null, body: unknown): JsonObject | null;
  /** Notes profiles the running write job changes (change feed). */
  touch(tid: number, pids: Iterable<number>): void;
}

/** First key of the per-tenant write locks (pg_advisory_xact_lock(7466, tid)): shared with every server version. */
export const TENANT_LOCK_CLASS = 7466;
