/**
 * A boolean expression whose only data input is ONE dotted path of a table
 * (`homeAddress.countryCode in ["US", "CA"]`, `eventType = "x"`,
 * `person.name.firstName.startsWith("jo", false)`, `person.birthDate occurs
 * between date(…) and date(…)`): its value is a function g of the value at
 * that path.
 *
 * Exactness by construction: g is not re-implemented here. It IS the row
 * compiler's code for the expression, run on a one-field object holding the
 * value. It is then evaluated once per distinct value — per dictionary entry
 * of a string column, per distinct number, for true/false/null — and spread
 * over the rows; only the commonest shapes (a number or string column compared
 * with a literal) get a dedicated loop. Rows the column cannot decide (see
 * access.ts) run the same compiled code on the row object itself.
 */
import type { CmpOp, Expr, Query } from "../ast.js";
import { compile } from "../compile.js";
import { fieldPath } from "../runtime/patterns.js";
import { STRING_PREDICATES } from "../runtime/builtins.js";
import { GLOBAL_FUNCTIONS, PLAIN_METHODS } from "../runtime/prepare.js";
import { coerceLiteral, toBoolean } from "../runtime/values.js";
import { mayBeUndecided, pathAccess, undecided, type PathAccess } from "./access.js";
import type { Filler, KernelBuilder } from "./kernel.js";
import type { ColumnarTable } from "./layout.js";

const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);
/** Global functions that are pure functions of their arguments (inSegment reads the profile; mapEntry builds items). */
const PURE_CALLS: ReadonlySet<string> = new Set([...GLOBAL_FUNCTIONS].filter((n) => n !== "inSegment" && n !== "mapEntry"));

/**
 * The one path an expression reads (null: none, a constant), or undefined when
 * the expression reads more than one path or anything else (events, segments,
 * variables, item contexts).
 */
export function singlePath(e: Expr): string[] | null | undefined {
  let found: string[] | null = null;
  let ok = true;
  const visit = (n: Expr): void => {
    if (!ok) return;
    const p = n.type === "Field" || n.type === "Member" ? fieldPath(n) : null;
    if (p !== null) {
      if (found === null) found = p;
      else if (found.join(".") !== p.join(".")) ok = false;
      return;
    }
    switch (n.type) {
      case "Literal":
      case "TimeWord":
      case "RelPeriod":
        return;
      case "List":
        n.elements.forEach(visit);
        return;
      case "Member":
        // A field of a computed value (`a.get("k").b`): the object decides.
        if (n.object.type === "Field") ok = false;
        else visit(n.object);
        return;
      case "Method":
        if (!PLAIN_METHODS.has(n.name)) ok = false;
        else [n.receiver, ...n.args].forEach(visit);
        return;
      case "Call":
        if (!PURE_CALLS.has(n.name)) ok = false;
        else n.args.forEach(visit);
        return;
      case "Binary":
        visit(n.left);
        visit(n.right);
        return;
      case "Not":
      case "Negate":
        visit(n.operand);
        return;
      case "Occurs":
        visit(n.subject);
        for (const r of n.tail.kind === "between" ? [n.tail.from, n.tail.to] : [n.tail.ref]) visit(r);
        return;
      default:
        ok = false;
    }
  };
  visit(e);
  return ok ? found : undefined;
}

function samePath(e: Expr, path: readonly string[]): boolean {
  const p = e.type === "Field" || e.type === "Member" ? fieldPath(e) : null;
  return p !== null && p.join(".") === path.join(".");
}

const isLit = (e: Expr) => e.type === "Literal";

/**
 * Expressions for which an object at the path gives the same result as null
 * (false): comparisons, `in`, like/matches and string predicates with literal
 * operands are false for objects and for null alike (pql.md §6.3, §7.28). For
 * these, rows holding an object need no row-object fallback.
 */
function objectsReadAsNull(e: Expr, path: readonly string[]): boolean {
  if (e.type === "Binary" && (CMP.has(e.op) || e.op === "like" || e.op === "matches"))
    return (samePath(e.left, path) && isLit(e.right)) || (samePath(e.right, path) && isLit(e.left));
  if (e.type === "Binary" && e.op === "in")
    return samePath(e.left, path) && e.right.type === "List" && e.right.elements.every(isLit);
  if (e.type === "Method" && (STRING_PREDICATES.has(e.name) || e.name === "matches"))
    return samePath(e.receiver, path) && e.args.every(isLit);
  return false;
}

const FLIP = { "=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=" } as const;

/** `path OP literal` normalised to the path on the left. */
function literalComparison(e: Expr, path: readonly string[]): { op: CmpOp; lit: unknown } | null {
  if (e.type !== "Binary" || !CMP.has(e.op)) return null;
  const op = e.op as CmpOp;
  if (samePath(e.left, path) && e.right.type === "Literal") return { op, lit: e.right.value };
  if (samePath(e.right, path) && e.left.type === "Literal") return { op: FLIP[op], lit: e.left.value };
  return null;
}

/** Specialised loops for a literal comparison: the same answers as compareValues on these kinds. */
function numericLoop(op: CmpOp, n: number, vals: Float64Array): Filler {
  // One loop per operator so that each stays a tight monomorphic loop.
  switch (op) {
    case "=":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) out[r] = vals[r] === n ? 1 : 0; };
    case "!=":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) { const v = vals[r]!; out[r] = v === v && v !== n ? 1 : 0; } };
    case "<":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) out[r] = vals[r]! < n ? 1 : 0; };
    case "<=":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) out[r] = vals[r]! <= n ? 1 : 0; };
    case ">":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) out[r] = vals[r]! > n ? 1 : 0; };
    case ">=":
      return (lo, hi, out) => { for (let r = lo; r < hi; r++) out[r] = vals[r]! >= n ? 1 : 0; };
  }
}

/** A row object of the table (a profile, or an event) by row number. */
export type RowObject = (r: number) => Record<string, unknown>;

export class ValueLeaf {
  private readonly g: (v: unknown) => boolean;
  /** The compiled expression on a whole row object (for undecided rows). */
  readonly onRow: (row: Record<string, unknown>) => boolean;
  private readonly objectsMatter: boolean;
  private readonly cmp: { op: CmpOp; lit: unknown } | null;
  private readonly gNull: boolean;

  /** `path` from singlePath (null: the expression is a constant). */
  constructor(
    readonly expr: Expr,
    readonly path: readonly string[] | null,
    now: number,
  ) {
    const q: Query = { type: "Query", params: [], body: expr };
    const f = compile(q);
    this.onRow = (row) => toBoolean(f({ profile: row, now }));
    const synth = (v: unknown): Record<string, unknown> => {
      if (path === null) return {};
      let o: Record<string, unknown> = { [path[path.length - 1]!]: v };
      for (let k = path.length - 2; k >= 0; k--) o = { [path[k]!]: o };
      return o;
    };
    this.g = (v) => this.onRow(synth(v));
    this.gNull = this.g(null);
    this.objectsMatter = path === null ? false : !objectsReadAsNull(expr, path);
    this.cmp = path === null ? null : literalComparison(expr, path);
  }

  /**
   * out[r] = the expression's truth for every row r in [lo, hi). `want`
   * (rows indexed like the table, or null for all) limits the row-object
   * fallback of undecided rows to the rows whose answer is needed.
   */
  fill(table: ColumnarTable, row: RowObject, lo: number, hi: number, out: Uint8Array, want: Uint8Array | null, access?: PathAccess): void {
    this.prepare(table, row, want, access)(lo, hi, out);
  }

  /**
   * The loop of this leaf over one table, with everything that depends on the
   * data but not on the rows (column lookup, dictionary tables) done once: event
   * leaves are filled run by run over the candidates' ranges.
   */
  prepare(table: ColumnarTable, row: RowObject, want: Uint8Array | null, access?: PathAccess): Filler {
    const constant = this.gNull ? 1 : 0;
    if (this.path === null) return (lo, hi, out) => void out.fill(constant, lo, hi);
    const a = access ?? pathAccess(table, this.path);
    const base = this.columnLoop(a);
    if (!mayBeUndecided(a, this.objectsMatter)) return base;
    const objectsMatter = this.objectsMatter;
    const onRow = this.onRow;
    return (lo, hi, out) => {
      base(lo, hi, out);
      for (let r = lo; r < hi; r++) {
        if (want !== null && want[r] === 0) continue;
        if (undecided(a, r, objectsMatter)) out[r] = onRow(row(r)) ? 1 : 0;
      }
    };
  }

  /**
   * The leaf as a JS expression of the row `r` (0 or 1) for fused generated
   * loops (kernel.ts), or null when it needs per-row work the expression cannot
   * hold (undecided rows, per-value memos): the caller then precomputes it.
   */
  kernel(a: PathAccess | undefined, k: KernelBuilder): string | null {
    if (this.path === null) return this.gNull ? "1" : "0";
    if (a === undefined || mayBeUndecided(a, this.objectsMatter)) return null;
    const col = a.column;
    if (col === undefined) return this.gNull ? "1" : "0";
    const cmp = this.cmp;
    switch (col.kind) {
      case "number": {
        if (cmp === null) return null;
        const n = coerceLiteral(cmp.lit, 0);
        if (typeof n !== "number") return "0";
        const v = k.ext(col.values);
        const js = { "=": "===", "!=": "!==", "<": "<", "<=": "<=", ">": ">", ">=": ">=" }[cmp.op];
        const test = `${v}[r] ${js} ${k.lit(n)}`;
        return cmp.op === "!=" ? `(${v}[r] === ${v}[r] && ${test} ? 1 : 0)` : `(${test} ? 1 : 0)`;
      }
      case "string": {
        const s = cmp === null ? null : coerceLiteral(cmp.lit, "");
        const { codes, dict } = col;
        let hits: Uint8Array;
        if (cmp !== null && typeof s === "string" && (cmp.op === "=" || cmp.op === "!=")) {
          const eq = cmp.op === "=";
          hits = new Uint8Array(dict.length + 1);
          for (let c = 0; c < dict.length; c++) hits[c + 1] = (dict[c] === s) === eq ? 1 : 0;
        } else if (dict.length <= 4096) {
          // Small dictionaries are tabulated eagerly; large ones stay lazy (precomputed by the caller).
          hits = new Uint8Array(dict.length + 1);
          hits[0] = this.gNull ? 1 : 0;
          for (let c = 0; c < dict.length; c++) hits[c + 1] = this.g(dict[c]) ? 1 : 0;
        } else return null;
        return `${k.ext(hits)}[${k.ext(codes)}[r] + 1]`;
      }
      case "boolean": {
        const t = Uint8Array.of(this.gNull ? 1 : 0, this.g(false) ? 1 : 0, this.g(true) ? 1 : 0);
        return `${k.ext(t)}[${k.ext(col.values)}[r] + 1]`;
      }
      case "mixed":
        return null;
    }
  }

  private columnLoop(a: PathAccess): Filler {
    const col = a.column;
    const g = this.g;
    const nullHit = this.gNull ? 1 : 0;
    if (col === undefined) return (lo, hi, out) => void out.fill(nullHit, lo, hi);
    const cmp = this.cmp;
    switch (col.kind) {
      case "number": {
        const vals = col.values;
        const n = cmp === null ? null : coerceLiteral(cmp.lit, 0);
        if (cmp !== null && typeof n === "number") return numericLoop(cmp.op, n, vals);
        // A literal that does not coerce to a number never compares with one, not even by != (§6.3).
        if (cmp !== null) return (lo, hi, out) => void out.fill(0, lo, hi);
        const memo = new Map<number, number>();
        return (lo, hi, out) => {
          for (let r = lo; r < hi; r++) {
            const v = vals[r]!;
            if (v !== v) {
              out[r] = nullHit;
              continue;
            }
            let h = memo.get(v);
            if (h === undefined) memo.set(v, (h = g(v) ? 1 : 0));
            out[r] = h;
          }
        };
      }
      case "string": {
        const { codes, dict } = col;
        const s = cmp === null ? null : coerceLiteral(cmp.lit, "");
        if (cmp !== null && typeof s === "string" && (cmp.op === "=" || cmp.op === "!=")) {
          // Strings are equal only when identical (§6.3): one pass over the dictionary,
          // then a branch-free table lookup per row (slot 0 is "no value").
          const eq = cmp.op === "=";
          const hits = new Uint8Array(dict.length + 1);
          for (let c = 0; c < dict.length; c++) hits[c + 1] = (dict[c] === s) === eq ? 1 : 0;
          return (lo, hi, out) => {
            for (let r = lo; r < hi; r++) out[r] = hits[codes[r]! + 1]!;
          };
        }
        // Lazily, per dictionary entry met: large dictionaries (ids, timestamps) cost only what is read.
        const hits = new Int8Array(dict.length + 1).fill(-1);
        hits[0] = nullHit;
        return (lo, hi, out) => {
          for (let r = lo; r < hi; r++) {
            const c = codes[r]! + 1;
            let h = hits[c]!;
            if (h < 0) hits[c] = h = g(dict[c - 1]) ? 1 : 0;
            out[r] = h;
          }
        };
      }
      case "boolean": {
        const vals = col.values;
        const t = Uint8Array.of(nullHit, g(false) ? 1 : 0, g(true) ? 1 : 0);
        return (lo, hi, out) => {
          for (let r = lo; r < hi; r++) out[r] = t[vals[r]! + 1]!;
        };
      }
      case "mixed": {
        const vals = col.values;
        return (lo, hi, out) => {
          for (let r = lo; r < hi; r++) {
            const v = vals[r];
            out[r] = g(v === undefined ? null : v) ? 1 : 0;
          }
        };
      }
    }
  }
}
