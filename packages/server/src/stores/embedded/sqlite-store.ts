/**
 * The embedded metadata store: better-sqlite3 in WAL mode under the data
 * directory. Every write is one transaction; a write is acknowledged only after
 * its COMMIT returned, and WAL commits survive the process being killed
 * (`kill -9`) — the OS holds the written pages. `synchronous=FULL` also makes
 * them survive power loss at the cost of one fsync per commit.
 *
 * better-sqlite3 is synchronous: a transaction runs to completion without
 * yielding to the event loop, so transactions in this process are serialized
 * and the limit checks inside them cannot race.
 */
import type Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { openSqlite } from "../../storage-kit/sqlite.js";
import { migrateSqlite } from "../../storage-kit/migrations.js";
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
import { SqliteExternalAudiences } from "./sqlite-external-audiences.js";
import { SqliteSchemas } from "./sqlite-schemas.js";
import { SqliteComputedAttributes } from "./sqlite-computed-attributes.js";
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

type Db = Database.Database;

function isUniqueViolation(err: unknown, index: string): boolean {
  const e = err as { code?: string; message?: string };
  return (e.code === "SQLITE_CONSTRAINT_UNIQUE" || e.code === "SQLITE_CONSTRAINT_PRIMARYKEY") && (e.message ?? "").includes(index);
}

class SqliteDefinitions implements DefinitionRepository {
  constructor(private readonly db: Db) {}

  private refsOf(scope: TenantScope, ids: string[]): Map<string, string[]> {
    const out = new Map<string, string[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return out;
    const rows = this.db
      .prepare(`SELECT from_id, to_id FROM definition_refs WHERE org_id = ? AND sandbox_id = ? AND from_id IN (SELECT value FROM json_each(?)) ORDER BY to_id`)
      .all(scope.orgId, scope.sandboxId, JSON.stringify(ids)) as { from_id: string; to_id: string }[];
    for (const r of rows) out.get(r.from_id)?.push(r.to_id);
    return out;
  }

  private checkLimits(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits, excludeId: string | null): void {
    const c = this.db
      .prepare(`SELECT COUNT(*) AS total, COALESCE(SUM(continuous), 0) AS streaming, COALESCE(SUM(synchronous), 0) AS edge
                FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id != ?`)
      .get(scope.orgId, scope.sandboxId, excludeId ?? "") as { total: number; streaming: number; edge: number };
    const e = record.definition.evaluationInfo;
    if (c.total + 1 > limits.definitions) throw new LimitExceededError("definitions", limits.definitions);
    // AEP counts edge definitions inside the streaming allowance (§14: "500 (includes edge)").
    const isStreaming = e.continuous.enabled || e.synchronous.enabled;
    if (isStreaming) {
      const streamingNow = (this.db
        .prepare(`SELECT COUNT(*) AS n FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id != ? AND (continuous = 1 OR synchronous = 1)`)
        .get(scope.orgId, scope.sandboxId, excludeId ?? "") as { n: number }).n;
      if (streamingNow + 1 > limits.streaming) throw new LimitExceededError("streaming", limits.streaming);
    }
    if (e.synchronous.enabled && c.edge + 1 > limits.edge) throw new LimitExceededError("edge", limits.edge);
  }

  private writeRefs(scope: TenantScope, record: DefinitionRecord): void {
    this.db.prepare("DELETE FROM definition_refs WHERE org_id = ? AND sandbox_id = ? AND from_id = ?").run(scope.orgId, scope.sandboxId, record.definition.id);
    const ins = this.db.prepare("INSERT OR IGNORE INTO definition_refs (org_id, sandbox_id, from_id, to_id) VALUES (?, ?, ?, ?)");
    for (const to of record.references) ins.run(scope.orgId, scope.sandboxId, record.definition.id, to);
  }

  async insert(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<void> {
    try {
      this.db.transaction(() => {
        this.checkLimits(scope, record, limits, null);
        this.db.prepare(`INSERT INTO definitions (${DEFINITION_COLUMN_NAMES}) VALUES (${Array(14).fill("?").join(", ")})`).run(...definitionColumns(scope, record));
        this.writeRefs(scope, record);
      }).immediate();
    } catch (err) {
      if (isUniqueViolation(err, "definitions.name")) throw new DuplicateNameError(record.definition.name);
      throw err;
    }
  }

  async update(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<boolean> {
    try {
      return this.db.transaction(() => {
        const exists = this.db.prepare("SELECT 1 FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, record.definition.id);
        if (!exists) return false;
        this.checkLimits(scope, record, limits, record.definition.id);
        const cols = definitionColumns(scope, record);
        this.db
          .prepare(`UPDATE definitions SET name = ?, description = ?, creation_time = ?, update_time = ?, update_epoch = ?, batch = ?, continuous = ?, synchronous = ?, merge_policy_id = ?, canonical_text = ?, doc = ?
                    WHERE org_id = ? AND sandbox_id = ? AND id = ?`)
          .run(...cols.slice(3), scope.orgId, scope.sandboxId, record.definition.id);
        this.writeRefs(scope, record);
        return true;
      }).immediate();
    } catch (err) {
      if (isUniqueViolation(err, "definitions.name")) throw new DuplicateNameError(record.definition.name);
      throw err;
    }
  }

  async get(scope: TenantScope, id: string): Promise<DefinitionRecord | undefined> {
    const row = this.db.prepare("SELECT id, doc, canonical_text FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, id) as DefinitionRow | undefined;
    if (!row) return undefined;
    return definitionFromRow(row, this.refsOf(scope, [id]).get(id) ?? []);
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, DefinitionRecord>> {
    const rows = this.db
      .prepare("SELECT id, doc, canonical_text FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id IN (SELECT value FROM json_each(?))")
      .all(scope.orgId, scope.sandboxId, JSON.stringify(ids)) as DefinitionRow[];
    const refs = this.refsOf(scope, rows.map((r) => r.id));
    return new Map(rows.map((r) => [r.id, definitionFromRow(r, refs.get(r.id) ?? [])]));
  }

  async list(scope: TenantScope, query: DefinitionListQuery): Promise<Page<DefinitionRecord>> {
    const params: unknown[] = [scope.orgId, scope.sandboxId];
    const where = `org_id = ? AND sandbox_id = ?${definitionFilters(query, params, () => "?")}`;
    // One read transaction so that the count and the page agree.
    return this.db.transaction(() => {
      const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM definitions WHERE ${where}`).get(...params) as { n: number }).n;
      const rows = this.db
        .prepare(`SELECT id, doc, canonical_text FROM definitions WHERE ${where} ORDER BY ${definitionOrderBy(query, "sqlite")} LIMIT ? OFFSET ?`)
        .all(...params, query.limit, query.offset) as DefinitionRow[];
      const refs = this.refsOf(scope, rows.map((r) => r.id));
      return { total, items: rows.map((r) => definitionFromRow(r, refs.get(r.id) ?? [])) };
    })();
  }

  async dependents(scope: TenantScope, id: string): Promise<string[]> {
    const rows = this.db.prepare("SELECT from_id FROM definition_refs WHERE org_id = ? AND sandbox_id = ? AND to_id = ? ORDER BY from_id").all(scope.orgId, scope.sandboxId, id) as { from_id: string }[];
    return rows.map((r) => r.from_id);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.transaction(() => {
      const deps = (this.db
        .prepare("SELECT from_id FROM definition_refs WHERE org_id = ? AND sandbox_id = ? AND to_id = ? AND from_id != ? ORDER BY from_id")
        .all(scope.orgId, scope.sandboxId, id, id) as { from_id: string }[]).map((r) => r.from_id);
      const exists = this.db.prepare("SELECT 1 FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, id);
      if (!exists) return false;
      if (deps.length > 0) throw new HasDependentsError(deps);
      this.db.prepare("DELETE FROM definition_refs WHERE org_id = ? AND sandbox_id = ? AND from_id = ?").run(scope.orgId, scope.sandboxId, id);
      this.db.prepare("DELETE FROM definitions WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, id);
      return true;
    }).immediate();
  }
}

class SqliteMergePolicies implements MergePolicyRepository {
  constructor(private readonly db: Db) {}

  private prepareWrite(scope: TenantScope, record: MergePolicyRecord): void {
    const p = record.policy;
    if (p.isActiveOnEdge) {
      const other = this.db
        .prepare("SELECT id FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND is_active_on_edge = 1 AND id != ?")
        .get(scope.orgId, scope.sandboxId, p.id) as { id: string } | undefined;
      if (other) throw new EdgePolicyConflictError(other.id);
    }
    if (p.default) {
      // Clearing `default` on the previous default is a change to that policy: bump its version and doc too.
      const prev = this.db
        .prepare("SELECT doc, creation_time FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND schema_name = ? AND is_default = 1 AND id != ?")
        .all(scope.orgId, scope.sandboxId, p.schema.name, p.id) as MergePolicyRow[];
      for (const row of prev) {
        const old = mergePolicyFromRow(row);
        old.policy.default = false;
        old.policy.version += 1;
        old.policy.updateEpoch = p.updateEpoch;
        this.db
          .prepare("UPDATE merge_policies SET is_default = 0, version = ?, update_epoch = ?, doc = ? WHERE org_id = ? AND sandbox_id = ? AND id = ?")
          .run(old.policy.version, old.policy.updateEpoch, JSON.stringify(old.policy), scope.orgId, scope.sandboxId, old.policy.id);
      }
    }
  }

  async insert(scope: TenantScope, record: MergePolicyRecord): Promise<void> {
    this.db.transaction(() => {
      this.prepareWrite(scope, record);
      this.db.prepare(`INSERT INTO merge_policies (${MERGE_POLICY_COLUMN_NAMES}) VALUES (${Array(13).fill("?").join(", ")})`).run(...mergePolicyColumns(scope, record));
    }).immediate();
  }

  async update(scope: TenantScope, record: MergePolicyRecord, guard?: MergePolicyWriteGuard): Promise<boolean> {
    return this.db.transaction(() => {
      const current = this.db.prepare("SELECT is_default, schema_name FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND id = ?")
        .get(scope.orgId, scope.sandboxId, record.policy.id) as { is_default: number; schema_name: string } | undefined;
      if (!current) return false;
      if (guard?.keepDefault === true && current.is_default === 1 && (!record.policy.default || record.policy.schema.name !== current.schema_name)) {
        throw new DefaultMergePolicyRequiredError(record.policy.id, current.schema_name);
      }
      this.prepareWrite(scope, record);
      const cols = mergePolicyColumns(scope, record);
      this.db
        .prepare(`UPDATE merge_policies SET name = ?, schema_name = ?, is_default = ?, is_active_on_edge = ?, identity_graph_type = ?, attribute_merge_type = ?, version = ?, update_epoch = ?, creation_time = ?, doc = ?
                  WHERE org_id = ? AND sandbox_id = ? AND id = ?`)
        .run(...cols.slice(3), scope.orgId, scope.sandboxId, record.policy.id);
      return true;
    }).immediate();
  }

  async get(scope: TenantScope, id: string): Promise<MergePolicyRecord | undefined> {
    const row = this.db.prepare("SELECT doc, creation_time FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, id) as MergePolicyRow | undefined;
    return row ? mergePolicyFromRow(row) : undefined;
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, MergePolicyRecord>> {
    const rows = this.db
      .prepare("SELECT doc, creation_time FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND id IN (SELECT value FROM json_each(?))")
      .all(scope.orgId, scope.sandboxId, JSON.stringify(ids)) as MergePolicyRow[];
    return new Map(rows.map((r) => mergePolicyFromRow(r)).map((r) => [r.policy.id, r]));
  }

  async getDefault(scope: TenantScope, schemaName: string): Promise<MergePolicyRecord | undefined> {
    const row = this.db
      .prepare("SELECT doc, creation_time FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND schema_name = ? AND is_default = 1")
      .get(scope.orgId, scope.sandboxId, schemaName) as MergePolicyRow | undefined;
    return row ? mergePolicyFromRow(row) : undefined;
  }

  async list(scope: TenantScope, query: MergePolicyListQuery): Promise<Page<MergePolicyRecord>> {
    const params: unknown[] = [scope.orgId, scope.sandboxId];
    const where = `org_id = ? AND sandbox_id = ?${mergePolicyFilters(query, params, () => "?")}`;
    return this.db.transaction(() => {
      const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM merge_policies WHERE ${where}`).get(...params) as { n: number }).n;
      const rows = this.db
        .prepare(`SELECT doc, creation_time FROM merge_policies WHERE ${where} ORDER BY ${mergePolicyOrderBy(query, "sqlite")} LIMIT ? OFFSET ?`)
        .all(...params, query.limit, query.offset) as MergePolicyRow[];
      return { total, items: rows.map(mergePolicyFromRow) };
    })();
  }

  async count(scope: TenantScope): Promise<number> {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM merge_policies WHERE org_id = ? AND sandbox_id = ?").get(scope.orgId, scope.sandboxId) as { n: number }).n;
  }

  async delete(scope: TenantScope, id: string, guard?: MergePolicyWriteGuard): Promise<boolean> {
    return this.db.transaction(() => {
      const current = this.db.prepare("SELECT is_default, schema_name FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND id = ?")
        .get(scope.orgId, scope.sandboxId, id) as { is_default: number; schema_name: string } | undefined;
      if (!current) return false;
      if (guard?.keepDefault === true && current.is_default === 1) throw new DefaultMergePolicyRequiredError(id, current.schema_name);
      const users = this.db
        .prepare("SELECT id FROM definitions WHERE org_id = ? AND sandbox_id = ? AND merge_policy_id = ? ORDER BY id LIMIT 10")
        .all(scope.orgId, scope.sandboxId, id) as { id: string }[];
      if (users.length > 0) {
        const total = (this.db.prepare("SELECT COUNT(*) AS n FROM definitions WHERE org_id = ? AND sandbox_id = ? AND merge_policy_id = ?").get(scope.orgId, scope.sandboxId, id) as { n: number }).n;
        throw new MergePolicyInUseError(users.map((u) => u.id), total);
      }
      this.db.prepare("DELETE FROM merge_policies WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, id);
      return true;
    }).immediate();
  }
}

class SqliteDatastreams implements DatastreamRepository {
  constructor(private readonly db: Db) {}

  async insert(scope: TenantScope, record: DatastreamRecord): Promise<void> {
    this.db.prepare(`INSERT INTO datastreams (${DATASTREAM_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?)`).run(...datastreamColumns(scope, record));
  }

  async update(scope: TenantScope, record: DatastreamRecord): Promise<boolean> {
    const cols = datastreamColumns(scope, record);
    const r = this.db
      .prepare("UPDATE datastreams SET creation_time = ?, update_time = ?, doc = ? WHERE id = ? AND org_id = ? AND sandbox_id = ?")
      .run(...cols.slice(3), record.id, scope.orgId, scope.sandboxId);
    return r.changes > 0;
  }

  async get(scope: TenantScope, id: string): Promise<DatastreamRecord | undefined> {
    const row = this.db.prepare("SELECT doc FROM datastreams WHERE id = ? AND org_id = ? AND sandbox_id = ?").get(id, scope.orgId, scope.sandboxId) as DatastreamRow | undefined;
    return row ? datastreamFromRow(row) : undefined;
  }

  async list(scope: TenantScope): Promise<DatastreamRecord[]> {
    const rows = this.db.prepare("SELECT doc FROM datastreams WHERE org_id = ? AND sandbox_id = ? ORDER BY creation_time, id").all(scope.orgId, scope.sandboxId) as DatastreamRow[];
    return rows.map(datastreamFromRow);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM datastreams WHERE id = ? AND org_id = ? AND sandbox_id = ?").run(id, scope.orgId, scope.sandboxId).changes > 0;
  }

  async findById(id: string): Promise<DatastreamRecord | undefined> {
    const row = this.db.prepare("SELECT doc FROM datastreams WHERE id = ?").get(id) as DatastreamRow | undefined;
    return row ? datastreamFromRow(row) : undefined;
  }

  async all(): Promise<DatastreamRecord[]> {
    return (this.db.prepare("SELECT doc FROM datastreams ORDER BY creation_time, id").all() as DatastreamRow[]).map(datastreamFromRow);
  }

  async importIfEmpty(items: readonly ScopedDatastream[]): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.db.prepare("SELECT 1 FROM datastreams LIMIT 1").get()) return false;
      const ins = this.db.prepare(`INSERT INTO datastreams (${DATASTREAM_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?)`);
      for (const { scope, record } of items) ins.run(...datastreamColumns(scope, record));
      return true;
    }).immediate();
  }
}

export class SqliteMetadataStore implements MetadataStore {
  readonly kind = "embedded" as const;
  readonly definitions: DefinitionRepository;
  readonly externalAudiences: ExternalAudienceRepository;
  readonly mergePolicies: MergePolicyRepository;
  readonly datastreams: DatastreamRepository;
  readonly schemas: SqliteSchemas;
  readonly computedAttributes: SqliteComputedAttributes;
  private closed = false;

  constructor(private readonly db: Db) {
    this.externalAudiences = new SqliteExternalAudiences(db);
    this.definitions = new SqliteDefinitions(db);
    this.mergePolicies = new SqliteMergePolicies(db);
    this.datastreams = new SqliteDatastreams(db);
    this.schemas = new SqliteSchemas(db);
    this.computedAttributes = new SqliteComputedAttributes(db);
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error("store is closed");
    this.db.prepare("SELECT 1").get();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}

/** Open (creating if needed) the metadata database `<dataDir>/metadata.sqlite`. */
export function openSqliteStore(dataDir: string): SqliteMetadataStore {
  mkdirSync(dataDir, { recursive: true });
  const db = openSqlite(path.join(dataDir, "metadata.sqlite"));
  migrateSqlite(db, coreMigrations("sqlite"), { table: MIGRATIONS_TABLE });
  return new SqliteMetadataStore(db);
}
