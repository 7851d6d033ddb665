/**
 * The PostgreSQL metadata store (pg 8). The schema is created and migrated on
 * start from a tiny versioned migrations table. Writes that must not race
 * (limits, one default / one edge policy per sandbox, delete-while-referenced)
 * take a transaction-scoped advisory lock on the (org, sandbox) pair, so they
 * are serialized per sandbox across every server process sharing the database.
 * Unique indexes stay the final guard.
 */
import type pg from "pg";
import { createPool, lockForTransaction, withTransaction } from "../../storage-kit/postgres.js";
import { migratePostgres } from "../../storage-kit/migrations.js";
import type {
  DatastreamRepository,
  DefinitionLimits,
  DefinitionListQuery,
  DefinitionRepository,
  ExternalAudienceRepository,
  MergePolicyListQuery,
  MergePolicyRepository,
  MergePolicyWriteGuard,
  MetadataStore,
  Page,
  ScopedDatastream,
  TenantScope,
} from "../types.js";
import {
  DefaultMergePolicyRequiredError,
  DuplicateNameError,
  EdgePolicyConflictError,
  HasDependentsError,
  LimitExceededError,
  MergePolicyInUseError,
} from "../types.js";
import type { DatastreamRecord, DefinitionRecord, MergePolicyRecord } from "../records.js";
import { PgExternalAudiences } from "./pg-external-audiences.js";
import { PgSchemas } from "./pg-schemas.js";
import { PgComputedAttributes } from "./pg-computed-attributes.js";
import { coreMigrations, definitionFilters, MIGRATIONS_TABLE, definitionOrderBy, mergePolicyFilters, mergePolicyOrderBy } from "../sql-common.js";
import {
  DATASTREAM_COLUMN_NAMES,
  DEFINITION_COLUMN_NAMES,
  MERGE_POLICY_COLUMN_NAMES,
  datastreamColumns,
  datastreamFromRow,
  definitionColumns,
  definitionFromRow,
  mergePolicyColumns,
  mergePolicyFromRow,
  type DatastreamRow,
  type DefinitionRow,
  type MergePolicyRow,
} from "../row-mapping.js";

type Client = pg.PoolClient;

const dollar = (n: number) => `$${n}`;
const placeholders = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(", ");

function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e.code === "23505" && e.constraint === constraint;
}

/** A transaction serialized per sandbox (scope), or unserialized (null). */
function tx<T>(pool: pg.Pool, scope: TenantScope | null, fn: (c: Client) => Promise<T>): Promise<T> {
  return withTransaction(pool, fn, { lock: scope ? `${scope.orgId}/${scope.sandboxId}` : null });
}

async function refsOf(q: pg.Pool | Client, scope: TenantScope, ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const r = await q.query<{ from_id: string; to_id: string }>(
    `SELECT from_id, to_id FROM definition_refs WHERE org_id = $1 AND sandbox_id = $2 AND from_id = ANY($3::text[]) ORDER BY to_id COLLATE "C"`,
    [scope.orgId, scope.sandboxId, ids],
  );
  for (const row of r.rows) out.get(row.from_id)?.push(row.to_id);
  return out;
}

class PgDefinitions implements DefinitionRepository {
  constructor(private readonly pool: pg.Pool) {}

  private async checkLimits(c: Client, scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits, excludeId: string): Promise<void> {
    const r = await c.query<{ total: string; streaming: string; edge: string }>(
      `SELECT COUNT(*) AS total, COUNT(*) FILTER (WHERE continuous = 1 OR synchronous = 1) AS streaming, COUNT(*) FILTER (WHERE synchronous = 1) AS edge
       FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id != $3`,
      [scope.orgId, scope.sandboxId, excludeId],
    );
    const row = r.rows[0]!;
    const e = record.definition.evaluationInfo;
    if (Number(row.total) + 1 > limits.definitions) throw new LimitExceededError("definitions", limits.definitions);
    if ((e.continuous.enabled || e.synchronous.enabled) && Number(row.streaming) + 1 > limits.streaming) {
      throw new LimitExceededError("streaming", limits.streaming);
    }
    if (e.synchronous.enabled && Number(row.edge) + 1 > limits.edge) throw new LimitExceededError("edge", limits.edge);
  }

  private async writeRefs(c: Client, scope: TenantScope, record: DefinitionRecord): Promise<void> {
    await c.query("DELETE FROM definition_refs WHERE org_id = $1 AND sandbox_id = $2 AND from_id = $3", [scope.orgId, scope.sandboxId, record.definition.id]);
    if (record.references.length === 0) return;
    await c.query(
      `INSERT INTO definition_refs (org_id, sandbox_id, from_id, to_id) SELECT $1, $2, $3, unnest($4::text[]) ON CONFLICT DO NOTHING`,
      [scope.orgId, scope.sandboxId, record.definition.id, [...new Set(record.references)]],
    );
  }

  async insert(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<void> {
    try {
      await tx(this.pool, scope, async (c) => {
        await this.checkLimits(c, scope, record, limits, "");
        await c.query(`INSERT INTO definitions (${DEFINITION_COLUMN_NAMES}) VALUES (${placeholders(14)})`, definitionColumns(scope, record));
        await this.writeRefs(c, scope, record);
      });
    } catch (err) {
      if (isUniqueViolation(err, "definitions_name")) throw new DuplicateNameError(record.definition.name);
      throw err;
    }
  }

  async update(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<boolean> {
    try {
      return await tx(this.pool, scope, async (c) => {
        const exists = await c.query("SELECT 1 FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, record.definition.id]);
        if (exists.rowCount === 0) return false;
        await this.checkLimits(c, scope, record, limits, record.definition.id);
        const cols = definitionColumns(scope, record);
        await c.query(
          `UPDATE definitions SET name = $1, description = $2, creation_time = $3, update_time = $4, update_epoch = $5, batch = $6, continuous = $7, synchronous = $8, merge_policy_id = $9, canonical_text = $10, doc = $11
           WHERE org_id = $12 AND sandbox_id = $13 AND id = $14`,
          [...cols.slice(3), scope.orgId, scope.sandboxId, record.definition.id],
        );
        await this.writeRefs(c, scope, record);
        return true;
      });
    } catch (err) {
      if (isUniqueViolation(err, "definitions_name")) throw new DuplicateNameError(record.definition.name);
      throw err;
    }
  }

  async get(scope: TenantScope, id: string): Promise<DefinitionRecord | undefined> {
    const r = await this.pool.query<DefinitionRow>("SELECT id, doc, canonical_text FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    const row = r.rows[0];
    if (!row) return undefined;
    return definitionFromRow(row, (await refsOf(this.pool, scope, [id])).get(id) ?? []);
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, DefinitionRecord>> {
    const r = await this.pool.query<DefinitionRow>(
      "SELECT id, doc, canonical_text FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id = ANY($3::text[])",
      [scope.orgId, scope.sandboxId, [...ids]],
    );
    const refs = await refsOf(this.pool, scope, r.rows.map((x) => x.id));
    return new Map(r.rows.map((row) => [row.id, definitionFromRow(row, refs.get(row.id) ?? [])]));
  }

  async list(scope: TenantScope, query: DefinitionListQuery): Promise<Page<DefinitionRecord>> {
    const params: unknown[] = [scope.orgId, scope.sandboxId];
    const where = `org_id = $1 AND sandbox_id = $2${definitionFilters(query, params, dollar)}`;
    // REPEATABLE READ so that the count and the page see one snapshot.
    return withTransaction(
      this.pool,
      async (c) => {
        const total = await c.query<{ n: string }>(`SELECT COUNT(*) AS n FROM definitions WHERE ${where}`, params);
        const rows = await c.query<DefinitionRow>(
          `SELECT id, doc, canonical_text FROM definitions WHERE ${where} ORDER BY ${definitionOrderBy(query, "postgres")} LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
          [...params, query.limit, query.offset],
        );
        const refs = await refsOf(c, scope, rows.rows.map((x) => x.id));
        return { total: Number(total.rows[0]!.n), items: rows.rows.map((row) => definitionFromRow(row, refs.get(row.id) ?? [])) };
      },
      { snapshot: true },
    );
  }

  async dependents(scope: TenantScope, id: string): Promise<string[]> {
    const r = await this.pool.query<{ from_id: string }>(
      `SELECT from_id FROM definition_refs WHERE org_id = $1 AND sandbox_id = $2 AND to_id = $3 ORDER BY from_id COLLATE "C"`,
      [scope.orgId, scope.sandboxId, id],
    );
    return r.rows.map((x) => x.from_id);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    return tx(this.pool, scope, async (c) => {
      const exists = await c.query("SELECT 1 FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
      if (exists.rowCount === 0) return false;
      const deps = await c.query<{ from_id: string }>(
        `SELECT from_id FROM definition_refs WHERE org_id = $1 AND sandbox_id = $2 AND to_id = $3 AND from_id != $3 ORDER BY from_id COLLATE "C"`,
        [scope.orgId, scope.sandboxId, id],
      );
      if (deps.rows.length > 0) throw new HasDependentsError(deps.rows.map((x) => x.from_id));
      await c.query("DELETE FROM definition_refs WHERE org_id = $1 AND sandbox_id = $2 AND from_id = $3", [scope.orgId, scope.sandboxId, id]);
      await c.query("DELETE FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
      return true;
    });
  }
}

class PgMergePolicies implements MergePolicyRepository {
  constructor(private readonly pool: pg.Pool) {}

  private async prepareWrite(c: Client, scope: TenantScope, record: MergePolicyRecord): Promise<void> {
    const p = record.policy;
    if (p.isActiveOnEdge) {
      const other = await c.query<{ id: string }>(
        "SELECT id FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND is_active_on_edge = 1 AND id != $3",
        [scope.orgId, scope.sandboxId, p.id],
      );
      if (other.rows[0]) throw new EdgePolicyConflictError(other.rows[0].id);
    }
    if (p.default) {
      const prev = await c.query<MergePolicyRow>(
        "SELECT doc, creation_time FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND schema_name = $3 AND is_default = 1 AND id != $4",
        [scope.orgId, scope.sandboxId, p.schema.name, p.id],
      );
      for (const row of prev.rows) {
        const old = mergePolicyFromRow(row);
        old.policy.default = false;
        old.policy.version += 1;
        old.policy.updateEpoch = p.updateEpoch;
        await c.query(
          "UPDATE merge_policies SET is_default = 0, version = $1, update_epoch = $2, doc = $3 WHERE org_id = $4 AND sandbox_id = $5 AND id = $6",
          [old.policy.version, old.policy.updateEpoch, JSON.stringify(old.policy), scope.orgId, scope.sandboxId, old.policy.id],
        );
      }
    }
  }

  async insert(scope: TenantScope, record: MergePolicyRecord): Promise<void> {
    await tx(this.pool, scope, async (c) => {
      await this.prepareWrite(c, scope, record);
      await c.query(`INSERT INTO merge_policies (${MERGE_POLICY_COLUMN_NAMES}) VALUES (${placeholders(13)})`, mergePolicyColumns(scope, record));
    });
  }

  async update(scope: TenantScope, record: MergePolicyRecord, guard?: MergePolicyWriteGuard): Promise<boolean> {
    return tx(this.pool, scope, async (c) => {
      const r = await c.query<{ is_default: number; schema_name: string }>("SELECT is_default, schema_name FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND id = $3",
        [scope.orgId, scope.sandboxId, record.policy.id]);
      const current = r.rows[0];
      if (!current) return false;
      if (guard?.keepDefault === true && Number(current.is_default) === 1 && (!record.policy.default || record.policy.schema.name !== current.schema_name)) {
        throw new DefaultMergePolicyRequiredError(record.policy.id, current.schema_name);
      }
      await this.prepareWrite(c, scope, record);
      const cols = mergePolicyColumns(scope, record);
      await c.query(
        `UPDATE merge_policies SET name = $1, schema_name = $2, is_default = $3, is_active_on_edge = $4, identity_graph_type = $5, attribute_merge_type = $6, version = $7, update_epoch = $8, creation_time = $9, doc = $10
         WHERE org_id = $11 AND sandbox_id = $12 AND id = $13`,
        [...cols.slice(3), scope.orgId, scope.sandboxId, record.policy.id],
      );
      return true;
    });
  }

  async get(scope: TenantScope, id: string): Promise<MergePolicyRecord | undefined> {
    const r = await this.pool.query<MergePolicyRow>("SELECT doc, creation_time FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return r.rows[0] ? mergePolicyFromRow(r.rows[0]) : undefined;
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, MergePolicyRecord>> {
    const r = await this.pool.query<MergePolicyRow>(
      "SELECT doc, creation_time FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND id = ANY($3::text[])",
      [scope.orgId, scope.sandboxId, [...ids]],
    );
    return new Map(r.rows.map(mergePolicyFromRow).map((x) => [x.policy.id, x]));
  }

  async getDefault(scope: TenantScope, schemaName: string): Promise<MergePolicyRecord | undefined> {
    const r = await this.pool.query<MergePolicyRow>(
      "SELECT doc, creation_time FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND schema_name = $3 AND is_default = 1",
      [scope.orgId, scope.sandboxId, schemaName],
    );
    return r.rows[0] ? mergePolicyFromRow(r.rows[0]) : undefined;
  }

  async list(scope: TenantScope, query: MergePolicyListQuery): Promise<Page<MergePolicyRecord>> {
    const params: unknown[] = [scope.orgId, scope.sandboxId];
    const where = `org_id = $1 AND sandbox_id = $2${mergePolicyFilters(query, params, dollar)}`;
    const total = await this.pool.query<{ n: string }>(`SELECT COUNT(*) AS n FROM merge_policies WHERE ${where}`, params);
    const rows = await this.pool.query<MergePolicyRow>(
      `SELECT doc, creation_time FROM merge_policies WHERE ${where} ORDER BY ${mergePolicyOrderBy(query, "postgres")} LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, query.limit, query.offset],
    );
    return { total: Number(total.rows[0]!.n), items: rows.rows.map(mergePolicyFromRow) };
  }

  async count(scope: TenantScope): Promise<number> {
    const r = await this.pool.query<{ n: string }>("SELECT COUNT(*) AS n FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2", [scope.orgId, scope.sandboxId]);
    return Number(r.rows[0]!.n);
  }

  async delete(scope: TenantScope, id: string, guard?: MergePolicyWriteGuard): Promise<boolean> {
    return tx(this.pool, scope, async (c) => {
      const r = await c.query<{ is_default: number; schema_name: string }>("SELECT is_default, schema_name FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND id = $3",
        [scope.orgId, scope.sandboxId, id]);
      const current = r.rows[0];
      if (!current) return false;
      if (guard?.keepDefault === true && Number(current.is_default) === 1) throw new DefaultMergePolicyRequiredError(id, current.schema_name);
      const users = await c.query<{ id: string }>(
        `SELECT id FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND merge_policy_id = $3 ORDER BY id COLLATE "C" LIMIT 10`,
        [scope.orgId, scope.sandboxId, id],
      );
      if (users.rows.length > 0) {
        const total = await c.query<{ n: string }>("SELECT COUNT(*) AS n FROM definitions WHERE org_id = $1 AND sandbox_id = $2 AND merge_policy_id = $3", [scope.orgId, scope.sandboxId, id]);
        throw new MergePolicyInUseError(users.rows.map((u) => u.id), Number(total.rows[0]!.n));
      }
      await c.query("DELETE FROM merge_policies WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
      return true;
    });
  }
}

class PgDatastreams implements DatastreamRepository {
  constructor(private readonly pool: pg.Pool) {}

  async insert(scope: TenantScope, record: DatastreamRecord): Promise<void> {
    await this.pool.query(`INSERT INTO datastreams (${DATASTREAM_COLUMN_NAMES}) VALUES (${placeholders(6)})`, datastreamColumns(scope, record));
  }

  async update(scope: TenantScope, record: DatastreamRecord): Promise<boolean> {
    const cols = datastreamColumns(scope, record);
    const r = await this.pool.query(
      "UPDATE datastreams SET creation_time = $1, update_time = $2, doc = $3 WHERE id = $4 AND org_id = $5 AND sandbox_id = $6",
      [...cols.slice(3), record.id, scope.orgId, scope.sandboxId],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async get(scope: TenantScope, id: string): Promise<DatastreamRecord | undefined> {
    const r = await this.pool.query<DatastreamRow>("SELECT doc FROM datastreams WHERE id = $1 AND org_id = $2 AND sandbox_id = $3", [id, scope.orgId, scope.sandboxId]);
    return r.rows[0] ? datastreamFromRow(r.rows[0]) : undefined;
  }

  async list(scope: TenantScope): Promise<DatastreamRecord[]> {
    const r = await this.pool.query<DatastreamRow>(`SELECT doc FROM datastreams WHERE org_id = $1 AND sandbox_id = $2 ORDER BY creation_time, id COLLATE "C"`, [scope.orgId, scope.sandboxId]);
    return r.rows.map(datastreamFromRow);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    const r = await this.pool.query("DELETE FROM datastreams WHERE id = $1 AND org_id = $2 AND sandbox_id = $3", [id, scope.orgId, scope.sandboxId]);
    return (r.rowCount ?? 0) > 0;
  }

  async findById(id: string): Promise<DatastreamRecord | undefined> {
    const r = await this.pool.query<DatastreamRow>("SELECT doc FROM datastreams WHERE id = $1", [id]);
    return r.rows[0] ? datastreamFromRow(r.rows[0]) : undefined;
  }

  async all(): Promise<DatastreamRecord[]> {
    const r = await this.pool.query<DatastreamRow>(`SELECT doc FROM datastreams ORDER BY creation_time, id COLLATE "C"`);
    return r.rows.map(datastreamFromRow);
  }

  async importIfEmpty(items: readonly ScopedDatastream[]): Promise<boolean> {
    return tx(this.pool, null, async (c) => {
      // Processes starting at once, each with a file to import: one imports, the others then see rows.
      await lockForTransaction(c, "segmentd_datastreams_import");
      if ((await c.query("SELECT 1 FROM datastreams LIMIT 1")).rowCount !== 0) return false;
      for (const { scope, record } of items) {
        await c.query(`INSERT INTO datastreams (${DATASTREAM_COLUMN_NAMES}) VALUES (${placeholders(6)})`, datastreamColumns(scope, record));
      }
      return true;
    });
  }
}

export class PgMetadataStore implements MetadataStore {
  readonly kind = "postgres" as const;
  readonly definitions: DefinitionRepository;
  readonly externalAudiences: ExternalAudienceRepository;
  readonly mergePolicies: MergePolicyRepository;
  readonly datastreams: DatastreamRepository;
  readonly schemas: PgSchemas;
  readonly computedAttributes: PgComputedAttributes;

  constructor(private readonly pool: pg.Pool) {
    this.externalAudiences = new PgExternalAudiences(pool);
    this.definitions = new PgDefinitions(pool);
    this.mergePolicies = new PgMergePolicies(pool);
    this.datastreams = new PgDatastreams(pool);
    this.schemas = new PgSchemas(pool);
    this.computedAttributes = new PgComputedAttributes(pool);
  }

  private closed = false;

  async ping(): Promise<void> {
    if (this.closed) throw new Error("store is closed");
    await this.pool.query("SELECT 1");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

/**
 * Connect and migrate. `options=-c search_path=...` in the URL selects a schema
 * (the tests use one fresh schema per test file).
 */
export async function openPgStore(url: string, options: { max?: number } = {}): Promise<PgMetadataStore> {
  const pool = createPool(url, { max: options.max ?? 10 });
  try {
    // Two servers starting at once against one database: only one migrates.
    await migratePostgres(pool, coreMigrations("postgres"), { table: MIGRATIONS_TABLE, lock: "segmentd_migrations" });
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  return new PgMetadataStore(pool);
}
