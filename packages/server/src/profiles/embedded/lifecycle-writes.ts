// Dataset catalog and lifecycle writes of the embedded store: create/list/delete datasets, deletes by identity or dataset, field updates.
// Functions over the store's one connection and write queue (StoreCtx, store-context.ts).

import { newCatalogId } from "../ids.js";
import { fragmentRecordId } from "../quarantine.js";
import { StoreError, type DeleteCounts, type FieldUpdate } from "../store.js";
import type { Dataset, DatasetInput, Identity, JsonObject, SchemaClass, TenantScope } from "../types.js";
import { removePath, setPath } from "../xdm-object.js";
import { type DatasetRow, type StoreCtx } from "./store-context.js";

export function datasetFromRow(s: StoreCtx, scope: TenantScope, r: DatasetRow): Dataset {
  const d: Dataset = {
    id: r.id, name: r.name, schemaClass: r.schema_class as SchemaClass, profileEnabled: r.profile_enabled === 1,
    identityFields: JSON.parse(r.identity_fields) as Dataset["identityFields"], imsOrg: scope.orgId, sandboxName: scope.sandboxName,
    created: r.created, updated: r.updated,
  };
  if (r.description !== null) d.description = r.description;
  return d;
}

export function requireDataset(s: StoreCtx, tid: number, scope: TenantScope, id: string): Dataset {
  const r = s.stmt("SELECT * FROM datasets WHERE tid = ? AND id = ?").get(tid, id) as DatasetRow | undefined;
  if (r === undefined) throw new StoreError("DATASET_NOT_FOUND", `dataset ${id} does not exist in sandbox ${scope.sandboxName}`);
  return datasetFromRow(s, scope, r);
}

// ---- datasets -------------------------------------------------------------

export function createDataset(s: StoreCtx, scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset> {
  const tid = s.tenantForWrite(scope);
  return s.write(() => {
    const id = input.id ?? newCatalogId();
    const exists = s.stmt("SELECT 1 FROM datasets WHERE tid = ? AND id = ?").get(tid, id);
    if (exists !== undefined) throw new StoreError("DATASET_EXISTS", `dataset ${id} already exists`);
    s.stmt(`INSERT INTO datasets (tid, id, name, description, schema_class, profile_enabled, identity_fields, created, updated)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(tid, id, input.name, input.description ?? null, input.schemaClass,
      input.profileEnabled === true ? 1 : 0, JSON.stringify(input.identityFields ?? []), now, now);
    return requireDataset(s, tid, scope, id);
  });
}

export async function getDataset(s: StoreCtx, scope: TenantScope, id: string): Promise<Dataset | null> {
  const r = s.stmt("SELECT * FROM datasets WHERE tid = ? AND id = ?").get(s.tid(scope, false), id) as DatasetRow | undefined;
  return r === undefined ? null : datasetFromRow(s, scope, r);
}

export async function listDatasets(s: StoreCtx, scope: TenantScope, opts: { limit?: number; start?: number } = {}): Promise<Dataset[]> {
  const rows = s.stmt("SELECT * FROM datasets WHERE tid = ? ORDER BY created DESC, id LIMIT ? OFFSET ?")
    .all(s.tid(scope, false), opts.limit ?? 50, opts.start ?? 0) as DatasetRow[];
  return rows.map((r) => datasetFromRow(s, scope, r));
}

export function deleteDataset(s: StoreCtx, scope: TenantScope, id: string): Promise<DeleteCounts | null> {
  return s.write(() => {
    const tid = s.tid(scope, false);
    if (s.stmt("SELECT 1 FROM datasets WHERE tid = ? AND id = ?").get(tid, id) === undefined) return null;
    const counts = deleteDatasetRecordsSync(s, tid, id);
    s.stmt("DELETE FROM datasets WHERE tid = ? AND id = ?").run(tid, id);
    return counts;
  });
}

// ---- ingestion ------------------------------------------------------------

export function deleteByIdentities(s: StoreCtx, scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
  return s.write(() => {
    const tid = s.tid(scope, false);
    const counts: DeleteCounts = { fragments: 0, events: 0, lakeRecords: 0, identities: 0, profileIds: [] };
    const touched = new Set<number>();
    const all = datasets === "ALL";
    const dsList = all ? [] : [...datasets];
    const dsFilter = all ? "" : ` AND ds IN (${dsList.map(() => "?").join(", ")})`;
    const delFragments = s.db.prepare(`DELETE FROM fragments WHERE tid = ? AND pid = ? AND ns = ? AND idv = ?${dsFilter}`);
    const delEvents = s.db.prepare(`DELETE FROM events WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = ?) AND ns = ? AND idv = ?${dsFilter}`);
    const delLake = s.db.prepare(`DELETE FROM lake_records WHERE tid = ? AND ns = ? AND idv = ?${dsFilter}`);
    const delQuarantined = s.db.prepare(`DELETE FROM quarantine WHERE tid = ? AND ns = ? AND idv = ?${dsFilter}`);
    for (const i of identities) {
      const pid = s.pidOf(tid, i);
      if (pid !== null) {
        const f = delFragments.run(tid, pid, i.namespace, i.id, ...dsList).changes;
        const e = delEvents.run(tid, pid, i.namespace, i.id, ...dsList).changes;
        counts.fragments += f;
        counts.events += e;
        if (f + e > 0) touched.add(pid);
        if (all) {
          s.stmt("DELETE FROM identities WHERE tid = ? AND ns = ? AND idv = ?").run(tid, i.namespace, i.id);
          s.identityPids.delete(tid, i.namespace, i.id);
          counts.identities++;
          touched.add(pid);
          const size = (s.stmt("SELECT size FROM profiles WHERE pid = ?").get(pid) as { size: number }).size - 1;
          // An emptied graph disappears; its memberships stay so the engines can record the exits.
          if (size <= 0) s.stmt("DELETE FROM profiles WHERE pid = ?").run(pid);
          else s.stmt("UPDATE profiles SET size = ? WHERE pid = ?").run(size, pid);
        }
      }
      counts.lakeRecords += delLake.run(tid, i.namespace, i.id, ...dsList).changes;
      // Quarantined records of the identity went with its data.
      delQuarantined.run(tid, i.namespace, i.id, ...dsList);
    }
    counts.profileIds = [...touched].sort((a, b) => a - b).map(String);
    s.touch(tid, touched);
    return counts;
  });
}

export function deleteDatasetRecordsSync(s: StoreCtx, tid: number, ds: string): DeleteCounts {
  const pids = new Set<number>();
  for (const r of s.stmt("SELECT DISTINCT pid FROM fragments WHERE tid = ? AND ds = ?").all(tid, ds) as Array<{ pid: number }>) pids.add(r.pid);
  for (const r of s.stmt("SELECT DISTINCT pid FROM events WHERE tid = ? AND ds = ?").all(tid, ds) as Array<{ pid: number }>) pids.add(r.pid);
  const fragments = s.stmt("DELETE FROM fragments WHERE tid = ? AND ds = ?").run(tid, ds).changes;
  const events = s.stmt("DELETE FROM events WHERE tid = ? AND ds = ?").run(tid, ds).changes;
  const lakeRecords = s.stmt("DELETE FROM lake_records WHERE tid = ? AND ds = ?").run(tid, ds).changes;
  // Quarantined records of the dataset went with it.
  s.stmt("DELETE FROM quarantine WHERE tid = ? AND ds = ?").run(tid, ds);
  s.touch(tid, pids);
  return { fragments, events, lakeRecords, identities: 0, profileIds: [...pids].sort((a, b) => a - b).map(String) };
}

export function deleteDatasetRecords(s: StoreCtx, scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
  return s.write(() => {
    const tid = s.tid(scope, false);
    requireDataset(s, tid, scope, datasetId);
    return deleteDatasetRecordsSync(s, tid, datasetId);
  });
}

export function updateFields(s: StoreCtx, scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
  return s.write(() => {
    const tid = s.tid(scope, false);
    requireDataset(s, tid, scope, update.datasetId);
    const apply = (body: JsonObject): JsonObject => {
      let out = body;
      for (const [path, value] of Object.entries(update.set ?? {})) out = setPath(out, path, value);
      for (const path of update.remove ?? []) out = removePath(out, path);
      return out;
    };
    let updated = 0;
    const touched = new Set<number>();
    // Each query uses the index that leads with the identity (events: through the graph id).
    const queries = {
      fragments: { sql: "SELECT rowid AS k, pid, NULL AS rid, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
      events: {
        sql: "SELECT seq AS k, pid, eid AS rid, body FROM events WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = (SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?)) AND ds = ? AND ns = ? AND idv = ?",
        args: (i: Identity) => [tid, tid, i.namespace, i.id, update.datasetId, i.namespace, i.id],
      },
      lake_records: { sql: "SELECT seq AS k, NULL AS pid, eid AS rid, body FROM lake_records WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
    } as const;
    const kinds = { fragments: "profile", events: "event", lake_records: "lake" } as const;
    for (const table of ["fragments", "events", "lake_records"] as const) {
      const key = table === "fragments" ? "rowid" : "seq";
      const sel = s.stmt(queries[table].sql);
      const upd = s.stmt(`UPDATE ${table} SET body = ? WHERE ${key} = ?`);
      for (const i of update.identities) {
        for (const r of sel.all(...queries[table].args(i)) as Array<{ k: number; pid: number | null; rid: string | null; body: string }>) {
          // A body that cannot be served is left as it is (and reported), never rewritten.
          const rid = table === "fragments" ? fragmentRecordId(i) : r.rid ?? `seq:${r.k}`;
          const before = s.servable(scope, kinds[table], update.datasetId, rid, i, r.pid, r.body);
          if (before === null) continue;
          const after = apply(before);
          if (after === before) continue;
          upd.run(JSON.stringify(after), r.k);
          updated++;
          if (r.pid !== null) touched.add(r.pid);
        }
      }
    }
    s.touch(tid, touched);
    return { updated, profileIds: [...touched].sort((a, b) => a - b).map(String) };
  });
}
