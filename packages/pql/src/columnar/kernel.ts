/**
 * Fused per-event loops, generated with `new Function`. An event aggregate
 * evaluated node by node makes one pass over all events per leaf, one per
 * and/or, and one to reduce; generated code makes ONE pass that reads each
 * leaf's column at row r and reduces at once (stack-notes §8: typed arrays +
 * generated code). Leaves that need per-row work an expression cannot hold are
 * precomputed into a byte buffer first and read back as `B[r]`.
 *
 * Generated source holds no text from the query: only numbers printed by
 * `lit` and references `X<k>` to values passed in. Compiled functions are
 * cached by source, so repeated runs compile nothing.
 */
/** A prepared leaf loop: writes rows [lo, hi) of out. */
export type Filler = (lo: number, hi: number, out: Uint8Array) => void;

export class KernelBuilder {
  readonly externals: unknown[] = [];
  /** Leaves computed into buffers before the fused loop: fill over the rows the loop reads. */
  readonly prefills: { fill: Filler; buf: Uint8Array }[] = [];

  /** A value passed to the generated code; returns the name it has there. */
  ext(v: unknown): string {
    this.externals.push(v);
    return `X${this.externals.length - 1}`;
  }

  lit(n: number): string {
    if (Number.isNaN(n)) return "NaN";
    if (n === Infinity) return "Infinity";
    if (n === -Infinity) return "-Infinity";
    return Object.is(n, -0) ? "-0" : String(n);
  }

  /** A precomputed leaf: `fill` into `buf`, read back per row. */
  buffered(fill: Filler, buf: Uint8Array): string {
    this.prefills.push({ fill, buf });
    return `${this.ext(buf)}[r]`;
  }
}

const cache = new Map<string, (externals: unknown[]) => unknown>();

/** Compile `body` (which may use X0…Xn) into a function of `params`; null when code generation is unavailable. */
export function generateKernel<F>(k: KernelBuilder, params: string, body: string): F | null {
  const names = k.externals.map((_, i) => `X${i} = E[${i}]`);
  const src = `"use strict";\n${names.length ? `const ${names.join(", ")};\n` : ""}return function kernel(${params}) {\n${body}\n};`;
  let factory = cache.get(src);
  if (factory === undefined) {
    try {
      factory = new Function("E", src) as (externals: unknown[]) => unknown;
    } catch {
      return null;
    }
    if (cache.size > 1000) cache.clear();
    cache.set(src, factory);
  }
  return factory(k.externals) as F;
}
