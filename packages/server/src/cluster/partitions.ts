/**
 * Profile-keyed partitions (#25's streaming workers): a profile's stored changes all go to one of
 * N partitions, chosen from its key by FNV-1a-32 modulo N — the hash nats-server's own subject
 * mapping uses (`{{partition(N, k)}}`), so segmentd and a server mapping agree on every key
 * (test/cluster/partitions.cluster.test.ts checks it against a real server). N is fixed for a
 * deployment: changing it moves profiles between partitions.
 */
import { token } from "./subjects.js";

export const DEFAULT_PARTITIONS = 64;

/** FNV-1a, 32 bits, over the UTF-8 bytes of `s`. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, "utf8")) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The partition of a subject token (as the server maps it). */
export function partitionOfToken(t: string, partitions: number): number {
  if (!Number.isSafeInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${partitions}`);
  return fnv1a32(t) % partitions;
}

/** A profile's key as a subject token: its sandbox and its hub profile id. */
export function profileToken(sandboxId: string, profileId: string): string {
  return token(`${sandboxId}/${profileId}`);
}

/** The partition of a profile. */
export function partitionOf(sandboxId: string, profileId: string, partitions: number): number {
  return partitionOfToken(profileToken(sandboxId, profileId), partitions);
}

/** The subject a profile's change is published on: partition first, so a consumer filters one. */
export function partitionSubject(partition: number, profileTokenValue: string): string {
  return `segmentd.pev.${partition}.${profileTokenValue}`;
}

/**
 * partitionOf for many profiles of one sandbox (a shard's listing splits a million ids): the hash
 * of the sandbox's token prefix is taken once, and an id whose characters a token keeps as they
 * are (`[A-Za-z0-9_-]`: the stores' numeric ids) continues it over its char codes, without the
 * token string or a Buffer per id. Any other id goes through partitionOf.
 */
export function partitionFunction(sandboxId: string, partitions: number): (profileId: string) => number {
  if (!Number.isSafeInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${partitions}`);
  // The token of `${sandboxId}/${id}` is the token of `${sandboxId}/` followed by the id's (the escape is per byte).
  const prefix = fnv1a32(token(`${sandboxId}/`));
  return (profileId: string) => {
    if (profileId === "") return partitionOf(sandboxId, profileId, partitions);
    let h = prefix;
    for (let i = 0; i < profileId.length; i++) {
      const c = profileId.charCodeAt(i);
      const kept = (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 45;
      if (!kept) return partitionOf(sandboxId, profileId, partitions);
      h ^= c;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h % partitions;
  };
}
