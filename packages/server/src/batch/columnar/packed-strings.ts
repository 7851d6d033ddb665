/**
 * Packed string lists for the columnar tables (table.ts): the texts of a column whose values are
 * mostly distinct.
 */
import { growShared, sharedCopy } from "./shared-arrays.js";

/** A character above U+00FF (a UTF-16 unit no Latin-1 byte holds). */
export const WIDE = /[\u0100-\uffff]/;

/**
 * A list of mostly distinct strings (events' `_id`, order ids) packed as Latin-1 bytes with end
 * offsets: about one byte a character plus four, where a V8 string costs its characters plus a
 * 16-byte header plus an 8-byte slot (10M `_id`s: ~180 MB instead of ~400 MB). Strings with a
 * character above U+00FF are kept aside as they are.
 */
export class PackedStrings {
  private bytes: Uint8Array = new Uint8Array(1 << 16);
  private ends: Uint32Array = new Uint32Array(1024);
  private used = 0;
  private readonly wide = new Map<number, string>();
  private view: Buffer | null = null;
  /** `bytes` as a Buffer, for writing (made again when `bytes` is). */
  private writer: Buffer | null = null;
  length = 0;

  push(s: string): number {
    const i = this.length++;
    if (i >= this.ends.length) this.ends = growShared(this.ends, i + 1);
    const n = s.length;
    // Grown in place once large (growShared): trim() then copies nothing.
    if (this.used + n > this.bytes.length) this.bytes = growShared(this.bytes, this.used + n);
    const at = this.used;
    if (!WIDE.test(s) && at + n <= 0xffff_ffff) {
      // Every character fits a byte: written natively (a JS loop over the characters cost more than a dictionary insert).
      if (n > 0) {
        if (this.writer === null || this.writer.buffer !== this.bytes.buffer || this.writer.length !== this.bytes.length) this.writer = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.length);
        this.writer.write(s, at, n, "latin1");
      }
      this.used += n;
    } else this.wide.set(i, s);
    this.ends[i] = this.used;
    this.view = null;
    return i;
  }

  at(i: number): string {
    if (this.wide.size > 0) {
      const w = this.wide.get(i);
      if (w !== undefined) return w;
    }
    const start = i === 0 ? 0 : this.ends[i - 1]!;
    const end = this.ends[i]!;
    if (this.view === null) this.view = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.used);
    return this.view.toString("latin1", start, end);
  }

  /** What the snapshot file keeps (snapshot-file.ts): the used bytes, the ends, the wide strings. */
  contents(): { bytes: Uint8Array; ends: Uint32Array; length: number; wide: ReadonlyMap<number, string> } {
    return { bytes: this.bytes.subarray(0, this.used), ends: this.ends.subarray(0, Math.max(1, this.length)), length: this.length, wide: this.wide };
  }

  /** A list read back from a snapshot file (views on its buffer, not copied). */
  static from(c: { bytes: Uint8Array; ends: Uint32Array; length: number; wide: ReadonlyMap<number, string> }): PackedStrings {
    const p = new PackedStrings();
    p.bytes = c.bytes;
    p.ends = c.ends;
    p.used = c.bytes.length;
    p.length = c.length;
    for (const [i, s] of c.wide) p.wide.set(i, s);
    return p;
  }

  /** Drops the spare capacity (no more pushes expected; they still work). */
  trim(): this {
    // On shared memory: the evaluation pool's workers read the list in place.
    this.bytes = sharedCopy(this.bytes, this.used);
    this.ends = sharedCopy(this.ends, Math.max(1, this.length));
    this.view = null;
    return this;
  }
}

/** Texts of a column: a plain list, or packed (mostly distinct strings). */
export type Texts = readonly string[] | PackedStrings;

export function textAt(texts: Texts, i: number): string {
  return texts instanceof PackedStrings ? texts.at(i) : texts[i]!;
}
