/** Every live profile of a snapshot, as plain values: its rows, events, opt-out flags and identities (tests compare snapshots). */
import type { Column } from "@segmentd/pql";
import type { Snapshot } from "../../src/batch/columnar/snapshot.js";

export function dumpSnapshot(snap: Snapshot): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const { part, masked } of snap.parts()) {
    const data = part.data();
    for (let o = 0; o < part.ordinals; o++) {
      if (masked !== null && masked[o] === 1) continue;
      const rows = [];
      for (let r = part.ordinalStart[o]!; r < part.ordinalStart[o + 1]!; r++) {
        const events = [];
        for (let e = data.eventStart[r]!; e < data.eventStart[r + 1]!; e++) events.push({ body: data.event(e), t: data.eventTime[e] });
        rows.push({ profile: data.profile(r), events, optedOut: part.optedOut[r], identities: part.identitiesOf(r).sort() });
      }
      out.set(part.profileIds[o]!, rows);
    }
  }
  return out;
}

/** A column's values as PQL reads them (null for no value; NaN as null: deepEqual tells no NaN from another); `object` maps the other kinds' values. */
export function columnValues(col: Column | undefined, length: number, object: (v: unknown) => unknown): unknown[] {
  const out: unknown[] = [];
  for (let r = 0; r < length; r++) {
    if (col === undefined) out.push(undefined);
    else if (col.kind === "number") out.push(Number.isNaN(col.values[r]!) ? null : col.values[r]);
    else if (col.kind === "string") out.push(col.codes[r] === -1 ? null : col.dict[col.codes[r]!]);
    else if (col.kind === "boolean") out.push(col.values[r] === -1 ? null : col.values[r] === 1);
    else out.push(object(col.values[r]));
  }
  return out;
}
