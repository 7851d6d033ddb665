// A scan chunk (scanProfiles) as the embedded store's worker thread replies it (store-worker.ts
// wires, worker-store.ts unwires).
//
// Why: a chunk's events are most of what a snapshot build reads (10M against 1M profiles). Cloned
// as objects, every event's parsed body crossed the thread property by property and the whole
// build through the worker took 202 s and 304 s of CPU against 162 s in one thread (bench:batch
// --build-only, 1M/10M). As their stored JSON text an event is a few strings to copy and one
// JSON.parse on the caller's thread, so the worker reads the next chunk while the caller parses
// and builds this one. The worker checks such a text without parsing it (servableText); one that
// then fails to parse comes back to the worker (UnreadableEvent) to be quarantined as any read
// would quarantine it, and is skipped (under identityGraph none, an identity known only from such
// an event then remains as an entry without events, where a direct read has no entry).
import { RECORD_LIMITS, textNestsDeeperThan } from "../../platform/limits.js";
import { lazyBodyFrom } from "../lazy-body.js";
import type { ScannedProfile } from "../store.js";
import type { Identity, StoredEvent } from "../types.js";

/**
 * Where a scanned event keeps the stored text its body was parsed from, when the scan was asked
 * for it (readGraphs' `texts`): a symbol, so that the event's own enumerable shape is unchanged.
 */
export const EVENT_TEXT: unique symbol = Symbol("segmentd.eventText");

/** A scanned event with the text of its body (the worker's scans). */
export type TextedEvent = StoredEvent & { [EVENT_TEXT]?: string };

/**
 * A stored text servable as far as a text shows: an object (the store writes JSON.stringify's
 * output, `{` to `}`) nested within the limit. Whether it parses is left to the caller, who parses
 * it anyway.
 */
export function servableText(text: string): boolean {
  return text.charCodeAt(0) === 123 && text.charCodeAt(text.length - 1) === 125 && !textNestsDeeperThan(text, RECORD_LIMITS.maxDepth);
}

/** `body` parsed from the event's text if something in the worker reads it (the wire sends the text). */
const TEXT_BODY = lazyBodyFrom(EVENT_TEXT);

export function textedEvent(datasetId: string, eventId: string, primary: Identity, timestamp: number, text: string): TextedEvent {
  return Object.defineProperty({ datasetId, eventId, primary, timestamp, [EVENT_TEXT]: text }, "body", TEXT_BODY) as TextedEvent;
}

/** An event whose text did not parse on the caller's side: sent back for the worker's quarantine. */
export interface UnreadableEvent {
  pid: number;
  datasetId: string;
  eventId: string;
  primary: Identity;
  text: string;
}

/** The profiles without their events, then every event of the chunk in flat arrays (profile by profile). */
export interface WireScan {
  profiles: Array<Omit<ScannedProfile, "events">>;
  /** Events per profile. */
  counts: Uint32Array;
  /** Per event: dataset id, event id, namespace, identity value. */
  strings: string[];
  timestamps: Float64Array;
  /** Per event: the body's JSON text. */
  bodies: string[];
}

export function wireScan(chunk: readonly ScannedProfile[]): WireScan {
  let n = 0;
  for (const p of chunk) n += p.events.length;
  const counts = new Uint32Array(chunk.length);
  const strings = new Array<string>(n * 4);
  const timestamps = new Float64Array(n);
  const bodies = new Array<string>(n);
  const profiles: WireScan["profiles"] = new Array(chunk.length);
  let k = 0;
  for (let i = 0; i < chunk.length; i++) {
    const { events, ...rest } = chunk[i]!;
    profiles[i] = rest;
    counts[i] = events.length;
    for (const e of events as readonly TextedEvent[]) {
      strings[4 * k] = e.datasetId;
      strings[4 * k + 1] = e.eventId;
      strings[4 * k + 2] = e.primary.namespace;
      strings[4 * k + 3] = e.primary.id;
      timestamps[k] = e.timestamp;
      bodies[k] = e[EVENT_TEXT] ?? JSON.stringify(e.body);
      k++;
    }
  }
  return { profiles, counts, strings, timestamps, bodies };
}

export function unwireScan(w: WireScan): { profiles: ScannedProfile[]; unreadable: UnreadableEvent[] } {
  const out = new Array<ScannedProfile>(w.profiles.length);
  const unreadable: UnreadableEvent[] = [];
  let k = 0;
  for (let i = 0; i < out.length; i++) {
    const n = w.counts[i]!;
    const events: StoredEvent[] = [];
    for (let j = 0; j < n; j++, k++) {
      const primary = { namespace: w.strings[4 * k + 2]!, id: w.strings[4 * k + 3]! };
      let body: StoredEvent["body"];
      try {
        body = JSON.parse(w.bodies[k]!) as StoredEvent["body"];
      } catch {
        unreadable.push({ pid: Number(w.profiles[i]!.profileId), datasetId: w.strings[4 * k]!, eventId: w.strings[4 * k + 1]!, primary, text: w.bodies[k]! });
        continue;
      }
      events.push({ datasetId: w.strings[4 * k]!, eventId: w.strings[4 * k + 1]!, primary, timestamp: w.timestamps[k]!, body });
    }
    out[i] = { ...w.profiles[i]!, events } as ScannedProfile;
  }
  return { profiles: out, unreadable };
}
