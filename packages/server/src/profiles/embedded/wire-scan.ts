// A scan chunk (scanProfiles) as the embedded store's worker thread replies it (store-worker.ts
// wires, worker-store.ts unwires).
//
// Why: a chunk's events are most of what a snapshot build reads (10M against 1M profiles). Cloned
// as objects, every event's parsed body crossed the thread property by property and the whole
// build through the worker took 202 s and 304 s of CPU against 162 s in one thread (bench:batch
// --build-only, 1M/10M). As their stored JSON text (with its ids, UTF-8 bytes in one array) an
// event is a few bytes to copy and one JSON.parse on the caller's thread, so the worker reads the
// next chunk while the caller parses and builds this one. The worker checks such a text without parsing it (servableText); one that
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
  timestamps: Float64Array;
  /**
   * Per event five texts as UTF-8, one after another — dataset id, event id, namespace, identity
   * value, the body's JSON — text t ending at ends[t]. Bytes, not strings: a reply over 100 KB is
   * deserialized straight into the old generation, so a chunk's texts as strings were garbage
   * only a full collection frees (~1 GB of heap between two of them in a 1M-profile build, peak
   * RSS 4.0 GB); decoded on the caller's thread, each text dies young.
   */
  bytes: Uint8Array;
  ends: Uint32Array;
}

const TEXTS_PER_EVENT = 5;

export function wireScan(chunk: readonly ScannedProfile[]): WireScan {
  let n = 0;
  for (const p of chunk) n += p.events.length;
  const counts = new Uint32Array(chunk.length);
  const texts = new Array<string>(n * TEXTS_PER_EVENT);
  const timestamps = new Float64Array(n);
  const profiles: WireScan["profiles"] = new Array(chunk.length);
  let k = 0;
  for (let i = 0; i < chunk.length; i++) {
    const { events, ...rest } = chunk[i]!;
    profiles[i] = rest;
    counts[i] = events.length;
    for (const e of events as readonly TextedEvent[]) {
      const t = TEXTS_PER_EVENT * k;
      texts[t] = e.datasetId;
      texts[t + 1] = e.eventId;
      texts[t + 2] = e.primary.namespace;
      texts[t + 3] = e.primary.id;
      texts[t + 4] = e[EVENT_TEXT] ?? JSON.stringify(e.body);
      timestamps[k] = e.timestamp;
      k++;
    }
  }
  const ends = new Uint32Array(texts.length);
  let size = 0;
  for (let t = 0; t < texts.length; t++) ends[t] = size += Buffer.byteLength(texts[t]!, "utf8");
  const bytes = Buffer.allocUnsafeSlow(size);
  for (let t = 0, at = 0; t < texts.length; t++) at += bytes.write(texts[t]!, at, "utf8");
  return { profiles, counts, timestamps, bytes, ends };
}

export function unwireScan(w: WireScan): { profiles: ScannedProfile[]; unreadable: UnreadableEvent[] } {
  const out = new Array<ScannedProfile>(w.profiles.length);
  const unreadable: UnreadableEvent[] = [];
  const bytes = Buffer.from(w.bytes.buffer, w.bytes.byteOffset, w.bytes.byteLength);
  const ends = w.ends;
  const text = (t: number) => bytes.toString("utf8", t === 0 ? 0 : ends[t - 1]!, ends[t]!);
  let k = 0;
  for (let i = 0; i < out.length; i++) {
    const n = w.counts[i]!;
    const events: StoredEvent[] = [];
    for (let j = 0; j < n; j++, k++) {
      const t = TEXTS_PER_EVENT * k;
      const datasetId = text(t);
      const eventId = text(t + 1);
      const primary = { namespace: text(t + 2), id: text(t + 3) };
      const bodyText = text(t + 4);
      let body: StoredEvent["body"];
      try {
        body = JSON.parse(bodyText) as StoredEvent["body"];
      } catch {
        unreadable.push({ pid: Number(w.profiles[i]!.profileId), datasetId, eventId, primary, text: bodyText });
        continue;
      }
      events.push({ datasetId, eventId, primary, timestamp: w.timestamps[k]!, body });
    }
    out[i] = { ...w.profiles[i]!, events } as ScannedProfile;
  }
  return { profiles: out, unreadable };
}
