/**
 * The catalogue of PQL built-ins: canonical names, arity, receiver and
 * argument types, result type, and which arguments are evaluated with each
 * item of the receiver as the implicit context.
 *
 * One table serves every part of the package: the parser canonicalises
 * spelling with it (names are case-insensitive), `check` reports unknown names,
 * arity and static type errors from it, the evaluators use `itemArgs`, and
 * format/pql-json use the canonical names. Adding a built-in starts here.
 */

/** Static types known to the checker. `any` is unknown; `number` is integer or double. */
export type PqlType =
  | "any"
  | "boolean"
  | "integer"
  | "double"
  | "number"
  | "string"
  | "timestamp"
  | "dateInterval"
  | "array"
  | "map"
  | "object"
  | "entry"
  | "function";

export interface BuiltinSpec {
  /** Canonical spelling. */
  name: string;
  /** "method": called as `recv.name(...)`; "function": called as `name(...)`. */
  form: "method" | "function";
  /** Accepted receiver types for methods (any of). */
  receiver?: PqlType[];
  minArgs: number;
  maxArgs: number;
  /** Expected type of each positional argument (missing entries: any). */
  args?: PqlType[];
  /** Argument positions evaluated per item of the receiver (implicit item context). */
  itemArgs?: number[];
  /** Result type. */
  returns: PqlType;
  /** Short description used in diagnostics and docs. */
  summary: string;
}

const str: PqlType[] = ["string"];
const arr: PqlType[] = ["array"];
const arrOrMap: PqlType[] = ["array", "map"];

function stringPredicate(name: string, summary: string): BuiltinSpec {
  return {
    name,
    form: "method",
    receiver: str,
    minArgs: 1,
    maxArgs: 2,
    args: ["string", "boolean"],
    returns: "boolean",
    summary,
  };
}

export const BUILTINS: readonly BuiltinSpec[] = [
  // Boolean / control
  { name: "if", form: "function", minArgs: 3, maxArgs: 3, args: ["boolean"], returns: "any", summary: "if(test, then, else)" },

  // Array, list and set functions
  { name: "intersects", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["array"], returns: "boolean", summary: "at least one element in common" },
  { name: "intersection", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["array"], returns: "array", summary: "the elements in common" },
  { name: "subsetOf", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["array"], returns: "boolean", summary: "every element is in the argument" },
  { name: "supersetOf", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["array"], returns: "boolean", summary: "contains every element of the argument" },
  { name: "includes", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, returns: "boolean", summary: "contains the item" },
  { name: "distinct", form: "method", receiver: arr, minArgs: 0, maxArgs: 0, returns: "array", summary: "duplicates removed" },
  { name: "groupBy", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, itemArgs: [0], returns: "map", summary: "items grouped by a key" },
  { name: "filter", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["boolean"], itemArgs: [0], returns: "array", summary: "items satisfying a condition" },
  { name: "map", form: "method", receiver: arrOrMap, minArgs: 1, maxArgs: 1, itemArgs: [0], returns: "any", summary: "each item transformed" },
  { name: "topN", form: "method", receiver: arr, minArgs: 2, maxArgs: 2, args: ["any", "integer"], itemArgs: [0], returns: "array", summary: "the N items with the highest key" },
  { name: "bottomN", form: "method", receiver: arr, minArgs: 2, maxArgs: 2, args: ["any", "integer"], itemArgs: [0], returns: "array", summary: "the N items with the lowest key" },
  { name: "head", form: "method", receiver: arr, minArgs: 0, maxArgs: 0, returns: "any", summary: "the first item" },
  { name: "exists", form: "method", receiver: arr, minArgs: 1, maxArgs: 1, args: ["boolean"], itemArgs: [0], returns: "boolean", summary: "some item satisfies a condition" },

  // Aggregation (method forms)
  { name: "count", form: "method", receiver: arrOrMap, minArgs: 0, maxArgs: 0, returns: "integer", summary: "number of items" },
  { name: "sum", form: "method", receiver: arr, minArgs: 0, maxArgs: 1, args: ["number"], itemArgs: [0], returns: "number", summary: "sum of the items (or of an expression per item)" },
  { name: "average", form: "method", receiver: arr, minArgs: 0, maxArgs: 1, args: ["number"], itemArgs: [0], returns: "double", summary: "arithmetic mean" },
  { name: "min", form: "method", receiver: arr, minArgs: 0, maxArgs: 1, itemArgs: [0], returns: "any", summary: "smallest value" },
  { name: "max", form: "method", receiver: arr, minArgs: 0, maxArgs: 1, itemArgs: [0], returns: "any", summary: "largest value" },

  // Map functions
  { name: "get", form: "method", receiver: ["map", "object"], minArgs: 1, maxArgs: 1, returns: "any", summary: "value for a key" },
  { name: "keys", form: "method", receiver: ["map", "object"], minArgs: 0, maxArgs: 0, returns: "array", summary: "all keys" },
  { name: "values", form: "method", receiver: ["map", "object"], minArgs: 0, maxArgs: 0, returns: "array", summary: "all values" },
  { name: "mapEntry", form: "function", minArgs: 2, maxArgs: 2, returns: "entry", summary: "a key/value pair for map()" },

  // String functions
  stringPredicate("startsWith", "starts with a prefix"),
  stringPredicate("doesNotStartWith", "does not start with a prefix"),
  stringPredicate("endsWith", "ends with a suffix"),
  stringPredicate("doesNotEndWith", "does not end with a suffix"),
  stringPredicate("contains", "contains a substring"),
  stringPredicate("doesNotContain", "does not contain a substring"),
  stringPredicate("equals", "equal strings"),
  stringPredicate("notEqualTo", "different strings"),
  { name: "matches", form: "method", receiver: str, minArgs: 1, maxArgs: 1, args: ["string"], returns: "boolean", summary: "matches a (Java-syntax) regular expression" },
  { name: "regexGroup", form: "method", receiver: str, minArgs: 1, maxArgs: 2, args: ["string", "integer"], returns: "string", summary: "a capture group of the first match" },

  // Object functions
  { name: "isNull", form: "method", minArgs: 0, maxArgs: 0, returns: "boolean", summary: "is missing or null" },
  { name: "isNotNull", form: "method", minArgs: 0, maxArgs: 0, returns: "boolean", summary: "exists" },

  // Date and time functions
  { name: "currentMonth", form: "function", minArgs: 0, maxArgs: 0, returns: "integer", summary: "month (1-12) of now, UTC" },
  { name: "currentYear", form: "function", minArgs: 0, maxArgs: 0, returns: "integer", summary: "year of now, UTC" },
  { name: "currentDayOfMonth", form: "function", minArgs: 0, maxArgs: 0, returns: "integer", summary: "day of month of now, UTC" },
  { name: "getMonth", form: "method", receiver: ["timestamp"], minArgs: 0, maxArgs: 0, returns: "integer", summary: "month (1-12), UTC" },
  { name: "getYear", form: "method", receiver: ["timestamp"], minArgs: 0, maxArgs: 0, returns: "integer", summary: "year, UTC" },
  { name: "getDayOfMonth", form: "method", receiver: ["timestamp"], minArgs: 0, maxArgs: 0, returns: "integer", summary: "day of month, UTC" },
  { name: "date", form: "function", minArgs: 3, maxArgs: 3, args: ["integer", "integer", "integer"], returns: "dateInterval", summary: "the UTC calendar day y-m-d" },

  // Segments
  { name: "inSegment", form: "function", minArgs: 1, maxArgs: 1, args: ["string"], returns: "boolean", summary: "the profile is a member of the segment (realized or existing)" },
];

const byLower = new Map<string, BuiltinSpec[]>();
for (const b of BUILTINS) {
  const k = b.name.toLowerCase();
  const list = byLower.get(k) ?? [];
  list.push(b);
  byLower.set(k, list);
}

/** The built-in of that name and form, matched case-insensitively. */
export function lookupBuiltin(name: string, form: "method" | "function"): BuiltinSpec | undefined {
  return byLower.get(name.toLowerCase())?.find((b) => b.form === form);
}

/** The canonical spelling of a built-in name (either form), or the name unchanged when unknown. */
export function canonicalName(name: string, form: "method" | "function"): string {
  return lookupBuiltin(name, form)?.name ?? name;
}

/**
 * Reserved words in canonical lower-case spelling (pql.md §2.6). A keyword is a
 * keyword only in keyword position: after `.` any identifier is a field/method.
 * Matching is case-insensitive except for the camel-cased names listed as-is.
 */
export const KEYWORDS: readonly string[] = [
  "and", "or", "not", "in", "notIn", "like", "matches", "occurs", "on", "between",
  "before", "after", "from", "select", "where", "exists", "forall", "let", "over",
  "sum", "average", "min", "max", "true", "false", "null", "now", "today", "yesterday",
  "tomorrow", "this", "last", "next", "xEvent", "chain", "WHAT", "WHEN", "COUNT", "WHERE",
];
