/**
 * What a hub with streaming workers publishes to the profile-keyed partitions (#25), one JSON
 * message per change, on `segmentd.pev.<partition>.<profile token>` of the stream SEGMENTD_PEV:
 *
 *   r  a stored record of a profile (streamed, or forwarded from an edge site)
 *   c  a profile changed in a way no record describes (data lifecycle deletes and updates)
 *   d  the sandbox's definitions or merge policies changed (to every partition)
 *   t  a tick of the hub's clock (to every partition): the sweep closes the windows due by then
 *   v  a backfill is about to take its fence (issue #40, to every partition): the worker's catalog
 *      takes the definition's current version before it applies anything after this message
 *   b  a chunk of a backfill's net change for the partition's profiles (the worker's side is
 *      partition-backfill-apply.ts): in band, so it is applied in order with the events
 *
 * Every message carries `at`, the hub's time when it stored the change, and (but `d`) `w`, the
 * mark of the events its store held then (ProfileReads.eventsStoredThrough): a worker evaluates
 * at that time and loads a profile's events as they were at that mark, not as they are when it
 * reads (the hub has usually stored later ones). So its result does not depend on how far behind
 * it reads, and a partition read again after a crash is evaluated exactly as the first time.
 */
import type { StoredRecord } from "../streaming/engine.js";

export const PARTITION_STREAM = "SEGMENTD_PEV";
export const PARTITION_SUBJECTS = "segmentd.pev.>";
/** How the stream's description records the partition count (fixed for a deployment). */
export const PARTITIONS_DESCRIPTION = "segmentd_partitions";
/** The subject token of messages to a whole partition (a profile's token always holds `~2f`). */
export const PARTITION_WIDE = "_all";

export function partitionFilter(partition: number): string {
  return `segmentd.pev.${partition}.>`;
}

/** The name of a partition's position in the profile store (PartitionWrites). */
export function partitionName(partition: number): string {
  return `pev.${partition}`;
}

interface Tenanted {
  /** Organization id and sandbox name. */
  o: string;
  n: string;
  at: number;
}

export type PartitionMessage =
  | (Tenanted & { k: "r"; w: number; p: string; kind: StoredRecord["kind"]; ns: string; id: string; ts: number | null; eid: string | null; body: string })
  | (Tenanted & { k: "c"; w: number; p: string })
  | (Tenanted & { k: "d" })
  | { k: "t"; w: number; at: number }
  | (Tenanted & { k: "v"; w: number; def: string; v: number })
  | (Tenanted & BackfillChunk & { k: "b"; w: number });

/**
 * A chunk of a backfill's net change (cluster/partition-backfill.ts). `ch`: [profile id, 1 realized
 * or 0 exited] as the snapshot decided them; `last`: the partition's last chunk of the run — after
 * it the worker decides the profiles changed after the fence that no chunk named.
 */
export interface BackfillChunk {
  /** The run (a backfill run again is another run). */
  run: string;
  def: string;
  /** The definition version evaluated (its updateTime): a chunk of another version is skipped. */
  v: number;
  /** The fence: the hub's change-log version the snapshot read through. */
  f: number;
  /** The chunk's index within its partition. */
  i: number;
  ch: Array<[string, 0 | 1]>;
  last: boolean;
}

export function encodePartitionMessage(m: PartitionMessage): Uint8Array {
  return Buffer.from(JSON.stringify(m), "utf8");
}

/** Null for anything that is not a message this version understands (skipped, never fatal). */
export function decodePartitionMessage(data: Uint8Array): PartitionMessage | null {
  let m: unknown;
  try {
    m = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8"));
  } catch {
    return null;
  }
  if (typeof m !== "object" || m === null) return null;
  const x = m as Record<string, unknown>;
  if (typeof x["at"] !== "number") return null;
  if (x["k"] !== "d" && typeof x["w"] !== "number") return null;
  if (x["k"] === "t") return m as PartitionMessage;
  if (typeof x["o"] !== "string" || typeof x["n"] !== "string") return null;
  if (x["k"] === "d") return m as PartitionMessage;
  if (x["k"] === "v") return typeof x["def"] === "string" && typeof x["v"] === "number" ? (m as PartitionMessage) : null;
  if (x["k"] === "b") {
    const ok = typeof x["run"] === "string" && typeof x["def"] === "string" && typeof x["v"] === "number" && typeof x["f"] === "number" && typeof x["i"] === "number" && typeof x["last"] === "boolean" && Array.isArray(x["ch"]);
    return ok ? (m as PartitionMessage) : null;
  }
  if (typeof x["p"] !== "string") return null;
  if (x["k"] === "c") return m as PartitionMessage;
  if (x["k"] !== "r" || typeof x["ns"] !== "string" || typeof x["id"] !== "string" || typeof x["body"] !== "string") return null;
  if (x["kind"] !== "profile" && x["kind"] !== "experienceevent") return null;
  return m as PartitionMessage;
}

/** The record of an `r` message as the streaming engine takes it. */
export function storedRecordOf(m: Extract<PartitionMessage, { k: "r" }>): StoredRecord {
  return { kind: m.kind, primary: { namespace: m.ns, id: m.id }, body: JSON.parse(m.body) as StoredRecord["body"], timestamp: m.ts, eventId: m.eid, json: m.body };
}
