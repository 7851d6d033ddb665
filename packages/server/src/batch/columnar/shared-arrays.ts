/**
 * Typed arrays on SharedArrayBuffer (issue #37): a finished snapshot part keeps its arrays in
 * shared memory, so the evaluation pool's workers (batch/pool/) read the same bytes the main
 * thread reads — a part is described to a worker, never copied to it.
 */

type Typed = Uint8Array | Int8Array | Uint16Array | Uint32Array | Int32Array | Float64Array;
type TypedCtor<T extends Typed> = { new (buffer: SharedArrayBuffer, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number };

/** A zeroed array of `n` elements on its own SharedArrayBuffer. */
export function sharedArray<T extends Typed>(C: TypedCtor<T>, n: number): T {
  return new C(new SharedArrayBuffer(Math.max(1, n) * C.BYTES_PER_ELEMENT), 0, n);
}

/** A copy of `a` (or of its first `n` elements) on shared memory; `a` itself when it already is and fits exactly. */
export function sharedCopy<T extends Typed>(a: T, n: number = a.length): T {
  if (a.buffer instanceof SharedArrayBuffer && n === a.length) return a;
  const C = a.constructor as unknown as TypedCtor<T>;
  const out = sharedArray(C, n);
  out.set(a.subarray(0, n) as never);
  return out;
}

/** True when every byte of `a` lives on shared memory. */
export function isShared(a: Typed): boolean {
  return a.buffer instanceof SharedArrayBuffer;
}
