/**
 * SQL dialects for the PQL→SQL compiler, one class per database in the style
 * of sqlglot: the compiler (compile-sql.ts) decides WHAT to compute and asks
 * the dialect HOW to spell it. Every predicate a dialect builds is total: it
 * yields 1/true or 0/false, never NULL, so that `NOT`, `AND` and `OR` keep
 * PQL's two-valued logic (pql.md §6: a comparison with null is false, and
 * `not` of it is true).
 *
 * Both dialects read one JSON document per row: `doc` holds the merged profile
 * entity (or one event body), `ts` an event's instant in epoch ms.
 */

/** A JSON value's kind as both dialects report it after normalisation. */
export type JsonKind = "number" | "string" | "boolean" | "array" | "object" | "null";

export abstract class SqlDialect {
  abstract readonly name: "sqlite" | "postgres";

  /** A string literal, quotes escaped. */
  str(s: string): string {
    return `'${s.replace(/'/g, "''")}'`;
  }

  /** A numeric literal (finite numbers only; the compiler never passes others). */
  num(n: number): string {
    if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
    return String(n);
  }

  abstract readonly TRUE: string;
  abstract readonly FALSE: string;

  /** Normalised kind of the value at `path` in `doc`; SQL NULL when the path is missing. */
  abstract kindAt(doc: string, path: readonly string[]): string;
  /** The number at `path` (NULL unless it is a JSON number). */
  abstract numberAt(doc: string, path: readonly string[]): string;
  /** The string at `path` (NULL unless it is a JSON string). */
  abstract textAt(doc: string, path: readonly string[]): string;
  /** The boolean at `path` as the dialect's boolean (NULL unless it is a JSON boolean). */
  abstract boolAt(doc: string, path: readonly string[]): string;
  /** Number of UTF-16 code units... approximated by characters (see compiler notes). */
  abstract length(text: string): string;
  /** Prefix of `text` of `n` characters. */
  abstract prefix(text: string, n: number): string;
  /** Suffix of `text` of `n` characters. */
  abstract suffix(text: string, n: number): string;
  /** Does `text` contain `needle` (a literal)? */
  abstract contains(text: string, needle: string): string;
  /** Turns a possibly-NULL boolean expression into a total one (NULL → false). */
  abstract total(pred: string): string;
  /** A boolean expression in a position that needs a value (SELECT list): 1/0. */
  abstract asFlag(pred: string): string;
  /** Byte-wise (code point) string comparison, independent of the database's collation. */
  abstract cmpText(a: string, op: string, b: string): string;
}

/** Path `["a","b c"]` → JSON path `$."a"."b c"` (every key quoted, so any key is safe). */
function sqlitePath(path: readonly string[]): string {
  return "$" + path.map((k) => `."${k.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`).join("");
}

export class SqliteDialect extends SqlDialect {
  readonly name = "sqlite" as const;
  readonly TRUE = "1";
  readonly FALSE = "0";

  kindAt(doc: string, path: readonly string[]): string {
    // json_type: null|true|false|integer|real|text|array|object, NULL when missing.
    const t = `json_type(${doc}, ${this.str(sqlitePath(path))})`;
    return `(CASE ${t} WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' WHEN 'text' THEN 'string' WHEN 'true' THEN 'boolean' WHEN 'false' THEN 'boolean' ELSE ${t} END)`;
  }
  numberAt(doc: string, path: readonly string[]): string {
    const p = this.str(sqlitePath(path));
    return `(CASE WHEN json_type(${doc}, ${p}) IN ('integer', 'real') THEN json_extract(${doc}, ${p}) END)`;
  }
  textAt(doc: string, path: readonly string[]): string {
    const p = this.str(sqlitePath(path));
    return `(CASE WHEN json_type(${doc}, ${p}) = 'text' THEN json_extract(${doc}, ${p}) END)`;
  }
  boolAt(doc: string, path: readonly string[]): string {
    const p = this.str(sqlitePath(path));
    return `(CASE json_type(${doc}, ${p}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END)`;
  }
  length(text: string): string {
    return `length(${text})`;
  }
  prefix(text: string, n: number): string {
    return `substr(${text}, 1, ${n})`;
  }
  suffix(text: string, n: number): string {
    return n === 0 ? "''" : `substr(${text}, -${n})`;
  }
  contains(text: string, needle: string): string {
    return `(instr(${text}, ${this.str(needle)}) > 0)`;
  }
  total(pred: string): string {
    return `coalesce((${pred}), 0)`;
  }
  asFlag(pred: string): string {
    return `(${pred})`;
  }
  cmpText(a: string, op: string, b: string): string {
    // SQLite's default BINARY collation compares UTF-8 bytes = code point order.
    return `(${a} ${op} ${b})`;
  }
}

export class PostgresDialect extends SqlDialect {
  readonly name = "postgres" as const;
  readonly TRUE = "true";
  readonly FALSE = "false";

  private pathArray(path: readonly string[]): string {
    return `ARRAY[${path.map((k) => this.str(k)).join(", ")}]::text[]`;
  }
  private at(doc: string, path: readonly string[]): string {
    return `(${doc} #> ${this.pathArray(path)})`;
  }
  kindAt(doc: string, path: readonly string[]): string {
    return `jsonb_typeof${this.at(doc, path)}`;
  }
  numberAt(doc: string, path: readonly string[]): string {
    const v = this.at(doc, path);
    return `(CASE WHEN jsonb_typeof${v} = 'number' THEN (${v})::text::double precision END)`;
  }
  textAt(doc: string, path: readonly string[]): string {
    const v = this.at(doc, path);
    return `(CASE WHEN jsonb_typeof${v} = 'string' THEN (${doc} #>> ${this.pathArray(path)}) END)`;
  }
  boolAt(doc: string, path: readonly string[]): string {
    const v = this.at(doc, path);
    return `(CASE WHEN jsonb_typeof${v} = 'boolean' THEN (${v})::text::boolean END)`;
  }
  length(text: string): string {
    return `char_length(${text})`;
  }
  prefix(text: string, n: number): string {
    return `left(${text}, ${n})`;
  }
  suffix(text: string, n: number): string {
    return n === 0 ? "''" : `right(${text}, ${n})`;
  }
  contains(text: string, needle: string): string {
    return `(strpos(${text}, ${this.str(needle)}) > 0)`;
  }
  total(pred: string): string {
    return `coalesce((${pred}), false)`;
  }
  asFlag(pred: string): string {
    return `(CASE WHEN ${pred} THEN 1 ELSE 0 END)`;
  }
  cmpText(a: string, op: string, b: string): string {
    // Without COLLATE "C" PostgreSQL would sort by the locale, unlike PQL.
    return `(${a} COLLATE "C" ${op} ${b} COLLATE "C")`;
  }
}
