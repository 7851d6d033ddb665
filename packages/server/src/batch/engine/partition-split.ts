/**
 * A job's outcome split by profile-keyed partition (issue #44: a worker writes and reports each
 * partition it holds on its own, so that a partition whose owner dies mid-job is evaluated by its
 * next owner alone). Both engines tally into it beside their totals when asked (`split`).
 */
import type { MembershipSet } from "../../profiles/store.js";
import type { SnapshotPart } from "../columnar/snapshot.js";
import { emptyCounters, type DefinitionCounters, type EvaluationSplit, type PartitionOutcome } from "./evaluation-types.js";
import { MembershipSetBuilder } from "./membership-output.js";

export class PartitionTally {
  /** Partition → its slot, -1 for a partition not asked for. */
  private readonly slotOf: Int32Array;
  private readonly counters = new Map<string, DefinitionCounters[]>();
  private readonly builders = new Map<string, Array<MembershipSetBuilder | undefined>>();
  private readonly slotsByPart = new Map<SnapshotPart, Int32Array>();
  /** Profiles per slot of the largest scan counted (countScan). */
  private profiles: Int32Array;
  /** Entries per slot, per merge policy id (countEntries). */
  private readonly entries = new Map<string, Int32Array>();

  constructor(private readonly split: EvaluationSplit) {
    let max = -1;
    for (const p of split.partitions) max = Math.max(max, p);
    this.slotOf = new Int32Array(max + 1).fill(-1);
    split.partitions.forEach((p, slot) => (this.slotOf[p] = slot));
    this.profiles = new Int32Array(split.partitions.length);
  }

  /** A scan's profiles per slot; the largest scan's are the partitions' `profiles`. */
  countScan(perSlot: Int32Array): void {
    let a = 0;
    let b = 0;
    for (const n of perSlot) a += n;
    for (const n of this.profiles) b += n;
    if (a > b) this.profiles = perSlot;
  }

  /** A merge policy's entries per slot (what `profilesByPolicy` counts). */
  countEntries(policyId: string, perSlot: Int32Array): void {
    this.entries.set(policyId, perSlot);
  }

  /** A snapshot's entries (rows) of live profiles per slot. */
  snapshotEntries(parts: ReadonlyArray<{ part: SnapshotPart; masked: Uint8Array | null }>): Int32Array {
    const out = new Int32Array(this.split.partitions.length);
    for (const { part, masked } of parts) {
      const slots = this.slotsOfPart(part);
      const { ordinalStart } = part;
      for (let o = 0; o < slots.length; o++) if (masked === null || masked[o] === 0) out[this.check(slots[o]!, part, o)]! += ordinalStart[o + 1]! - ordinalStart[o]!;
    }
    return out;
  }

  /** A snapshot's live profiles per slot. */
  snapshotProfiles(parts: ReadonlyArray<{ part: SnapshotPart; masked: Uint8Array | null }>): Int32Array {
    const out = new Int32Array(this.split.partitions.length);
    for (const { part, masked } of parts) {
      const slots = this.slotsOfPart(part);
      for (let o = 0; o < slots.length; o++) if (masked === null || masked[o] === 0) out[this.check(slots[o]!, part, o)]!++;
    }
    return out;
  }

  /** The slot of a profile's partition; a profile of a partition not asked for is a caller's error. */
  slot(profileId: string): number {
    return this.slotOfPartition(this.split.of(profileId), profileId);
  }

  private slotOfPartition(p: number, profileId: string): number {
    const s = p < this.slotOf.length ? this.slotOf[p]! : -1;
    if (s < 0) throw new Error(`profile ${profileId} is in partition ${p}, which this evaluation does not hold`);
    return s;
  }

  /**
   * The slot of each ordinal of a snapshot part (the partitions kept with the part: a base part
   * serves many jobs), -1 for a partition not asked for — a masked profile's, of a partition that
   * moved away; `check` one before counting it.
   */
  slotsOfPart(part: SnapshotPart): Int32Array {
    const known = this.slotsByPart.get(part);
    if (known !== undefined) return known;
    let cached = PART_PARTITIONS.get(part);
    if (cached?.of !== this.split.of) {
      const partitions = new Int32Array(part.ordinals);
      for (let o = 0; o < partitions.length; o++) partitions[o] = this.split.of(part.profileIds[o]!);
      cached = { of: this.split.of, partitions };
      PART_PARTITIONS.set(part, cached);
    }
    const slots = new Int32Array(cached.partitions.length);
    const { slotOf } = this;
    for (let o = 0; o < slots.length; o++) {
      const p = cached.partitions[o]!;
      slots[o] = p < slotOf.length ? slotOf[p]! : -1;
    }
    // Once per part and evaluation: every definition's pass over the part reads them.
    this.slotsByPart.set(part, slots);
    return slots;
  }

  /** A profile's slot from slotsOfPart, refused when it is not one asked for. */
  check(slot: number, part: SnapshotPart, ordinal: number): number {
    return slot >= 0 ? slot : this.slot(part.profileIds[ordinal]!);
  }

  /** A definition's counters, one per slot. */
  countersOf(definitionId: string): DefinitionCounters[] {
    let row = this.counters.get(definitionId);
    if (row === undefined) this.counters.set(definitionId, (row = this.split.partitions.map(emptyCounters)));
    return row;
  }

  /** A definition's changes in a slot. */
  builder(definitionId: string, slot: number): MembershipSetBuilder {
    let row = this.builders.get(definitionId);
    if (row === undefined) this.builders.set(definitionId, (row = new Array<MembershipSetBuilder | undefined>(this.split.partitions.length)));
    return (row[slot] ??= new MembershipSetBuilder(definitionId));
  }

  /** Per partition asked for (in the order asked), its memberships and counters. */
  finish(definitionIds: readonly string[]): Map<number, PartitionOutcome> {
    const out = new Map<number, PartitionOutcome>();
    this.split.partitions.forEach((p, slot) => {
      const memberships: MembershipSet[] = [];
      const counters = new Map<string, DefinitionCounters>();
      for (const id of definitionIds) {
        counters.set(id, this.countersOf(id)[slot]!);
        const b = this.builders.get(id)?.[slot];
        if (b !== undefined && b.size > 0) memberships.push(b.finish());
      }
      const profilesByPolicy: Record<string, number> = {};
      for (const [policy, perSlot] of this.entries) profilesByPolicy[policy] = perSlot[slot]!;
      out.set(p, { memberships, counters, profiles: this.profiles[slot]!, profilesByPolicy });
    });
    return out;
  }
}

/** Each part's partitions by ordinal, for the function that computed them. */
const PART_PARTITIONS = new WeakMap<SnapshotPart, { of: (profileId: string) => number; partitions: Int32Array }>();
