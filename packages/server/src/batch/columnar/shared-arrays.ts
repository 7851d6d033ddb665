/**
 * Typed arrays on SharedArrayBuffer (issue #37): a finished snapshot part keeps its arrays in
 * shared memory, so the evaluation pool's workers (batch/pool/) read the same bytes the main
 * thread reads — a part is described to a worker, never copied to it.
 */

export type Typed = Uint8Array | Int8Array | Uint16Array | Uint32Array | Int32Array | Float64Array;
export type TypedCtor<T extends Typed> = { new (buffer: SharedArrayBuffer, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number };

/** A zeroed array of `n` elements on its own SharedArrayBuffer. */
export function sharedArray<T extends Typed>(C: TypedCtor<T>, n: number): T {
  return new C(new SharedArrayBuffer(Math.max(1, n) * C.BYTES_PER_ELEMENT), 0, n);
}

/** Builders' arrays this large grow on a growable SharedArrayBuffer (smaller ones double as plain arrays). */
const GROW_IN_PLACE_BYTES = 1 << 20;
/** Address space reserved per growable buffer: never resident until written (V8 allows at most 4 GiB). */
const MAX_GROWABLE_BYTES = 2 ** 32;

/** ES2024's growable SharedArrayBuffer (Node 20 has it; the TypeScript lib here predates it). */
interface GrowableBuffer extends SharedArrayBuffer {
  readonly growable: boolean;
  readonly maxByteLength: number;
  grow(byteLength: number): void;
}
const Growable = SharedArrayBuffer as unknown as new (byteLength: number, o: { maxByteLength: number }) => GrowableBuffer;

function growable(b: ArrayBufferLike): b is GrowableBuffer {
  return b instanceof SharedArrayBuffer && (b as GrowableBuffer).growable;
}

/** True when `a` grew in place (growShared): it can grow again, and finishing it copies nothing. */
export function isGrowable(a: Typed): boolean {
  return growable(a.buffer);
}

/**
 * `a` with room for at least `need` elements (its contents kept). A large array lives on a
 * growable SharedArrayBuffer and grows in place: no second array and no copy while a builder
 * grows, and `sharedCopy` then finishes it as a view (a 1M-profile snapshot's columns were
 * copied twice over — on every doubling and again onto shared memory).
 */
export function growShared<T extends Typed>(a: T, need: number): T {
  if (need <= a.length) return a;
  const C = a.constructor as unknown as TypedCtor<T>;
  const bpe = C.BYTES_PER_ELEMENT;
  let cap = Math.max(64, a.length * 2);
  while (cap < need) cap *= 2;
  const buffer = a.buffer;
  if (growable(buffer) && a.byteOffset === 0 && cap * bpe <= buffer.maxByteLength) {
    if (cap * bpe > buffer.byteLength) buffer.grow(cap * bpe);
    return new C(buffer, 0, cap);
  }
  let out: T;
  if (cap * bpe >= GROW_IN_PLACE_BYTES && need * bpe <= MAX_GROWABLE_BYTES) {
    cap = Math.min(cap, Math.floor(MAX_GROWABLE_BYTES / bpe));
    const b = new Growable(cap * bpe, { maxByteLength: MAX_GROWABLE_BYTES });
    out = new C(b, 0, cap);
  } else out = new (a.constructor as unknown as new (n: number) => T)(cap);
  out.set(a as never);
  return out;
}

/** A copy of `a` (or of its first `n` elements) on shared memory; `a` itself when it already is and fits exactly, a view when it grew in place. */
export function sharedCopy<T extends Typed>(a: T, n: number = a.length): T {
  if (a.buffer instanceof SharedArrayBuffer && n === a.length) return a;
  if (growable(a.buffer) && n <= a.length) return a.subarray(0, n) as T;
  const C = a.constructor as unknown as TypedCtor<T>;
  const out = sharedArray(C, n);
  out.set(a.subarray(0, n) as never);
  return out;
}

/** True when every byte of `a` lives on shared memory. */
export function isShared(a: Typed): boolean {
  return a.buffer instanceof SharedArrayBuffer;
}
