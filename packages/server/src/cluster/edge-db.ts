/**
 * An edge node's own database (SQLite, `<dataDir>/edge.db`): the projections the hub sent it,
 * the datasets its datastreams name, and how far it read each of the hub's feeds — written in
 * one transaction per applied batch, so that a node killed at any point resumes where its
 * recorded state ends (re-applying a message is harmless). Definitions, merge policies and
 * datastreams live in its metadata store (`metadata.db`), as on any segmentd.
 */
import type Database from "better-sqlite3";
import { openSqlite } from "../storage-kit/sqlite.js";
import { migrateSqlite } from "../storage-kit/migrations.js";
import type { Projection } from "../edge/location-store.js";
import type { Dataset } from "../profiles/types.js";
import type { DatasetReplica } from "./config-feed.js";
import { OUTBOX_MIGRATION } from "./edge-outbox.js";

const MIGRATIONS = [
  {
    version: 1,
    name: "edge node state",
    statements: [
      "CREATE TABLE feed_position (feed TEXT PRIMARY KEY, seq INTEGER NOT NULL)",
      "CREATE TABLE projection (tenant TEXT NOT NULL, profile_id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, profile_id))",
      "CREATE TABLE dataset (org_id TEXT NOT NULL, sandbox_name TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (org_id, sandbox_name, id))",
    ],
  },
  OUTBOX_MIGRATION,
];

export type ProjectionChange = { tenantKey: string; projection: Projection } | { tenantKey: string; forget: string };

export class EdgeDb implements DatasetReplica {
  /** The connection (the outbox of a node without a site JetStream writes through it). */
  readonly db: Database.Database;
  private readonly datasets = new Map<string, Dataset>();

  constructor(file: string) {
    this.db = openSqlite(file);
    migrateSqlite(this.db, MIGRATIONS, { table: "edge_migrations" });
    for (const r of this.db.prepare("SELECT org_id, sandbox_name, body FROM dataset").all() as Array<{ org_id: string; sandbox_name: string; body: string }>) {
      const d = JSON.parse(r.body) as Dataset;
      this.datasets.set(datasetKey(r.org_id, r.sandbox_name, d.id), d);
    }
  }

  position(feed: string): number {
    const r = this.db.prepare("SELECT seq FROM feed_position WHERE feed = ?").get(feed) as { seq: number } | undefined;
    return r?.seq ?? 0;
  }

  setPosition(feed: string, seq: number): void {
    this.db.prepare("INSERT INTO feed_position (feed, seq) VALUES (?, ?) ON CONFLICT (feed) DO UPDATE SET seq = excluded.seq").run(feed, seq);
  }

  /** Projection changes and the feed's new position, in one transaction. */
  applyProjections(changes: readonly ProjectionChange[], feed: string, seq: number): void {
    const put = this.db.prepare("INSERT INTO projection (tenant, profile_id, body) VALUES (?, ?, ?) ON CONFLICT (tenant, profile_id) DO UPDATE SET body = excluded.body");
    const del = this.db.prepare("DELETE FROM projection WHERE tenant = ? AND profile_id = ?");
    this.db.transaction(() => {
      for (const c of changes) {
        if ("forget" in c) del.run(c.tenantKey, c.forget);
        else put.run(c.tenantKey, c.projection.profileId, JSON.stringify(c.projection));
      }
      this.setPosition(feed, seq);
    })();
  }

  /** Every projection kept (start-up: the location is filled from these). */
  *projections(): Generator<{ tenantKey: string; projection: Projection }> {
    for (const r of this.db.prepare("SELECT tenant, body FROM projection").iterate() as Iterable<{ tenant: string; body: string }>) {
      yield { tenantKey: r.tenant, projection: JSON.parse(r.body) as Projection };
    }
  }

  putDataset(orgId: string, sandboxName: string, dataset: Dataset): void {
    this.db.prepare("INSERT INTO dataset (org_id, sandbox_name, id, body) VALUES (?, ?, ?, ?) ON CONFLICT (org_id, sandbox_name, id) DO UPDATE SET body = excluded.body").run(orgId, sandboxName, dataset.id, JSON.stringify(dataset));
    this.datasets.set(datasetKey(orgId, sandboxName, dataset.id), dataset);
  }

  async getDataset(scope: { orgId: string; sandboxName: string }, id: string): Promise<Dataset | null> {
    return this.datasets.get(datasetKey(scope.orgId, scope.sandboxName, id)) ?? null;
  }

  close(): void {
    this.db.close();
  }
}

function datasetKey(orgId: string, sandboxName: string, id: string): string {
  return `${orgId}\u0000${sandboxName}\u0000${id}`;
}
