/**
 * `rowColumnarData`: the reference builder of the columnar layout (layout.ts)
 * from plain `{ profile, events }` objects. Used by the tests (differential
 * checks against `evaluate`) and by the server for small batches; the server's
 * bulk builder produces the same shapes straight from its store.
 *
 * Rules (the ones the columnar evaluator relies on):
 * - plain objects are descended into; anything else (scalars, arrays, null)
 *   ends the walk and is stored in the column of its dotted path;
 * - keys containing "." are not given columns: a PQL path `a.b` always means
 *   field b of field a, never a key "a.b", so such keys are unreachable by
 *   column paths (the plain objects still carry them for the row fallback);
 * - a column whose values are all finite numbers is a number column, all
 *   strings a string column, all booleans a boolean column (null counts as
 *   "no value" in each); anything else is a mixed column;
 * - each profile's events are ordered oldest first (stable); events without a
 *   readable timestamp go last, in their input order.
 */
import type { Column, ColumnarData, ColumnarTable } from "./layout.js";
import { orNull, toInstant } from "../runtime/values.js";

export interface RowInput {
  profile: Record<string, unknown>;
  events?: readonly Record<string, unknown>[];
}

/** Plain data objects are walked into; arrays, null and class instances are values. */
function isWalkable(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

class TableBuilder {
  private readonly values = new Map<string, unknown[]>();
  private readonly objects = new Set<string>();
  private n = 0;

  add(row: Record<string, unknown>): void {
    const r = this.n++;
    // Explicit stack: data may be nested deeper than the JS stack allows.
    const stack: [string, Record<string, unknown>][] = [["", row]];
    while (stack.length > 0) {
      const [prefix, obj] = stack.pop()!;
      for (const key of Object.keys(obj)) {
        if (key.includes(".") || key === "") continue;
        const path = prefix === "" ? key : `${prefix}.${key}`;
        const v = obj[key];
        if (v === undefined) continue;
        if (isWalkable(v)) {
          this.objects.add(path);
          stack.push([path, v]);
          continue;
        }
        let col = this.values.get(path);
        if (col === undefined) {
          col = [];
          this.values.set(path, col);
        }
        col[r] = v;
      }
    }
  }

  build(): ColumnarTable {
    const length = this.n;
    const columns = new Map<string, Column>();
    for (const [path, vals] of this.values) {
      const col = toColumn(vals, length);
      if (col !== undefined) columns.set(path, col);
    }
    const objects = this.objects;
    const paths = [...columns.keys()];
    return {
      length,
      column: (path) => columns.get(path),
      hasChildren: (path) => objects.has(path),
      columnPaths: () => paths,
    };
  }
}

function toColumn(vals: unknown[], length: number): Column | undefined {
  let numbers = 0;
  let strings = 0;
  let booleans = 0;
  let others = 0;
  let present = 0;
  for (let r = 0; r < length; r++) {
    const v = orNull(vals[r]);
    if (vals[r] !== undefined) present++;
    if (v === null) continue;
    if (typeof v === "number" && Number.isFinite(v)) numbers++;
    else if (typeof v === "string") strings++;
    else if (typeof v === "boolean") booleans++;
    else others++;
  }
  if (present === 0) return undefined;
  const typed = numbers + strings + booleans;
  if (others === 0 && typed > 0 && (numbers === typed || strings === typed || booleans === typed)) {
    if (numbers > 0) {
      const values = new Float64Array(length).fill(NaN);
      for (let r = 0; r < length; r++) if (typeof vals[r] === "number") values[r] = vals[r] as number;
      return { kind: "number", values };
    }
    if (strings > 0) {
      const codes = new Int32Array(length).fill(-1);
      const dict: string[] = [];
      const index = new Map<string, number>();
      for (let r = 0; r < length; r++) {
        const v = vals[r];
        if (typeof v !== "string") continue;
        let c = index.get(v);
        if (c === undefined) {
          c = dict.length;
          dict.push(v);
          index.set(v, c);
        }
        codes[r] = c;
      }
      return { kind: "string", codes, dict };
    }
    const values = new Int8Array(length).fill(-1);
    for (let r = 0; r < length; r++) if (typeof vals[r] === "boolean") values[r] = vals[r] ? 1 : 0;
    return { kind: "boolean", values };
  }
  // Only nulls, or several kinds: keep the JSON values.
  const values: unknown[] = new Array<unknown>(length);
  for (let r = 0; r < length; r++) values[r] = vals[r];
  return { kind: "mixed", values };
}

/** The instant PQL reads from an event's `timestamp` (as compile.ts's occurs does), NaN when none. */
function eventInstant(ev: Record<string, unknown>): number {
  const v = Object.hasOwn(ev, "timestamp") ? orNull(ev["timestamp"]) : null;
  const t = typeof v === "number" ? (Number.isFinite(v) ? v : null) : toInstant(v);
  return t === null ? NaN : t;
}

/** Build the columnar layout of a list of profiles with their events. */
export function rowColumnarData(rows: readonly RowInput[]): ColumnarData {
  const profiles = new TableBuilder();
  const events = new TableBuilder();
  const profileRows: Record<string, unknown>[] = [];
  const eventRows: Record<string, unknown>[] = [];
  const times: number[] = [];
  const eventStart = new Uint32Array(rows.length + 1);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    profiles.add(row.profile);
    profileRows.push(row.profile);
    eventStart[i] = eventRows.length;
    const evs = (row.events ?? []).map((ev, k) => ({ ev, t: eventInstant(ev), k }));
    // Oldest first; unreadable timestamps last; ties keep input order.
    evs.sort((a, b) => {
      const an = Number.isNaN(a.t);
      const bn = Number.isNaN(b.t);
      if (an || bn) return an === bn ? a.k - b.k : an ? 1 : -1;
      return a.t - b.t || a.k - b.k;
    });
    for (const { ev, t } of evs) {
      events.add(ev);
      eventRows.push(ev);
      times.push(t);
    }
  }
  eventStart[rows.length] = eventRows.length;
  return {
    profiles: profiles.build(),
    events: events.build(),
    eventStart,
    eventTime: Float64Array.from(times),
    profile: (i) => profileRows[i]!,
    event: (r) => eventRows[r]!,
  };
}
