/**
 * Static type helpers for `check`: the XDM schema index, how XDM field types
 * map to the checker's PqlType, type families, literal coercion (pql.md §6.5)
 * and "did you mean" suggestions.
 *
 * Schema paths (CheckOptions.schema) are dotted paths from the profile root
 * (`person.birthDate`). The fields of an array's items continue the array's
 * path (`orders` = "array", `orders.price` = "double"); experience-event
 * fields are prefixed `xEvent.` (`xEvent.timestamp`,
 * `xEvent.productListItems.SKU`). Intermediate objects may be left out: a
 * deeper key implies them.
 */
import type { PqlType } from "./catalog.js";

export type XdmFieldType =
  | "string"
  | "integer"
  | "long"
  | "short"
  | "byte"
  | "number"
  | "double"
  | "boolean"
  | "date"
  | "date-time"
  | "object"
  | "array"
  | "map";

export function xdmToPql(t: XdmFieldType): PqlType {
  switch (t) {
    case "integer":
    case "long":
    case "short":
    case "byte":
      return "integer";
    case "number":
    case "double":
      return "double";
    case "date":
    case "date-time":
      return "timestamp";
    default:
      return t;
  }
}

export type TypeFamily = "any" | "numeric" | "string" | "boolean" | "time" | "array" | "map" | "object" | "entry" | "function";

/** Values of one family can be compared with each other. */
export function familyOf(t: PqlType): TypeFamily {
  switch (t) {
    case "integer":
    case "double":
    case "number":
      return "numeric";
    case "timestamp":
    case "dateInterval":
      return "time";
    default:
      return t;
  }
}

export function isNumeric(t: PqlType): boolean {
  return familyOf(t) === "numeric";
}

/** Scalar non-boolean types: meaningless (always true when present) in a condition. */
export function isNonBooleanScalar(t: PqlType): boolean {
  return ["integer", "double", "number", "string", "timestamp", "dateInterval", "entry", "function"].includes(t);
}

/** How a type is named in messages: "a string", "an integer". */
export function typeName(t: PqlType): string {
  switch (t) {
    case "any":
      return "a value of unknown type";
    case "integer":
      return "an integer";
    case "double":
    case "number":
      return "a number";
    case "timestamp":
      return "a date-time";
    case "dateInterval":
      return "a date";
    case "array":
      return "an array";
    case "object":
      return "an object";
    case "entry":
      return "a map entry";
    case "function":
      return "a function";
    default:
      return `a ${t}`;
  }
}

/** Does a value of type `actual` fit where `expected` is needed? Unknown (`any`) always fits. */
export function fits(actual: PqlType, expected: PqlType): boolean {
  if (actual === "any" || expected === "any") return true;
  if (expected === "number") return isNumeric(actual);
  if (expected === "double") return isNumeric(actual);
  if (expected === "integer") return actual === "integer" || actual === "number";
  if (expected === "timestamp") return familyOf(actual) === "time";
  return actual === expected;
}

/** Parses as a number the way the runtime coerces a string literal (pql.md §6.5). */
export function parsesAsNumber(s: string): boolean {
  return /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(s);
}

/** An ISO-8601 date or date-time string, as timestamp fields may hold (pql.md §4.4). */
export function parsesAsDate(s: string): boolean {
  return /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(s) && !Number.isNaN(Date.parse(s));
}

/** The type a string literal takes when compared with a value of type `other` (pql.md §6.5), or undefined. */
export function coerceStringLiteral(value: string, other: PqlType): PqlType | undefined {
  if (isNumeric(other) && parsesAsNumber(value)) return other;
  if (other === "boolean" && (value === "true" || value === "false")) return "boolean";
  if (other === "timestamp" && parsesAsDate(value)) return "timestamp";
  return undefined;
}

export interface SchemaEntry {
  /** Declared type, when the path itself is a key of the schema. */
  type?: XdmFieldType;
  /** Some key lies below this path. */
  hasChildren: boolean;
}

/** The schema with fast lookups of a path and of a path's declared children. */
export class SchemaIndex {
  private readonly types = new Map<string, XdmFieldType>();
  private readonly kids = new Map<string, Set<string>>();

  constructor(schema: Record<string, XdmFieldType>) {
    for (const [key, type] of Object.entries(schema)) {
      this.types.set(key, type);
      const parts = key.split(".");
      for (let i = 0; i < parts.length; i++) {
        const parent = parts.slice(0, i).join(".");
        const child = parts.slice(0, i + 1).join(".");
        const set = this.kids.get(parent) ?? new Set<string>();
        set.add(child);
        this.kids.set(parent, set);
      }
    }
  }

  get(path: string): SchemaEntry | undefined {
    const type = this.types.get(path);
    const hasChildren = this.kids.has(path);
    if (type === undefined && !hasChildren) return undefined;
    return { type, hasChildren };
  }

  /**
   * Is the set of children of `parent` known? Only when the schema declares at
   * least one child and the parent is not a map (map keys are data, not schema).
   * A schema without any `xEvent.` key leaves event fields unchecked.
   */
  isClosed(parent: string): boolean {
    if (this.types.get(parent) === "map") return false;
    return this.kids.has(parent);
  }

  /** The declared children of `parent` (full paths). */
  childrenOf(parent: string): string[] {
    return [...(this.kids.get(parent) ?? [])];
  }
}

/**
 * Edit distance counting a swap of two neighbours as one edit (optimal string
 * alignment), case-insensitive: `nmae` is one typo away from `name`.
 */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  const d: number[][] = Array.from({ length: s.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= t.length; j++) d[0]![j] = j;
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[s.length]![t.length]!;
}

/**
 * The candidate closest to `name`, if it is close enough to be a plausible
 * typo: at most a third of the name's length (at least 1, at most 3 edits).
 */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  // Hostile input: names are bounded by the source length, but a 1 MB identifier
  // must not cost a quadratic distance computation per candidate.
  if (name.length > 100) return undefined;
  const limit = Math.min(3, Math.max(1, Math.floor(name.length / 3)));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    if (Math.abs(c.length - name.length) > limit) continue;
    const d = editDistance(name, c);
    if (d <= limit && d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}
