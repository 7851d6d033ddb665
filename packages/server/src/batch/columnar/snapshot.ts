/**
 * A resident columnar snapshot of one tenant's merged profiles under one merge
 * policy (issue #7: the batch engine evaluates typed-array columns instead of
 * re-reading and re-parsing the store for every job).
 *
 * A `SnapshotPart` is an immutable columnar image of some profiles: one row
 * per scanned entry (identityGraph none yields one entry per identity, so a
 * profile may own several consecutive rows), events in CSR order
 * (`eventStart`), their instants (`eventTime`), and per row: the profile's
 * ordinal, its opt-out flag and its identity namespaces (for the by-namespace
 * metrics). The stored `segmentMembership.ups` is NOT kept: memberships are
 * read from the store at job time and `inSegment` columns are supplied per
 * evaluation (`data(overrides)`), so a snapshot never serves stale statuses.
 *
 * A `Snapshot` is a base part (from one full scan) plus an overlay part (the
 * profiles that changed since, re-read one by one) and a mask of the base
 * profiles the overlay replaces. Refreshing builds a NEW Snapshot that shares
 * the base, so a reader holding the old one is never disturbed.
 */
import type { IdentityGraph, ProfileChanges, ProfileReads, ScannedProfile } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { parseTimestamp } from "@segmentd/pql";
import type { Column, ColumnarData, ColumnarTable } from "./layout.js";
import { PackedStrings, textAt, type Texts } from "./packed-strings.js";
import { growShared, sharedArray, sharedCopy } from "./shared-arrays.js";
import { StoredTable, TableBuilder } from "./table.js";

const UPS = "segmentMembership.ups";

/** An event's instant as PQL reads its `timestamp` (epoch ms number, or ISO 8601 text; a date is its midnight); NaN when none. */
export function eventTimeOf(body: Record<string, unknown>): number {
  const v = Object.hasOwn(body, "timestamp") ? body["timestamp"] : null;
  if (typeof v === "number") return Number.isFinite(v) ? v : NaN;
  if (typeof v === "string") return parseTimestamp(v)?.start ?? NaN;
  return NaN;
}

/** Builds one part from scanned entries (entries of one profile consecutive). */
export class PartBuilder {
  private eventTime = new Float64Array(1024);
  private readonly events: TableBuilder;
  private readonly profiles: TableBuilder;
  private eventStart = new Uint32Array(1024);
  private rowOrdinal = new Int32Array(1024);
  private optedOut = new Uint8Array(1024);
  private nsStart = new Uint32Array(1024);
  private nsCodes = new Uint16Array(1024);
  private nsCount = 0;
  private ordinalStart = new Uint32Array(1024);
  private readonly profileIds: string[] = [];
  /** Packed, not a string each (a 1M-profile build: ~100 MB of heap less, and fewer full collections). */
  private readonly identityText = new PackedStrings();
  private readonly namespaces: string[] = [];
  private readonly nsIndex = new Map<string, number>();
  private last: string | null = null;
  private rows = 0;

  constructor(o: { rawStringsAfter?: number } = {}) {
    const raw = o.rawStringsAfter === undefined ? {} : { rawStringsAfter: o.rawStringsAfter };
    this.events = new TableBuilder({ derivedTimestamp: () => this.eventTime, ...raw });
    this.profiles = new TableBuilder({ skip: (p) => p === UPS, ...raw });
  }

  /** Appends one scanned entry. */
  add(entry: ScannedProfile): void {
    const row = this.rows++;
    if (entry.profileId !== this.last) {
      const o = this.profileIds.length;
      this.ordinalStart = growShared(this.ordinalStart, o + 2);
      this.ordinalStart[o] = row;
      this.profileIds.push(entry.profileId);
      this.last = entry.profileId;
    }
    this.rowOrdinal = growShared(this.rowOrdinal, row + 1);
    this.rowOrdinal[row] = this.profileIds.length - 1;
    this.optedOut = growShared(this.optedOut, row + 1);
    this.optedOut[row] = entry.optedOut ? 1 : 0;
    this.nsStart = growShared(this.nsStart, row + 2);
    this.nsStart[row] = this.nsCount;
    this.identityText.push(entry.identities.map((i) => `${i.namespace}:${i.id}`).join("\n"));
    const seen = new Set<number>();
    for (const id of entry.identities) {
      let c = this.nsIndex.get(id.namespace);
      if (c === undefined) {
        c = this.namespaces.length;
        this.nsIndex.set(id.namespace, c);
        this.namespaces.push(id.namespace);
      }
      if (seen.has(c)) continue;
      seen.add(c);
      this.nsCodes = growShared(this.nsCodes, this.nsCount + 1);
      this.nsCodes[this.nsCount++] = c;
    }
    this.nsStart[row + 1] = this.nsCount;
    this.eventStart = growShared(this.eventStart, row + 2);
    this.eventStart[row] = this.events.length;
    const evs = entry.events;
    const times = evs.map((e) => eventTimeOf(e.body));
    let sorted = true;
    for (let k = 1; k < times.length && sorted; k++) {
      const a = times[k - 1]!;
      const b = times[k]!;
      if ((Number.isNaN(a) && !Number.isNaN(b)) || a > b) sorted = false;
    }
    // The layout's order: oldest first, unreadable timestamps last, ties in store order.
    const order = times.map((_, k) => k);
    if (!sorted) {
      order.sort((x, y) => {
        const a = times[x]!;
        const b = times[y]!;
        const an = Number.isNaN(a);
        const bn = Number.isNaN(b);
        if (an || bn) return an === bn ? x - y : an ? 1 : -1;
        return a - b || x - y;
      });
    }
    for (const k of order) {
      const r = this.events.length;
      // Every row's time is written below (NaN when it has none), so the capacity needs no fill:
      // filling it would touch up to twice the column's memory while building.
      this.eventTime = growShared(this.eventTime, r + 1);
      this.eventTime[r] = times[k]!;
      this.events.add(evs[k]!.body);
    }
    this.eventStart[row + 1] = this.events.length;
    this.profiles.add(entry.entity);
  }

  finish(): SnapshotPart {
    const rows = this.rows;
    const ordinals = this.profileIds.length;
    this.ordinalStart = growShared(this.ordinalStart, ordinals + 1);
    this.ordinalStart[ordinals] = rows;
    const eventRows = this.events.length;
    // On shared memory (the evaluation pool's workers read the part in place); the copies are the slices this always made.
    const eventTime = sharedCopy(this.eventTime, eventRows);
    this.eventTime = eventTime;
    return new SnapshotPart({
      profiles: this.profiles.finish(),
      events: this.events.finish(),
      eventStart: rows === 0 ? sharedArray(Uint32Array, 1) : sharedCopy(this.eventStart, rows + 1),
      eventTime,
      rowOrdinal: sharedCopy(this.rowOrdinal, rows),
      ordinalStart: sharedCopy(this.ordinalStart, ordinals + 1),
      profileIds: this.profileIds,
      optedOut: sharedCopy(this.optedOut, rows),
      nsStart: rows === 0 ? sharedArray(Uint32Array, 1) : sharedCopy(this.nsStart, rows + 1),
      nsCodes: sharedCopy(this.nsCodes, this.nsCount),
      namespaces: this.namespaces,
      identityText: this.identityText.trim(),
    });
  }
}

export interface PartArrays {
  profiles: StoredTable;
  events: StoredTable;
  eventStart: Uint32Array;
  eventTime: Float64Array;
  /** Row → profile ordinal. */
  rowOrdinal: Int32Array;
  /** Ordinal → first row; length ordinals + 1. */
  ordinalStart: Uint32Array;
  profileIds: readonly string[];
  optedOut: Uint8Array;
  /** Row → its distinct namespace codes: nsCodes[nsStart[r] .. nsStart[r + 1]). */
  nsStart: Uint32Array;
  nsCodes: Uint16Array;
  namespaces: readonly string[];
  /** Row → its identities as "namespace:id" lines (previews list them). */
  identityText: Texts;
}

/** The profiles table with some columns replaced (inSegment statuses of one evaluation). */
class OverriddenTable implements ColumnarTable {
  private readonly prefixes = new Set<string>();
  constructor(
    private readonly base: StoredTable,
    readonly overrides: ReadonlyMap<string, Column>,
  ) {
    for (const p of overrides.keys()) {
      const parts = p.split(".");
      for (let k = 1; k < parts.length; k++) this.prefixes.add(parts.slice(0, k).join("."));
    }
  }
  get length(): number {
    return this.base.length;
  }
  column(path: string): Column | undefined {
    return this.overrides.get(path) ?? this.base.column(path);
  }
  hasChildren(path: string): boolean {
    return this.prefixes.has(path) || this.base.hasChildren(path);
  }
  /** inSegment uses it to know no other namespace holds an id (else it reads row objects). */
  columnPaths(): readonly string[] {
    return [...this.base.columnPaths(), ...[...this.overrides.keys()].filter((p) => this.base.stored(p) === undefined)];
  }
}

export class SnapshotPart {
  readonly profiles: StoredTable;
  readonly events: StoredTable;
  readonly eventStart: Uint32Array;
  readonly eventTime: Float64Array;
  readonly rowOrdinal: Int32Array;
  readonly ordinalStart: Uint32Array;
  readonly profileIds: readonly string[];
  readonly optedOut: Uint8Array;
  readonly nsStart: Uint32Array;
  readonly nsCodes: Uint16Array;
  readonly namespaces: readonly string[];
  private readonly identityText: Texts;
  private index: Map<string, number> | null = null;
  /** Profile id → ordinal when every id is a small non-negative integer (the embedded store's pids). */
  private numeric: Int32Array | null | undefined = undefined;

  constructor(a: PartArrays) {
    this.profiles = a.profiles;
    this.events = a.events;
    this.eventStart = a.eventStart;
    this.eventTime = a.eventTime;
    this.rowOrdinal = a.rowOrdinal;
    this.ordinalStart = a.ordinalStart;
    this.profileIds = a.profileIds;
    this.optedOut = a.optedOut;
    this.nsStart = a.nsStart;
    this.nsCodes = a.nsCodes;
    this.namespaces = a.namespaces;
    this.identityText = a.identityText;
  }

  /** Every array of the part (snapshot-file.ts writes them). */
  arrays(): PartArrays {
    const { profiles, events, eventStart, eventTime, rowOrdinal, ordinalStart, profileIds, optedOut, nsStart, nsCodes, namespaces, identityText } = this;
    return { profiles, events, eventStart, eventTime, rowOrdinal, ordinalStart, profileIds, optedOut, nsStart, nsCodes, namespaces, identityText };
  }

  /** The identities of row r, as "namespace:id". */
  identitiesOf(r: number): string[] {
    const t = textAt(this.identityText, r);
    return t === "" ? [] : t.split("\n");
  }

  static empty(): SnapshotPart {
    return new PartBuilder().finish();
  }

  get rows(): number {
    return this.profiles.length;
  }

  get ordinals(): number {
    return this.profileIds.length;
  }

  /**
   * Ordinal of a profile id, or -1. Numeric ids (the embedded store's) are looked up in a dense
   * array: a job locates every stored member of every definition (millions), and a Map lookup of
   * a freshly read string hashes it first.
   */
  /** ordinalOf for a numeric profile id (the stores' ids are integers: listMemberPids). */
  ordinalOfPid(pid: number): number {
    if (this.numeric === undefined) this.numeric = numericIndex(this.profileIds);
    if (this.numeric === null) return this.ordinalOf(String(pid));
    // Only canonical integer ids are in the index (numericIndex), so the number names one id.
    return pid >= 0 && pid < this.numeric.length ? this.numeric[pid]! : -1;
  }

  ordinalOf(profileId: string): number {
    if (this.numeric === undefined) this.numeric = numericIndex(this.profileIds);
    if (this.numeric !== null) {
      const n = Number(profileId);
      if (!(n >= 0 && n < this.numeric.length)) return -1;
      const o = this.numeric[n]!;
      // "007" or "7.0" name no profile: the id text must be the stored one.
      return o >= 0 && this.profileIds[o] === profileId ? o : -1;
    }
    if (this.index === null) {
      const m = new Map<string, number>();
      this.profileIds.forEach((id, o) => m.set(id, o));
      this.index = m;
    }
    return this.index.get(profileId) ?? -1;
  }

  /** The layout view, with `segmentMembership.ups.<id>.status` columns supplied by the caller. */
  data(overrides: ReadonlyMap<string, Column> = new Map()): ColumnarData {
    const profiles = overrides.size === 0 ? this.profiles : new OverriddenTable(this.profiles, overrides);
    const base = this.profiles;
    const events = this.events;
    return {
      profiles,
      events,
      eventStart: this.eventStart,
      eventTime: this.eventTime,
      profile(i: number): Record<string, unknown> {
        const row = base.row(i);
        if (overrides.size === 0) return row;
        const sm = (row["segmentMembership"] ?? {}) as Record<string, unknown>;
        const ups: Record<string, unknown> = {};
        for (const [path, col] of overrides) {
          if (col.kind !== "string" || col.codes[i] === -1) continue;
          const id = path.slice(UPS.length + 1, path.length - ".status".length);
          ups[id] = { status: col.dict[col.codes[i]!] };
        }
        row["segmentMembership"] = { ...sm, ups };
        return row;
      },
      event(r: number): Record<string, unknown> {
        return events.row(r);
      },
    };
  }

  /** Drops columns materialised for a job (JSON columns, derived timestamps). */
  release(): void {
    this.profiles.release();
    this.events.release();
  }
}

/** A dense id → ordinal array when every id is a canonical integer not far above the count (else null). */
function numericIndex(ids: readonly string[]): Int32Array | null {
  // Read digit by digit: Number() and String() of each of a million ids cost ~0.1 s on the first lookup.
  const values = new Float64Array(ids.length);
  let max = -1;
  for (let o = 0; o < ids.length; o++) {
    const n = canonicalInteger(ids[o]!);
    if (n < 0) return null;
    values[o] = n;
    if (n > max) max = n;
  }
  if (max >= 8 * ids.length + 65_536 || max >= 2 ** 31 - 1) return null;
  const index = new Int32Array(max + 1).fill(-1);
  for (let o = 0; o < values.length; o++) index[values[o]!] = o;
  return index;
}

/** The value of an id written as String(n) writes a non-negative integer of up to 15 digits, else -1. */
function canonicalInteger(id: string): number {
  const len = id.length;
  if (len === 0 || len > 15 || (len > 1 && id.charCodeAt(0) === 48)) return -1;
  let n = 0;
  for (let i = 0; i < len; i++) {
    const d = id.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

const REALIZED_DICT: readonly string[] = ["realized"];

/**
 * The `segmentMembership.ups.<id>.status` columns of each part (in `parts()`
 * order) for the given members (over global ordinals): what `inSegment(id)`
 * reads. Every row of a member profile gets "realized".
 */
export function statusOverrides(snap: Snapshot, members: ReadonlyMap<string, Uint8Array>): Array<Map<string, Column>> {
  const parts = snap.parts();
  const maps = parts.map(() => new Map<string, Column>());
  for (const [ref, global] of members) {
    parts.forEach(({ part, offset }, k) => {
      const codes = sharedArray(Int32Array, part.rows).fill(-1);
      for (let o = 0; o < part.ordinals; o++) {
        if (global[offset + o] !== 1) continue;
        for (let r = part.ordinalStart[o]!; r < part.ordinalStart[o + 1]!; r++) codes[r] = 0;
      }
      maps[k]!.set(statusPath(ref), { kind: "string", codes, dict: REALIZED_DICT });
    });
  }
  return maps;
}

/** Global ordinals of the listed numeric profile ids (listMemberPids). */
export function membersOfPids(snap: Snapshot, pids: Float64Array): Uint8Array {
  const out = new Uint8Array(snap.ordinals);
  for (let i = 0; i < pids.length; i++) {
    const g = snap.locatePid(pids[i]!);
    if (g >= 0) out[g] = 1;
  }
  return out;
}

/** The path of the status column `inSegment(id)` reads. */
export function statusPath(definitionId: string): string {
  return `${UPS}.${definitionId}.status`;
}

export interface ChangeFeed {
  changesSince(scope: TenantScope, since: number | null): Promise<{ version: number; profileIds: ReadonlySet<string> | null }> | { version: number; profileIds: ReadonlySet<string> | null };
}

/** The store's change feed, when it has one (older stores: every refresh is a rebuild). */
export function changeFeedOf(store: Partial<ProfileChanges>): ChangeFeed | null {
  const f = (store as unknown as Partial<ChangeFeed>).changesSince;
  if (typeof f !== "function") return null;
  const ready = store.changesReady;
  // A store still reading its change log back would answer null for a version from before its open.
  if (typeof ready === "function") return { changesSince: async (s, since) => { await ready.call(store); return f.call(store, s, since); } };
  return { changesSince: (s, since) => f.call(store, s, since) };
}

/** What building and refreshing a snapshot read: scans, one profile's graph and data, and the change feed. */
export type SnapshotStore = ProfileReads & IdentityGraph & ProfileChanges;

export interface BuildOptions {
  events: boolean;
  chunkSize?: number;
  isCancelled?: () => boolean;
  onProgress?: (profilesRead: number) => void;
}

export class BuildCancelledError extends Error {
  constructor() {
    super("snapshot build cancelled");
  }
}

export class Snapshot {
  constructor(
    readonly policy: MergePolicySpec,
    readonly base: SnapshotPart,
    readonly overlay: SnapshotPart,
    /** Base ordinals replaced by the overlay (or removed): 1. */
    readonly masked: Uint8Array,
    /** Entries of every profile re-read since the base was built ([] = removed). */
    readonly overlayEntries: ReadonlyMap<string, readonly ScannedProfile[]>,
    /** The change feed's version the snapshot reflects (null: no feed). */
    readonly version: number | null,
    readonly withEvents: boolean,
  ) {}

  /** Both parts with their masks (the overlay is never masked). */
  parts(): Array<{ part: SnapshotPart; masked: Uint8Array | null; offset: number }> {
    return [
      { part: this.base, masked: this.masked, offset: 0 },
      { part: this.overlay, masked: null, offset: this.base.ordinals },
    ];
  }

  /** Global ordinals: base ordinals, then overlay ordinals. */
  get ordinals(): number {
    return this.base.ordinals + this.overlay.ordinals;
  }

  private counts: { profiles: number; entries: number } | null = null;

  /** Live profiles and entries, counted once (parts and mask never change). */
  private live(): { profiles: number; entries: number } {
    if (this.counts !== null) return this.counts;
    let dead = 0;
    let entries = this.overlay.rows;
    for (let o = 0; o < this.base.ordinals; o++) {
      if (this.masked[o] === 0) entries += this.base.ordinalStart[o + 1]! - this.base.ordinalStart[o]!;
      else dead++;
    }
    this.counts = { profiles: this.ordinals - dead, entries };
    return this.counts;
  }

  /** Live profiles. */
  get profileCount(): number {
    return this.live().profiles;
  }

  /** Live entries (rows). */
  get entryCount(): number {
    return this.live().entries;
  }

  /** Global ordinal of a live profile, or -1. */
  locate(profileId: string): number {
    const o = this.overlay.ordinalOf(profileId);
    if (o >= 0) return this.base.ordinals + o;
    const b = this.base.ordinalOf(profileId);
    return b >= 0 && this.masked[b] === 0 ? b : -1;
  }

  /** locate for a numeric profile id. */
  locatePid(pid: number): number {
    const o = this.overlay.ordinalOfPid(pid);
    if (o >= 0) return this.base.ordinals + o;
    const b = this.base.ordinalOfPid(pid);
    return b >= 0 && this.masked[b] === 0 ? b : -1;
  }

  profileIdOf(global: number): string {
    return global < this.base.ordinals ? this.base.profileIds[global]! : this.overlay.profileIds[global - this.base.ordinals]!;
  }

  isLive(global: number): boolean {
    return global >= this.base.ordinals || this.masked[global] === 0;
  }

  release(): void {
    this.base.release();
    this.overlay.release();
  }

  /** Releases the parts `next` does not share (a refresh keeps the base: its expanded columns stay). */
  releaseUnshared(next: Snapshot): void {
    if (this.base !== next.base && this.base !== next.overlay) this.base.release();
    if (this.overlay !== next.base && this.overlay !== next.overlay) this.overlay.release();
  }
}

/**
 * Profiles per scan chunk while building, whatever the job's chunk size: a chunk's parsed
 * entities and events live until the chunk is copied into columns, and large chunks outlive
 * young-generation collections, so they are promoted and inflate the heap (RSS) long after
 * the build (200k profiles / 2M events: peak RSS 1.57 GB with chunks of 2000, 1.23 GB with 500).
 */
export const SNAPSHOT_SCAN_CHUNK = 500;

/** One full scan of the store. The feed's version is read first, so changes during the scan are re-read next time. */
export async function buildSnapshot(store: SnapshotStore, scope: TenantScope, policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot> {
  const feed = changeFeedOf(store);
  const version = feed === null ? null : (await feed.changesSince(scope, null)).version;
  const b = new PartBuilder();
  let read = 0;
  let last: string | null = null;
  for await (const chunk of store.scanProfiles(scope, policy, { chunkSize: Math.min(o.chunkSize ?? SNAPSHOT_SCAN_CHUNK, SNAPSHOT_SCAN_CHUNK), events: o.events })) {
    if (o.isCancelled?.()) throw new BuildCancelledError();
    for (const e of chunk) {
      if (e.profileId !== last) read++;
      last = e.profileId;
      b.add(e);
    }
    o.onProgress?.(read);
  }
  const base = b.finish();
  return new Snapshot(policy, base, SnapshotPart.empty(), new Uint8Array(base.ordinals), new Map(), version, o.events);
}

export interface RefreshOptions extends BuildOptions {
  /** Rebuild instead of growing the overlay beyond this share of the base's profiles (default 0.05, at least 256 profiles). */
  maxOverlayShare?: number;
}

/**
 * Brings a snapshot up to date: nothing when nothing changed, the changed
 * profiles re-read into the overlay, or a full rebuild when the store cannot
 * tell what changed or the overlay would grow too large.
 */
export async function refreshSnapshot(store: SnapshotStore, scope: TenantScope, snap: Snapshot, o: RefreshOptions): Promise<{ snapshot: Snapshot; mode: "unchanged" | "incremental" | "rebuilt"; changed: number }> {
  const rebuild = async () => ({ snapshot: await buildSnapshot(store, scope, snap.policy, o), mode: "rebuilt" as const, changed: -1 });
  const feed = changeFeedOf(store);
  if (feed === null || snap.version === null || (o.events && !snap.withEvents)) return rebuild();
  const r = await feed.changesSince(scope, snap.version);
  if (r.profileIds === null) return rebuild();
  const withEvents = snap.withEvents;
  if (r.profileIds.size === 0) {
    return { snapshot: new Snapshot(snap.policy, snap.base, snap.overlay, snap.masked, snap.overlayEntries, r.version, withEvents), mode: "unchanged", changed: 0 };
  }
  const entries = new Map(snap.overlayEntries);
  for (const id of r.profileIds) entries.set(id, []);
  const limit = Math.max(256, Math.floor(snap.base.ordinals * (o.maxOverlayShare ?? 0.05)));
  if (entries.size > limit) return rebuild();
  // One scan over the changed ids: a call per chunk, not several per profile (a gone profile yields nothing: []).
  const read = new Map<string, ScannedProfile[]>();
  for await (const chunk of store.scanProfiles(scope, snap.policy, { profileIds: [...r.profileIds], chunkSize: SNAPSHOT_SCAN_CHUNK, events: withEvents })) {
    if (o.isCancelled?.()) throw new BuildCancelledError();
    for (const e of chunk) {
      const list = read.get(e.profileId);
      if (list === undefined) read.set(e.profileId, [e]);
      else list.push(e);
    }
  }
  for (const [id, list] of read) entries.set(id, list);
  const masked = snap.masked.slice();
  for (const id of r.profileIds) {
    const b = snap.base.ordinalOf(id);
    if (b >= 0) masked[b] = 1;
  }
  const builder = new PartBuilder();
  for (const id of [...entries.keys()].sort()) for (const e of entries.get(id)!) builder.add(e);
  const overlay = builder.finish();
  return { snapshot: new Snapshot(snap.policy, snap.base, overlay, masked, entries, r.version, withEvents), mode: "incremental", changed: r.profileIds.size };
}
