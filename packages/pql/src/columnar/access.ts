/**
 * Reading one dotted path of a columnar table the way PQL reads it from the
 * row object, and knowing which rows the column alone cannot answer.
 *
 * PQL's `a.b.c` steps through objects and returns null at scalars, exactly
 * like the column of `a.b.c` — except in two cases the column does not
 * capture, whose rows are "undecided" and must be read from the row object:
 * - an array at a proper prefix (`a` or `a.b`): PQL projects through it
 *   (`[{c: 1}].c` is `[1]`) while the layout stops its walk there;
 * - an object at the path itself (the column only holds non-object values).
 */
import type { Column, ColumnarTable } from "./layout.js";

export interface PathAccess {
  /** The column of the path itself, if any row has a non-object value there. */
  readonly column: Column | undefined;
  /** Some row holds an object at the path (not in the column). */
  readonly objects: boolean;
  /** Mixed columns of proper prefixes: their rows holding arrays are undecided. */
  readonly prefixes: readonly (readonly unknown[])[];
}

export function pathAccess(table: ColumnarTable, path: readonly string[]): PathAccess {
  const prefixes: (readonly unknown[])[] = [];
  for (let k = 1; k < path.length; k++) {
    const col = table.column(path.slice(0, k).join("."));
    // Typed columns hold scalars only: PQL reads null under them, as the column does.
    if (col?.kind === "mixed" && col.values.some((v) => Array.isArray(v))) prefixes.push(col.values);
  }
  const name = path.join(".");
  return { column: table.column(name), objects: table.hasChildren(name), prefixes };
}

/** The PQL value of a column at row r (null for no value). */
export function columnValue(col: Column, r: number): unknown {
  switch (col.kind) {
    case "number": {
      const v = col.values[r]!;
      return v === v ? v : null;
    }
    case "string": {
      const c = col.codes[r]!;
      return c < 0 ? null : col.dict[c]!;
    }
    case "boolean": {
      const b = col.values[r]!;
      return b < 0 ? null : b === 1;
    }
    case "mixed": {
      const v = col.values[r];
      return v === undefined || (typeof v === "number" && Number.isNaN(v)) ? null : v;
    }
  }
}

/** Does the column hold a value (not null) at row r? */
export function hasValue(col: Column | undefined, r: number): boolean {
  if (col === undefined) return false;
  return columnValue(col, r) !== null;
}

/** Is row r undecided for this path? (See the module comment.) `objectsMatter` false: objects read like null. */
export function undecided(a: PathAccess, r: number, objectsMatter: boolean): boolean {
  for (const p of a.prefixes) if (Array.isArray(p[r])) return true;
  if (!objectsMatter || !a.objects) return false;
  if (a.column === undefined) return true;
  const c = a.column;
  // A row with a value (or, in a mixed column, an explicit null) has no object at the path.
  if (c.kind === "mixed") return c.values[r] === undefined;
  return !hasValue(c, r);
}

/** Whether any row at all may be undecided (so the per-row check can be skipped). */
export function mayBeUndecided(a: PathAccess, objectsMatter: boolean): boolean {
  return a.prefixes.length > 0 || (objectsMatter && a.objects);
}
