/**
 * The engine's output: per definition, the profiles whose membership changes,
 * as typed arrays of numeric profile ids (ProfileStore.applyMembershipSets).
 * At 1M profiles a first job changes ~5M memberships; as MembershipChange
 * objects they held ~1 GB until persisted, as ids they hold 8 bytes each.
 */
import type { MembershipChange, MembershipSet } from "../../profiles/store.js";
import type { MembershipSource } from "../../profiles/types.js";

/** A growable Float64Array. */
class IdList {
  // Empty until the first id: a job's builders per definition and partition are mostly empty.
  private buf = new Float64Array(0);
  length = 0;

  push(id: number): void {
    if (this.length === this.buf.length) {
      const next = new Float64Array(Math.max(256, this.buf.length * 2));
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = id;
  }

  /** Exactly `length` ids (a copy: the spare capacity is released with the builder). */
  finish(): Float64Array {
    return this.buf.slice(0, this.length);
  }
}

/** One definition's changes, collected while its profiles are evaluated. */
export class MembershipSetBuilder {
  /** No stored membership → realized. */
  readonly entered = new IdList();
  /** Stored exited → realized. */
  readonly reentered = new IdList();
  /** Stored realized → exited. */
  readonly exited = new IdList();

  constructor(readonly definitionId: string) {}

  get size(): number {
    return this.entered.length + this.reentered.length + this.exited.length;
  }

  finish(): MembershipSet {
    return { definitionId: this.definitionId, entered: this.entered.finish(), reentered: this.reentered.finish(), exited: this.exited.finish() };
  }
}

export function membershipWrites(sets: readonly MembershipSet[]): number {
  let n = 0;
  for (const s of sets) n += s.entered.length + s.reentered.length + s.exited.length;
  return n;
}

/**
 * The same changes as MembershipChange objects with `from`, set by set and by ascending profile
 * id within a set (the order applyMembershipSets records transitions in): for small callers and
 * tests that compare with applyMembershipChanges.
 */
export function membershipChangesOf(sets: readonly MembershipSet[], at: number, source: MembershipSource = "batch"): MembershipChange[] {
  return sets.flatMap((s) => {
    const rows: MembershipChange[] = [];
    for (const pid of s.entered) rows.push({ profileId: String(pid), definitionId: s.definitionId, status: "realized", source, at, from: null });
    for (const pid of s.reentered) rows.push({ profileId: String(pid), definitionId: s.definitionId, status: "realized", source, at, from: "exited" });
    for (const pid of s.exited) rows.push({ profileId: String(pid), definitionId: s.definitionId, status: "exited", source, at, from: "realized" });
    return rows.sort((a, b) => Number(a.profileId) - Number(b.profileId));
  });
}
