// Appends of the PostgreSQL profile store (in the caller's write job): lake-only
// records, identity stitching with profile fragments and events, batch accounting.
import type pg from "pg";
import { identitiesOf, planAppend, type LoadedState } from "../append-plan.js";
import { fragmentRecordId } from "../quarantine.js";
import { MAX_BATCH_ERRORS, StoreError, type AppendOptions, type AppendResult } from "../store.js";
import type { JsonObject, TenantScope, ValidRecord } from "../types.js";
import { identityKey } from "../validate.js";
import { queryRows, type BatchRow, type PgStoreContext } from "./pg-context.js";

/** The writes of append (in the caller's transaction). */
export async function appendIn(ctx: PgStoreContext, c: pg.PoolClient, tid: number, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
  const dataset = await ctx.requireDataset(c, tid, scope, datasetId);
  const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
  for (const r of records) {
    if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${datasetId} holds ${dataset.schemaClass}`);
  }
  if (records.length > 0) {
    if (!dataset.profileEnabled) await appendLake(ctx, c, tid, datasetId, records, opts, result);
    else await appendProfile(ctx, c, scope, tid, datasetId, records, opts, result);
  }
  if (opts.batch !== undefined) {
    await accountBatch(ctx, c, tid, scope, opts.batch, result.fragments + result.events + result.lakeOnly + result.duplicates, opts.ingestedAt);
  }
  return result;
}

export async function appendLake(ctx: PgStoreContext, c: pg.PoolClient, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): Promise<void> {
  const res = await c.query(`INSERT INTO lake_records (tid, ds, eid, ns, idv, ts, body)
    SELECT $1, $2, u.eid, u.ns, u.idv, u.ts, u.body::jsonb FROM unnest($3::text[], $4::text[], $5::text[], $6::int8[], $7::text[]) AS u(eid, ns, idv, ts, body)
    ON CONFLICT DO NOTHING`, [tid, ds, records.map((r) => r.eventId), records.map((r) => r.primary.namespace), records.map((r) => r.primary.id),
    records.map((r) => r.timestamp ?? opts.ingestedAt), records.map((r) => r.json)]);
  result.lakeOnly += res.rowCount ?? 0;
  result.duplicates += records.length - (res.rowCount ?? 0);
}

export async function appendProfile(ctx: PgStoreContext, c: pg.PoolClient, scope: TenantScope, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): Promise<void> {
  const ids = identitiesOf(records);
  const loaded: LoadedState = { graphs: new Map(), sizes: new Map(), fragments: new Map() };
  const graphRows = await queryRows<{ ns: string; idv: string; pid: number; size: number }>(c, `SELECT i.ns, i.idv, i.pid, p.size FROM identities i JOIN profiles p ON p.pid = i.pid
    WHERE i.tid = $1 AND (i.ns, i.idv) IN (SELECT * FROM unnest($2::text[], $3::text[]))`, [tid, ids.map((i) => i.namespace), ids.map((i) => i.id)]);
  for (const r of graphRows) {
    loaded.graphs.set(identityKey({ namespace: r.ns, id: r.idv }), r.pid);
    loaded.sizes.set(r.pid, r.size);
  }
  // A fragment is keyed by a primary identity that is always stored in a graph: unknown identities have none.
  const prim = records.filter((r) => r.kind === "profile" && loaded.graphs.has(identityKey(r.primary))).map((r) => r.primary);
  if (prim.length > 0) {
    const frags = await queryRows<{ ns: string; idv: string; ts: number; body: JsonObject }>(c, `SELECT ns, idv, ts, body FROM fragments
      WHERE tid = $1 AND ds = $2 AND (ns, idv) IN (SELECT * FROM unnest($3::text[], $4::text[]))`, [tid, ds, prim.map((i) => i.namespace), prim.map((i) => i.id)]);
    for (const f of frags) {
      const primary = { namespace: f.ns, id: f.idv };
      const k = identityKey(primary);
      // A stored fragment that cannot be served is not merged into: the new record replaces it.
      const body = ctx.servable(scope, "profile", ds, fragmentRecordId(primary), primary, loaded.graphs.get(k) ?? null, f.body);
      if (body !== null) loaded.fragments.set(k, { timestamp: f.ts, body });
    }
  }
  const plan = planAppend(records, loaded, opts.maxIdentitiesPerGraph, opts.ingestedAt);
  const n = plan.outcome.created.length;
  const allocated = n === 0 ? [] : (await queryRows<{ pid: number }>(c, "SELECT nextval('profiles_pid_seq') AS pid FROM generate_series(1, $1)", [n])).map((r) => r.pid).sort((a, b) => a - b);
  const w = plan.finalize(allocated);
  if (w.createdIds.length > 0) {
    await c.query("INSERT INTO profiles (pid, tid, size, created) SELECT u.pid, $1, u.size, $2 FROM unnest($3::int8[], $4::int[]) AS u(pid, size)",
      [tid, opts.ingestedAt, w.createdIds, w.createdIds.map((g) => w.sizes.get(g) ?? 0)]);
  }
  for (const m of w.merges) await moveGraph(ctx, c, tid, m.from, m.into);
  const existing = [...w.sizes.keys()].filter((g) => !w.createdIds.includes(g));
  if (existing.length > 0) {
    await c.query("UPDATE profiles p SET size = u.size FROM unnest($1::int8[], $2::int[]) AS u(pid, size) WHERE p.pid = u.pid",
      [existing, existing.map((g) => w.sizes.get(g)!)]);
  }
  if (w.assigned.length > 0) {
    await c.query("INSERT INTO identities (tid, ns, idv, pid) SELECT $1, u.ns, u.idv, u.pid FROM unnest($2::text[], $3::text[], $4::int8[]) AS u(ns, idv, pid)",
      [tid, w.assigned.map((a) => a.identity.namespace), w.assigned.map((a) => a.identity.id), w.assigned.map((a) => a.graph)]);
  }
  if (w.fragments.length > 0) {
    await c.query(`INSERT INTO fragments (tid, ds, ns, idv, pid, ts, ingested, body)
      SELECT $1, $2, u.ns, u.idv, u.pid, u.ts, $3, u.body::jsonb FROM unnest($4::text[], $5::text[], $6::int8[], $7::int8[], $8::text[]) AS u(ns, idv, pid, ts, body)
      ON CONFLICT (tid, ds, ns, idv) DO UPDATE SET pid = EXCLUDED.pid, ts = EXCLUDED.ts, ingested = EXCLUDED.ingested, body = EXCLUDED.body`,
    [tid, ds, opts.ingestedAt, w.fragments.map((f) => f.primary.namespace), w.fragments.map((f) => f.primary.id), w.fragments.map((f) => f.graph),
      w.fragments.map((f) => f.timestamp), w.fragments.map((f) => JSON.stringify(f.body))]);
    result.fragments += records.filter((r) => r.kind === "profile").length;
  }
  if (w.events.length > 0) {
    const res = await c.query(`INSERT INTO events (tid, ds, eid, ns, idv, pid, ts, body)
      SELECT $1, $2, u.eid, u.ns, u.idv, u.pid, u.ts, u.body::jsonb FROM unnest($3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::text[]) WITH ORDINALITY AS u(eid, ns, idv, pid, ts, body, ord)
      ORDER BY u.ord ON CONFLICT DO NOTHING`,
    [tid, ds, w.events.map((e) => e.eventId), w.events.map((e) => e.primary.namespace), w.events.map((e) => e.primary.id), w.events.map((e) => e.graph),
      w.events.map((e) => e.timestamp), w.events.map((e) => e.json)]);
    result.events += res.rowCount ?? 0;
    result.duplicates += w.events.length - (res.rowCount ?? 0);
  }
  result.refusedLinks.push(...w.refused);
  result.recordPids = w.recordGraphs;
  result.profileIds.push(...w.touchedGraphs.map(String));
  ctx.touch(tid, w.touchedGraphs);
}

export async function moveGraph(ctx: PgStoreContext, c: pg.PoolClient, tid: number, from: number, into: number): Promise<void> {
  ctx.touch(tid, [from, into]);
  await c.query("UPDATE identities SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
  await c.query("UPDATE fragments SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
  await c.query("UPDATE events SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
  // The surviving graph's own membership wins where both have one.
  await c.query(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT tid, $1, def, status, lqt FROM memberships WHERE tid = $2 AND pid = $3
    ON CONFLICT DO NOTHING`, [into, tid, from]);
  await c.query("DELETE FROM memberships WHERE tid = $1 AND pid = $2", [tid, from]);
  await c.query("DELETE FROM profiles WHERE pid = $1", [from]);
}

export async function accountBatch(ctx: PgStoreContext, c: pg.PoolClient, tid: number, scope: TenantScope, b: NonNullable<AppendOptions["batch"]>, written: number, now: number): Promise<void> {
  const rows = await queryRows<BatchRow>(c, "SELECT * FROM batches WHERE tid = $1 AND id = $2 FOR UPDATE", [tid, b.id]);
  const row = rows[0];
  if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox ${scope.sandboxName}`);
  if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${b.id} is ${row.status}; files can only be added while it is loading`);
  const errors = row.errors;
  for (const e of b.failed) {
    if (errors.length >= MAX_BATCH_ERRORS) break;
    errors.push(b.file === undefined ? e : { ...e, file: b.file });
  }
  const files = row.files;
  if (b.file !== undefined && !files.includes(b.file)) files.push(b.file);
  await c.query(`UPDATE batches SET records_read = records_read + $1, records_written = records_written + $2, records_failed = records_failed + $3,
    errors = $4, files = $5, updated = $6 WHERE tid = $7 AND id = $8`,
  [b.read, written, new Set(b.failed.map((e) => e.index)).size, JSON.stringify(errors), JSON.stringify(files), now, tid, b.id]);
}
