// Appends and ingest batches of the embedded store: profile and lake writes, identity graph loading and merging, staged batches.
// Functions over the store's one connection and write queue (StoreCtx, store-context.ts).

import { graphsToSize, identitiesOf, planAppend, type EventWrite, type LoadedState } from "../append-plan.js";
import { decodeStaged, encodeStaged, STAGED_CHUNK } from "../batch-staging.js";
import { newCatalogId } from "../ids.js";
import { fragmentRecordId } from "../quarantine.js";
import { MAX_BATCH_ERRORS, StoreError, type AppendOptions, type AppendResult, type CompletedBatch, type CompleteOptions, type IngestBatch, type IngestBatchStatus, type StageOptions, type DecidedChanges, type DecidedAppendResult, landedAsDecided } from "../store.js";
import type { Identity, TenantScope, ValidRecord } from "../types.js";
import { identityKey } from "../validate.js";
import { APPEND_ENTRIES } from "./event-index.js";
import { type BatchRow, EVENT_ROWS, SOLO_APPEND_RECORDS, IDENTITY_READ_CHUNK, rowsSql, definitionIdsOf, sortedGraphs, type StoreCtx } from "./store-context.js";
import { requireDataset } from "./lifecycle-writes.js";
import { membershipChanges, bulk } from "./membership-store.js";

export function append(s: StoreCtx, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
  const tid = s.tenantForWrite(scope);
  return s.write(() => appendNow(s, tid, scope, datasetId, records, opts), records.length >= SOLO_APPEND_RECORDS);
}

export function appendDecided(s: StoreCtx, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
  const tid = s.tenantForWrite(scope);
  const codes = s.defCodes.ensure(definitionIdsOf(decided.changes));
  // One write job: the append and the changes commit together (or, in a group, roll back together).
  return s.write(() => {
    const append = appendNow(s, tid, scope, datasetId, records, opts);
    const transitions = landedAsDecided(decided.expect, append.recordPids) ? membershipChanges(s, tid, decided.changes, codes) : null;
    return { append, transitions };
  }, records.length >= SOLO_APPEND_RECORDS);
}

/** The writes of append (in the caller's write job). */
export function appendNow(s: StoreCtx, tid: number, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): AppendResult {
  const dataset = requireDataset(s, tid, scope, datasetId);
  const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
  for (const r of records) {
    if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${datasetId} holds ${dataset.schemaClass}`);
  }
  if (!dataset.profileEnabled) appendLake(s, tid, datasetId, records, opts, result);
  else appendProfile(s, scope, tid, datasetId, records, opts, result);
  if (opts.batch !== undefined) {
    const written = result.fragments + result.events + result.lakeOnly + result.duplicates;
    accountBatch(s, tid, scope, opts.batch, written, opts.ingestedAt);
  }
  return result;
}

export function appendLake(s: StoreCtx, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
  const ins = s.stmt("INSERT INTO lake_records (tid, ds, eid, ns, idv, ts, body) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
  for (const r of records) {
    const info = ins.run(tid, ds, r.eventId, r.primary.namespace, r.primary.id, r.timestamp ?? opts.ingestedAt, r.json);
    if (info.changes === 0) result.duplicates++;
    else result.lakeOnly++;
  }
}

export function appendProfile(s: StoreCtx, scope: TenantScope, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
  const split = splitKnownEvents(s, tid, records, opts.ingestedAt);
  if (split.rest.length === 0) {
    insertEvents(s, tid, ds, split.known as EventWrite[], result);
    result.recordPids = split.pids;
    const touched = sortedGraphs(split.touched);
    for (const g of touched) result.profileIds.push(String(g));
    s.touch(tid, touched);
    return;
  }
  const rest = split.rest;
  const loaded: LoadedState = { graphs: new Map(), sizes: new Map(), fragments: new Map() };
  loadGraphs(s, tid, rest, loaded);
  const getFrag = s.stmt("SELECT ts, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?");
  for (const r of rest) {
    if (r.kind !== "profile") continue;
    const k = identityKey(r.primary);
    // A fragment is keyed by a primary identity that is always stored in a graph: an unknown identity has none.
    if (loaded.fragments.has(k) || !loaded.graphs.has(k)) continue;
    const row = getFrag.get(tid, ds, r.primary.namespace, r.primary.id) as { ts: number; body: string } | undefined;
    if (row === undefined) continue;
    // A stored fragment that cannot be served is not merged into: the new record replaces it.
    const body = s.servable(scope, "profile", ds, fragmentRecordId(r.primary), r.primary, loaded.graphs.get(k) ?? null, row.body);
    if (body !== null) loaded.fragments.set(k, { timestamp: row.ts, body });
  }
  const plan = planAppend(rest, loaded, opts.maxIdentitiesPerGraph, opts.ingestedAt);
  const newProfile = s.stmt("INSERT INTO profiles (tid, size, created) VALUES (?, 0, ?)");
  const allocated = plan.outcome.created.map(() => Number(newProfile.run(tid, opts.ingestedAt).lastInsertRowid));
  const w = plan.finalize(allocated);
  for (const m of w.merges) moveGraph(s, tid, m.from, m.into);
  const setSize = s.stmt("UPDATE profiles SET size = ? WHERE pid = ?");
  for (const [g, s] of w.sizes) setSize.run(s, g);
  const insId = s.stmt("INSERT INTO identities (tid, ns, idv, pid) VALUES (?, ?, ?, ?)");
  for (const a of w.assigned) {
    insId.run(tid, a.identity.namespace, a.identity.id, a.graph);
    s.identityPids.set(tid, a.identity.namespace, a.identity.id, a.graph);
  }
  const upFrag = s.stmt(`INSERT INTO fragments (tid, ds, ns, idv, pid, ts, ingested, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (tid, ds, ns, idv) DO UPDATE SET pid = excluded.pid, ts = excluded.ts, ingested = excluded.ingested, body = excluded.body`);
  for (const f of w.fragments) upFrag.run(tid, ds, f.primary.namespace, f.primary.id, f.graph, f.timestamp, opts.ingestedAt, JSON.stringify(f.body));
  result.fragments += rest.filter((r) => r.kind === "profile").length;
  result.refusedLinks.push(...w.refused);
  if (rest.length === records.length) {
    insertEvents(s, tid, ds, w.events, result);
    result.recordPids = w.recordGraphs;
    for (const g of w.touchedGraphs) result.profileIds.push(String(g));
    s.touch(tid, w.touchedGraphs);
    return;
  }
  // Known events and planned records back in the records' order; a known event whose graph a
  // planned record merged into another (moveGraph above) goes to the surviving graph.
  const into = new Map<number, number>();
  for (const m of w.merges) into.set(m.from, m.into);
  const events: EventWrite[] = [];
  const pids = split.pids;
  const touched = new Set<number>(w.touchedGraphs);
  let planned = 0;
  let plannedEvents = 0;
  for (let k = 0; k < records.length; k++) {
    const e = split.known[k];
    if (e !== undefined) {
      e.graph = into.get(e.graph) ?? e.graph;
      pids[k] = e.graph;
      touched.add(e.graph);
      events.push(e);
      continue;
    }
    pids[k] = w.recordGraphs[planned]!;
    if (rest[planned++]!.kind === "experienceevent") events.push(w.events[plannedEvents++]!);
  }
  insertEvents(s, tid, ds, events, result);
  result.recordPids = pids;
  const all = sortedGraphs(touched);
  for (const g of all) result.profileIds.push(String(g));
  s.touch(tid, all);
}

/**
 * Events that need no stitching: an event whose identities the writer's cache all knows, in
 * one graph, links nothing and creates nothing, so planAppend would only look its graph up
 * again (its workspace, finalize and the touched set cost the writer ~15 % of an event's
 * time). Those are written as they are; the rest (profile records, identities the cache does
 * not hold, identities of two graphs) go through the plan. `known[k]` and `pids[k]` are set for
 * the known events, by position in `records`.
 */
export function splitKnownEvents(s: StoreCtx, tid: number, records: readonly ValidRecord[], ingestedAt: number):
  { known: Array<EventWrite | undefined>; pids: Float64Array; touched: Set<number>; rest: ValidRecord[] } {
  const known = new Array<EventWrite | undefined>(records.length);
  const pids = new Float64Array(records.length);
  const touched = new Set<number>();
  const rest: ValidRecord[] = [];
  for (let k = 0; k < records.length; k++) {
    const r = records[k]!;
    const graph = r.kind === "experienceevent" ? knownGraph(s, tid, r) : undefined;
    if (graph === undefined) {
      rest.push(r);
      continue;
    }
    touched.add(graph);
    pids[k] = graph;
    known[k] = { eventId: r.eventId!, primary: r.primary, graph, timestamp: r.timestamp ?? ingestedAt, json: r.json, index: r.index };
  }
  return { known, pids, touched, rest };
}

/** The one graph the cache holds every identity of the record in, else undefined. */
export function knownGraph(s: StoreCtx, tid: number, r: ValidRecord): number | undefined {
  const ids = r.identities;
  const graph = s.identityPids.get(tid, ids[0]!.namespace, ids[0]!.id);
  if (graph === undefined) return undefined;
  for (let j = 1; j < ids.length; j++) if (s.identityPids.get(tid, ids[j]!.namespace, ids[j]!.id) !== graph) return undefined;
  return graph;
}

/**
 * Multi-row inserts: one native call per EVENT_ROWS events. A duplicate _id (stored
 * before, or earlier in this statement) is skipped by ON CONFLICT and counted.
 * The tenant id is part of the statement text (an integer): one parameter less per row.
 */
export function insertEvents(s: StoreCtx, tid: number, ds: string, evs: readonly EventWrite[], result: AppendResult): void {
  if (evs.length === 0) return;
  const before = (s.stmt("SELECT max(seq) FROM events").pluck().get() as number | null) ?? 0;
  let added = 0;
  bulk(s, evs.length, EVENT_ROWS, 7,
    (n) => `INSERT INTO events (tid, ds, eid, ns, idv, pid, ts, body) VALUES ${rowsSql(n, 7, `${tid}, `)} ON CONFLICT DO NOTHING`,
    (i, args) => { const e = evs[i]!; args.push(ds, e.eventId, e.primary.namespace, e.primary.id, e.graph, e.timestamp, e.json); },
    (st, args) => {
      const inserted = st.run(args).changes;
      result.events += inserted;
      added += inserted;
      result.duplicates += args.length / 7 - inserted;
    });
  // Once per append (the merge sizes its steps by the largest append: event-index.ts).
  s.eventIndex.noteAdded(added);
  // The new rows' index entries in one statement (event-index.ts). seq is the rowid without
  // AUTOINCREMENT: above `before` are exactly the rows just appended.
  s.stmt(APPEND_ENTRIES).run(before);
}

/**
 * Graph id of every stored identity of the batch into `loaded`, then the sizes stitching needs
 * (graphsToSize): IDENTITY_READ_CHUNK identities per statement, one native call instead of one
 * per identity (CROSS JOIN keeps the identities' primary key as the lookup, one search each).
 */
export function loadGraphs(s: StoreCtx, tid: number, records: readonly ValidRecord[], loaded: LoadedState): void {
  // The cache answers most identities; the rest (and unknown ones) are read.
  const misses: Identity[] = [];
  const missKeys: string[] = [];
  for (const i of identitiesOf(records)) {
    const key = identityKey(i);
    const pid = s.identityPids.get(tid, i.namespace, i.id);
    if (pid !== undefined) loaded.graphs.set(key, pid);
    else {
      misses.push(i);
      missKeys.push(key);
    }
  }
  bulk(s, misses.length, IDENTITY_READ_CHUNK, 3,
    (n) => `SELECT v.column1, i.pid FROM (VALUES ${rowsSql(n, 3)}) AS v CROSS JOIN identities i ON i.tid = ${tid} AND i.ns = v.column2 AND i.idv = v.column3`,
    (k, args) => { const i = misses[k]!; args.push(k, i.namespace, i.id); },
    (st, args) => {
      for (const [k, pid] of st.raw(true).all(args) as Array<[number, number]>) {
        loaded.graphs.set(missKeys[k]!, pid);
        s.identityPids.set(tid, misses[k]!.namespace, misses[k]!.id, pid);
      }
    });
  const pids = graphsToSize(records, loaded.graphs);
  bulk(s, pids.length, IDENTITY_READ_CHUNK, 1,
    (n) => `SELECT pid, size FROM profiles WHERE pid IN (${Array.from({ length: n }, () => "?").join(", ")})`,
    (k, args) => { args.push(pids[k]!); },
    (st, args) => {
      for (const [pid, size] of st.raw(true).all(args) as Array<[number, number]>) loaded.sizes.set(pid, size);
    });
  // Every identity row belongs to a profile row (both change in the same transactions).
  for (const pid of pids) if (!loaded.sizes.has(pid)) throw new Error(`profile ${pid} of a stored identity does not exist`);
}

/** Re-points every row of graph `from` to graph `into` (graphs merged). */
export function moveGraph(s: StoreCtx, tid: number, from: number, into: number): void {
  s.touch(tid, [from, into]);
  const moved = s.stmt("UPDATE identities SET pid = ? WHERE tid = ? AND pid = ? RETURNING ns, idv").raw(true).all(into, tid, from) as Array<[string, string]>;
  for (const [namespace, id] of moved) s.identityPids.set(tid, namespace, id, into);
  s.stmt("UPDATE fragments SET pid = ? WHERE tid = ? AND pid = ?").run(into, tid, from);
  s.stmt("UPDATE events SET pid = ? WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = ?)").run(into, tid, from);
  // The surviving graph's own membership wins where both have one.
  s.stmt("INSERT OR IGNORE INTO memberships (tid, pid, def, status, lqt) SELECT tid, ?, def, status, lqt FROM memberships WHERE tid = ? AND pid = ?").run(into, tid, from);
  s.stmt("DELETE FROM memberships WHERE tid = ? AND pid = ?").run(tid, from);
  s.stmt("DELETE FROM profiles WHERE pid = ?").run(from);
}

export function accountBatch(s: StoreCtx, tid: number, scope: TenantScope, b: NonNullable<AppendOptions["batch"]>, written: number, now: number): void {
  const row = s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, b.id) as BatchRow | undefined;
  if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox ${scope.sandboxName}`);
  if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${b.id} is ${row.status}; files can only be added while it is loading`);
  const errors = JSON.parse(row.errors) as IngestBatch["errors"];
  for (const e of b.failed) {
    if (errors.length >= MAX_BATCH_ERRORS) break;
    errors.push(b.file === undefined ? e : { ...e, file: b.file });
  }
  const files = JSON.parse(row.files) as string[];
  if (b.file !== undefined && !files.includes(b.file)) files.push(b.file);
  s.stmt(`UPDATE batches SET records_read = records_read + ?, records_written = records_written + ?, records_failed = records_failed + ?,
    errors = ?, files = ?, updated = ? WHERE tid = ? AND id = ?`)
    .run(b.read, written, b.failed.length === 0 ? 0 : new Set(b.failed.map((e) => e.index)).size, JSON.stringify(errors), JSON.stringify(files), now, tid, b.id);
}

export function batchFromRow(s: StoreCtx, r: BatchRow): IngestBatch {
  return {
    id: r.id, datasetId: r.ds, status: r.status as IngestBatchStatus, created: r.created, updated: r.updated, completed: r.completed,
    recordsRead: r.records_read, recordsWritten: r.records_written, recordsFailed: r.records_failed,
    files: JSON.parse(r.files) as string[], errors: JSON.parse(r.errors) as IngestBatch["errors"],
  };
}

export function createBatch(s: StoreCtx, scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
  const tid = s.tenantForWrite(scope);
  return s.write(() => {
    requireDataset(s, tid, scope, datasetId);
    const id = newCatalogId();
    s.stmt("INSERT INTO batches (tid, id, ds, status, created, updated) VALUES (?, ?, ?, 'loading', ?, ?)").run(tid, id, datasetId, now, now);
    return batchFromRow(s, s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow);
  });
}

export async function getBatch(s: StoreCtx, scope: TenantScope, id: string): Promise<IngestBatch | null> {
  const r = s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(s.tid(scope, false), id) as BatchRow | undefined;
  return r === undefined ? null : batchFromRow(s, r);
}

export async function listBatches(s: StoreCtx, scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
  const tid = s.tid(scope, false);
  const rows = (opts.datasetId === undefined
    ? s.stmt("SELECT * FROM batches WHERE tid = ? ORDER BY created DESC, id LIMIT ?").all(tid, opts.limit ?? 100)
    : s.stmt("SELECT * FROM batches WHERE tid = ? AND ds = ? ORDER BY created DESC, id LIMIT ?").all(tid, opts.datasetId, opts.limit ?? 100)) as BatchRow[];
  return rows.map((r) => batchFromRow(s, r));
}

export function setBatchStatus(s: StoreCtx, scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
  return s.write(() => {
    const tid = s.tid(scope, false);
    const done = status === "success" || status === "failed" || status === "aborted";
    const info = s.stmt("UPDATE batches SET status = ?, updated = ?, completed = CASE WHEN ? THEN ? ELSE completed END WHERE tid = ? AND id = ?")
      .run(status, now, done ? 1 : 0, now, tid, id);
    if (info.changes === 0) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
    return batchFromRow(s, s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow);
  });
}

/** The batch row, which must exist and be loading (inside a write). */
export function openBatch(s: StoreCtx, tid: number, scope: TenantScope, id: string, action: string): BatchRow {
  const row = s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow | undefined;
  if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
  if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${id} is ${row.status}; only a loading batch can be ${action}`);
  return row;
}

export function stageBatchRecords(s: StoreCtx, scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
  const tid = s.tid(scope, false);
  return s.write(() => {
    const row = openBatch(s, tid, scope, batchId, "added to");
    const dataset = requireDataset(s, tid, scope, row.ds);
    for (const r of records) {
      if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${row.ds} holds ${dataset.schemaClass}`);
    }
    const ins = s.stmt("INSERT INTO batch_records (tid, batch, meta, body) VALUES (?, ?, ?, ?)");
    for (const r of records) {
      const e = encodeStaged(r);
      ins.run(tid, batchId, e.meta, e.body);
    }
    accountBatch(s, tid, scope, { id: batchId, read: opts.read, failed: opts.failed, ...(opts.file === undefined ? {} : { file: opts.file }) }, 0, opts.now);
    return { staged: records.length };
  });
}

export function completeBatch(s: StoreCtx, scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
  const tid = s.tid(scope, false);
  return s.write(() => {
    const row = openBatch(s, tid, scope, batchId, "completed");
    const dataset = requireDataset(s, tid, scope, row.ds);
    const appendOpts: AppendOptions = { ingestedAt: opts.ingestedAt, maxIdentitiesPerGraph: opts.maxIdentitiesPerGraph };
    const refusedLinks: CompletedBatch["refusedLinks"] = [];
    const profileIds = new Set<string>();
    let written = 0;
    let after = 0;
    // One transaction for the whole batch (all or nothing), applied chunk by chunk.
    const next = s.stmt("SELECT seq, meta, body FROM batch_records WHERE tid = ? AND batch = ? AND seq > ? ORDER BY seq LIMIT ?");
    for (;;) {
      const rows = next.all(tid, batchId, after, STAGED_CHUNK) as Array<{ seq: number; meta: string; body: string }>;
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.seq;
      const records = rows.map((r) => decodeStaged(r.meta, r.body, dataset.schemaClass));
      const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
      if (!dataset.profileEnabled) appendLake(s, tid, row.ds, records, appendOpts, result);
      else appendProfile(s, scope, tid, row.ds, records, appendOpts, result);
      written += result.fragments + result.events + result.lakeOnly + result.duplicates;
      for (const l of result.refusedLinks) if (refusedLinks.length < MAX_BATCH_ERRORS) refusedLinks.push(l);
      for (const p of result.profileIds) profileIds.add(p);
    }
    s.stmt("DELETE FROM batch_records WHERE tid = ? AND batch = ?").run(tid, batchId);
    // Partial ingestion: the batch succeeds when any record was written or none failed.
    const status: IngestBatchStatus = row.records_written + written > 0 || row.records_failed === 0 ? "success" : "failed";
    s.stmt("UPDATE batches SET status = ?, records_written = records_written + ?, updated = ?, completed = ? WHERE tid = ? AND id = ?")
      .run(status, written, opts.ingestedAt, opts.ingestedAt, tid, batchId);
    return { batch: batchFromRow(s, s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, batchId) as BatchRow), refusedLinks, profileIds: [...profileIds] };
  });
}

export function abortBatch(s: StoreCtx, scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
  const tid = s.tid(scope, false);
  return s.write(() => {
    openBatch(s, tid, scope, batchId, "aborted");
    s.stmt("DELETE FROM batch_records WHERE tid = ? AND batch = ?").run(tid, batchId);
    s.stmt("UPDATE batches SET status = 'aborted', updated = ?, completed = ? WHERE tid = ? AND id = ?").run(now, now, tid, batchId);
    return batchFromRow(s, s.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, batchId) as BatchRow);
  });
}

// ---- identities and profiles ----------------------------------------------

