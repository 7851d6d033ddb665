// Data lifecycle of the PostgreSQL profile store: deletes by identity or dataset
// and field updates, each inside a queued write.
import type pg from "pg";
import { fragmentRecordId } from "../quarantine.js";
import type { DeleteCounts, FieldUpdate } from "../store.js";
import type { Identity, JsonObject, TenantScope } from "../types.js";
import { removePath, setPath } from "../xdm-object.js";
import { queryRows, type PgStoreContext } from "./pg-context.js";
import { pidOf } from "./pg-reads.js";

export function deleteByIdentities(ctx: PgStoreContext, scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
  return ctx.write(scope, async (c, tid) => {
    const counts: DeleteCounts = { fragments: 0, events: 0, lakeRecords: 0, identities: 0, profileIds: [] };
    const touched = new Set<number>();
    const all = datasets === "ALL";
    const dsArr = all ? null : [...datasets];
    for (const i of identities) {
      const pid = await pidOf(c, tid, i);
      if (pid !== null) {
        const f = (await c.query("DELETE FROM fragments WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 AND ($5::text[] IS NULL OR ds = ANY($5))", [tid, pid, i.namespace, i.id, dsArr])).rowCount ?? 0;
        const e = (await c.query("DELETE FROM events WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 AND ($5::text[] IS NULL OR ds = ANY($5))", [tid, pid, i.namespace, i.id, dsArr])).rowCount ?? 0;
        counts.fragments += f;
        counts.events += e;
        if (f + e > 0) touched.add(pid);
        if (all) {
          await c.query("DELETE FROM identities WHERE tid = $1 AND ns = $2 AND idv = $3", [tid, i.namespace, i.id]);
          counts.identities++;
          touched.add(pid);
          // An emptied graph disappears; its memberships stay so the engines can record the exits.
          const left = await queryRows<{ size: number }>(c, "UPDATE profiles SET size = size - 1 WHERE pid = $1 RETURNING size", [pid]);
          if ((left[0]?.size ?? 0) <= 0) await c.query("DELETE FROM profiles WHERE pid = $1", [pid]);
        }
      }
      counts.lakeRecords += (await c.query("DELETE FROM lake_records WHERE tid = $1 AND ns = $2 AND idv = $3 AND ($4::text[] IS NULL OR ds = ANY($4))", [tid, i.namespace, i.id, dsArr])).rowCount ?? 0;
      // Quarantined records of the identity went with its data.
      await c.query("DELETE FROM quarantine WHERE tid = $1 AND ns = $2 AND idv = $3 AND ($4::text[] IS NULL OR ds = ANY($4))", [tid, i.namespace, i.id, dsArr]);
    }
    counts.profileIds = [...touched].sort((a, b) => a - b).map(String);
    ctx.touch(tid, touched);
    return counts;
  });
}

export async function deleteDatasetRecordsTx(ctx: PgStoreContext, c: pg.PoolClient, tid: number, ds: string): Promise<DeleteCounts> {
  const pids = await queryRows<{ pid: number }>(c, "SELECT pid FROM fragments WHERE tid = $1 AND ds = $2 UNION SELECT pid FROM events WHERE tid = $1 AND ds = $2 ORDER BY pid", [tid, ds]);
  const fragments = (await c.query("DELETE FROM fragments WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
  const events = (await c.query("DELETE FROM events WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
  const lakeRecords = (await c.query("DELETE FROM lake_records WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
  // Quarantined records of the dataset went with it.
  await c.query("DELETE FROM quarantine WHERE tid = $1 AND ds = $2", [tid, ds]);
  ctx.touch(tid, pids.map((r) => r.pid));
  return { fragments, events, lakeRecords, identities: 0, profileIds: pids.map((r) => String(r.pid)) };
}

export function deleteDatasetRecords(ctx: PgStoreContext, scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
  return ctx.write(scope, async (c, tid) => {
    await ctx.requireDataset(c, tid, scope, datasetId);
    return deleteDatasetRecordsTx(ctx, c, tid, datasetId);
  });
}

export function updateFields(ctx: PgStoreContext, scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
  return ctx.write(scope, async (c, tid) => {
    await ctx.requireDataset(c, tid, scope, update.datasetId);
    const apply = (body: JsonObject): JsonObject => {
      let out = body;
      for (const [path, value] of Object.entries(update.set ?? {})) out = setPath(out, path, value);
      for (const path of update.remove ?? []) out = removePath(out, path);
      return out;
    };
    const queries = {
      fragments: { kind: "profile", sel: "SELECT ctid::text AS k, pid, NULL::text AS rid, body FROM fragments WHERE tid = $1 AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE fragments SET body = $1 WHERE ctid = $2::tid" },
      events: { kind: "event", sel: "SELECT seq::text AS k, pid, eid AS rid, body FROM events WHERE tid = $1 AND pid = (SELECT pid FROM identities WHERE tid = $1 AND ns = $3 AND idv = $4) AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE events SET body = $1 WHERE seq = $2::int8" },
      lake: { kind: "lake", sel: "SELECT seq::text AS k, NULL::int8 AS pid, eid AS rid, body FROM lake_records WHERE tid = $1 AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE lake_records SET body = $1 WHERE seq = $2::int8" },
    } as const;
    let updated = 0;
    const touched = new Set<number>();
    for (const q of Object.values(queries)) {
      for (const i of update.identities) {
        for (const r of await queryRows<{ k: string; pid: number | null; rid: string | null; body: unknown }>(c, q.sel, [tid, update.datasetId, i.namespace, i.id])) {
          // A body that cannot be served is left as it is (and reported), never rewritten.
          const rid = q.kind === "profile" ? fragmentRecordId(i) : r.rid ?? `seq:${r.k}`;
          const before = ctx.servable(scope, q.kind, update.datasetId, rid, i, r.pid, r.body);
          if (before === null) continue;
          const after = apply(before);
          if (after === before) continue;
          await c.query(q.upd, [JSON.stringify(after), r.k]);
          updated++;
          if (r.pid !== null) touched.add(r.pid);
        }
      }
    }
    ctx.touch(tid, touched);
    return { updated, profileIds: [...touched].sort((a, b) => a - b).map(String) };
  });
}
