/**
 * What `check` knows about a value (its type and schema path), and the
 * static rules for comparing and combining two such values (pql.md §6.5).
 */
import type { Diagnostic } from "./errors.js";
import type { Literal } from "./ast.js";
import type { PqlType } from "./catalog.js";
import { coerceStringLiteral, familyOf, isNumeric, typeName, type SchemaIndex } from "./types.js";

/** Where a value lives in the schema: a path, and whether it denotes one item of an array at that path. */
export interface PathRef {
  key: string;
  /** The value is one item of the array at `key` (a binding variable, a filter item). */
  item: boolean;
  /** The path went through an array: the value is the projection (an array). */
  projected: boolean;
}

export interface Info {
  type: PqlType;
  ref?: PathRef;
  /** A field path or variable: its truthiness is a documented idiom ("has a home address"). */
  isPath: boolean;
  literal?: Literal;
}

export interface Level {
  /** The item the implicit context refers to at this level; [0] is the profile. */
  ref?: PathRef;
}

export interface Scope {
  levels: Level[];
  vars: ReadonlyMap<string, Info>;
}

export const ANY: Info = { type: "any", isPath: false };
const ORDERING = new Set(["<", "<=", ">", ">="]);
export const ARITH = new Set(["+", "-", "*", "/", "%"]);

export function comparisonProblem(op: string, l: Info, r: Info, schema: SchemaIndex | undefined): { severity: Diagnostic["severity"]; code: string; message: string } | undefined {
  let lt = l.type;
  let rt = r.type;
  // pql.md §6.5: a string literal is converted to the type of the value it is compared with
  // (a field, or any computed value such as `orders.count()`); two literals are never converted.
  if (!l.literal && r.literal?.kind === "string") rt = coerceStringLiteral(r.literal.value as string, lt) ?? rt;
  if (!r.literal && l.literal?.kind === "string") lt = coerceStringLiteral(l.literal.value as string, rt) ?? lt;
  const ordering = ORDERING.has(op);
  const describe = (info: Info, t: PqlType) =>
    info.literal ? `${typeName(t)} ${JSON.stringify(info.literal.value)}` : info.ref && info.isPath && schema ? `the ${plainType(t)} field '${info.ref.key}'` : typeName(t);
  if (ordering) {
    for (const t of [lt, rt]) {
      if (["boolean", "array", "map", "object", "entry", "function"].includes(t)) {
        return {
          severity: "error",
          code: "PQL_INCOMPATIBLE_COMPARISON",
          message: `'${op}' cannot order ${typeName(t).replace(/^an? /, "")} values; it compares numbers`,
        };
      }
    }
  }
  if (lt !== "any" && rt !== "any" && familyOf(lt) !== familyOf(rt)) {
    return {
      severity: "error",
      code: "PQL_INCOMPATIBLE_COMPARISON",
      message: `Cannot compare ${describe(l, lt)} with ${describe(r, rt)}; the comparison is never true`,
    };
  }
  if (!ordering) return undefined;
  const known = lt !== "any" ? lt : rt;
  const other = lt !== "any" ? r : l;
  if (known === "string") {
    // `age < "30"` may still be a numeric comparison once the field's type is known.
    if (other.type === "any" && other.literal === undefined && (l.literal ?? r.literal)?.kind === "string") {
      const lit = (l.literal ?? r.literal)!.value as string;
      if (/^\s*[+-]?(\d+\.?\d*|\.\d+)\s*$/.test(lit)) return undefined;
    }
    return {
      severity: "warning",
      code: "PQL_ORDERING_COMPARISON",
      message: `'${op}' on text compares alphabetically (case-sensitive); check that this is intended`,
    };
  }
  if (familyOf(known) === "time") {
    return {
      severity: "warning",
      code: "PQL_ORDERING_COMPARISON",
      message: `'${op}' on dates compares instants; prefer 'occurs' (for example 'occurs before today') for time conditions`,
    };
  }
  return undefined;
}

export function arithmeticResult(op: string, a: PqlType, b: PqlType): PqlType {
  if (op === "/") return "double";
  if (a === "integer" && b === "integer") return "integer";
  if (a === "double" || b === "double") return "double";
  return isNumeric(a) && isNumeric(b) ? "number" : "any";
}

function plainType(t: PqlType): string {
  return typeName(t).replace(/^an? /, "");
}
