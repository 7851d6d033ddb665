/**
 * The profile-level plan of a columnar query: a tree of boolean nodes, each
 * computing one 0/1 byte per profile. Every operand of and/or/not is a
 * boolean position (pql.md §6.4), so the values combine as plain booleans and
 * the tree can be evaluated node by node over whole columns.
 *
 * `cand` (candidates) carries short-circuiting across the tree: a node must be
 * exact for the profiles with cand[i] = 1 (all when cand is null) and write 0
 * for the others. Columnar leaves ignore it (a full column pass is cheaper than
 * testing it); row-fallback nodes use it to evaluate only the survivors of the
 * conjuncts before them.
 */
import { walk, type Expr, type Query } from "../ast.js";
import { compile } from "../compile.js";
import { toBoolean } from "../runtime/values.js";
import { pathAccess, type PathAccess } from "./access.js";
import type { ColumnarData, ColumnarTable } from "./layout.js";
import type { ValueLeaf } from "./value-leaf.js";
import { generateKernel, KernelBuilder } from "./kernel.js";

/** Free event-sized buffers (runs are synchronous: a buffer is never in two runs at once). */
const POOL: Uint8Array[] = [];
const POOL_MAX = 4;

/** Per-run state: the data and caches valid for this data only. */
export class RunContext {
  private readonly access = new Map<ColumnarTable, Map<string, PathAccess>>();

  private readonly buffers = new Map<object, Uint8Array>();

  constructor(
    readonly data: ColumnarData,
    readonly now: number,
    /** May fused loops be generated (kernel.ts)? */
    readonly codegen: boolean,
  ) {}

  get size(): number {
    return this.data.profiles.length;
  }

  /** Column access of a path, resolved once per run. */
  pathAccess(table: ColumnarTable, path: readonly string[]): PathAccess {
    let m = this.access.get(table);
    if (m === undefined) this.access.set(table, (m = new Map()));
    const key = path.join(".");
    let a = m.get(key);
    if (a === undefined) m.set(key, (a = pathAccess(table, path)));
    return a;
  }

  /**
   * A per-event byte buffer owned by `owner` for this run. Not zeroed: owners
   * write every byte they later read. Buffers are event-sized (10M events:
   * 10 MB), so they are borrowed from a small pool shared by all queries and
   * given back by `release` when the run ends, never kept by a compiled query.
   */
  eventScratch(owner: object): Uint8Array {
    let b = this.buffers.get(owner);
    if (b === undefined) {
      const size = Math.max(this.data.events.length, this.data.eventStart[this.size] ?? 0);
      const k = POOL.findIndex((x) => x.length === size);
      b = k >= 0 ? POOL.splice(k, 1)[0]! : new Uint8Array(size);
      this.buffers.set(owner, b);
    }
    return b;
  }

  /** Give this run's event buffers back to the pool. */
  release(): void {
    for (const b of this.buffers.values()) POOL.push(b);
    this.buffers.clear();
    // A few buffers cover the usual plans; more would only hold memory.
    if (POOL.length > POOL_MAX) POOL.splice(0, POOL.length - POOL_MAX);
  }

  /** The events of profile i as plain objects, in the layout's order. */
  events(i: number): Record<string, unknown>[] {
    const { eventStart } = this.data;
    const out: Record<string, unknown>[] = [];
    for (let r = eventStart[i]!; r < eventStart[i + 1]!; r++) out.push(this.data.event(r));
    return out;
  }
}

export interface ProfileNode {
  /** True when no part of the node evaluates row objects by design (data may still force a few rows). */
  readonly columnar: boolean;
  /** Why not columnar (the first construct that is not). */
  readonly reason?: string;
  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void;
  /** The node as a JS expression of profile row `r` (0/1) for one fused loop, or null (kernel.ts). */
  kernel?(run: RunContext, k: KernelBuilder): string | null;
}

/**
 * Evaluate `node` as one generated loop over the profiles when every part of
 * it has a kernel for this data; false when not (the caller evaluates node by node).
 */
function fusedEval(node: ProfileNode, run: RunContext, cand: Uint8Array | null, out: Uint8Array): boolean {
  if (!run.codegen) return false;
  const k = new KernelBuilder();
  const expr = node.kernel?.(run, k) ?? null;
  if (expr === null || k.prefills.length > 0) return false;
  const f = generateKernel<(n: number, cand: Uint8Array | null, out: Uint8Array) => void>(
    k,
    "n, cand, out",
    `if (cand === null) for (let r = 0; r < n; r++) out[r] = ${expr};
  else for (let r = 0; r < n; r++) out[r] = cand[r] & ${expr};`,
  );
  if (f === null) return false;
  f(run.size, cand, out);
  return true;
}

function kernels(parts: readonly ProfileNode[], run: RunContext, k: KernelBuilder): string[] | null {
  const out: string[] = [];
  for (const p of parts) {
    const e = p.kernel?.(run, k) ?? null;
    if (e === null) return null;
    out.push(e);
  }
  return out;
}

function mask(out: Uint8Array, cand: Uint8Array | null, n: number): void {
  if (cand === null) return;
  for (let i = 0; i < n; i++) out[i]! &= cand[i]!;
}

/** A one-path expression over the profile table. */
export class ProfileLeaf implements ProfileNode {
  readonly columnar = true;
  constructor(private readonly leaf: ValueLeaf) {}

  kernel(run: RunContext, k: KernelBuilder): string | null {
    const a = this.leaf.path === null ? undefined : run.pathAccess(run.data.profiles, this.leaf.path);
    return this.leaf.kernel(a, k);
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const table = run.data.profiles;
    const a = this.leaf.path === null ? undefined : run.pathAccess(table, this.leaf.path);
    this.leaf.fill(table, (i) => run.data.profile(i), 0, run.size, out, cand, a);
    mask(out, cand, run.size);
  }
}

/**
 * and/or over parts. Columnar parts come first (stable order): the row fallback of the
 * others then sees only the rows the columnar parts left undecided.
 */
abstract class Connective implements ProfileNode {
  readonly columnar: boolean;
  readonly reason?: string;
  protected readonly parts: ProfileNode[];

  constructor(parts: ProfileNode[]) {
    this.parts = [...parts.filter((p) => p.columnar), ...parts.filter((p) => !p.columnar)];
    this.columnar = parts.every((p) => p.columnar);
    const r = parts.find((p) => !p.columnar)?.reason;
    if (r !== undefined) this.reason = r;
  }

  abstract kernel(run: RunContext, k: KernelBuilder): string | null;
  abstract eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void;
}

export class AndNode extends Connective {

  kernel(run: RunContext, k: KernelBuilder): string | null {
    const ks = kernels(this.parts, run, k);
    return ks === null ? null : `(${ks.join(" & ")})`;
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    if (this.columnar && fusedEval(this, run, cand, out)) return;
    this.parts[0]!.eval(run, cand, out);
    const tmp = new Uint8Array(run.size);
    for (let k = 1; k < this.parts.length; k++) {
      const p = this.parts[k]!;
      p.eval(run, out, tmp);
      for (let i = 0; i < run.size; i++) out[i]! &= tmp[i]!;
    }
  }
}

export class OrNode extends Connective {

  kernel(run: RunContext, k: KernelBuilder): string | null {
    const ks = kernels(this.parts, run, k);
    return ks === null ? null : `(${ks.join(" | ")})`;
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    if (this.columnar && fusedEval(this, run, cand, out)) return;
    this.parts[0]!.eval(run, cand, out);
    const tmp = new Uint8Array(run.size);
    const rest = new Uint8Array(run.size);
    for (let k = 1; k < this.parts.length; k++) {
      const p = this.parts[k]!;
      let c: Uint8Array | null = null;
      if (!p.columnar) {
        // Only the candidates not yet known true need the row path.
        for (let i = 0; i < rest.length; i++) rest[i] = (cand === null || cand[i] === 1) && out[i] === 0 ? 1 : 0;
        c = rest;
      } else c = cand;
      p.eval(run, c, tmp);
      for (let i = 0; i < run.size; i++) out[i]! |= tmp[i]!;
    }
  }
}

export class NotNode implements ProfileNode {
  readonly columnar: boolean;
  readonly reason?: string;
  constructor(private readonly inner: ProfileNode) {
    this.columnar = inner.columnar;
    if (inner.reason !== undefined) this.reason = inner.reason;
  }

  kernel(run: RunContext, k: KernelBuilder): string | null {
    const e = this.inner.kernel?.(run, k) ?? null;
    return e === null ? null : `(1 - ${e})`;
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    if (this.columnar && fusedEval(this, run, cand, out)) return;
    this.inner.eval(run, cand, out);
    const n = run.size;
    if (cand === null) for (let i = 0; i < n; i++) out[i] = 1 - out[i]!;
    else for (let i = 0; i < n; i++) out[i] = cand[i]! & (1 - out[i]!);
  }
}

/** Reads events? (Then the row path must materialize them.) */
function readsEvents(e: Expr): boolean {
  let found = false;
  walk(e, (n) => {
    if (n.type === "XEvent") found = true;
    return !found;
  });
  return found;
}

/**
 * A sub-expression the columnar code does not cover: the row compiler on the
 * materialized profile (and its events, if the expression reads them), for the
 * candidate profiles only. Exact: a boolean position only depends on its own
 * sub-expression, evaluated in the profile context.
 */
export class RowFallbackNode implements ProfileNode {
  readonly columnar = false;
  private readonly f: (ctx: { profile: Record<string, unknown>; events?: Record<string, unknown>[]; now: number }) => unknown;
  private readonly withEvents: boolean;

  constructor(
    expr: Expr,
    params: string[],
    readonly reason: string,
  ) {
    const q: Query = { type: "Query", params, body: expr };
    this.f = compile(q);
    this.withEvents = readsEvents(expr);
  }

  eval(run: RunContext, cand: Uint8Array | null, out: Uint8Array): void {
    const { data, now } = run;
    const n = run.size;
    for (let i = 0; i < n; i++) {
      if (cand !== null && cand[i] === 0) {
        out[i] = 0;
        continue;
      }
      const profile = data.profile(i);
      const ctx = this.withEvents ? { profile, events: run.events(i), now } : { profile, now };
      out[i] = toBoolean(this.f(ctx)) ? 1 : 0;
    }
  }
}
