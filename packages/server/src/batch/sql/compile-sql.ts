/**
 * PQL → SQL for batch evaluation. A definition compiles to ONE total boolean
 * predicate over a profile row `p(rid, doc)` with correlated sub-queries on
 * an events table `(rid, ts, doc)`, so that a job evaluates all its covered
 * definitions as columns of a single SELECT (one pass over the data).
 *
 * Coverage (everything else returns `{ ok: false, reason }` and the engine
 * uses the in-memory compiled evaluator for that definition):
 *   - `and`, `or`, `not`, boolean literals;
 *   - a field path compared with a literal (`= != < <= > >=`), with PQL's
 *     literal coercion (§6.5: "5" against a number, 5 against a string,
 *     "true" against a boolean) and type-mismatch-is-false semantics;
 *   - `path in [literals]`, `path notIn [literals]`;
 *   - `path.isNull()`, `path.isNotNull()`;
 *   - `startsWith / endsWith / contains / doesNot… / equals / notEqualTo`
 *     with one string literal (case-sensitive form);
 *   - events: `xEvent[cond].count() OP n`, `xEvent[cond]` as a condition,
 *     `exists X from xEvent [where|:] cond`, and a one-step
 *     `chain(xEvent, timestamp, [A: WHAT(c) [WHEN(tail)] [COUNT(n)] [WHERE(w)]])`;
 *     inside them `timestamp occurs tail` whenever the tail resolves to fixed bounds at the job's now
 *     (`occursBounds` from @segmentd/pql: time keywords, calendar periods, literal dates).
 * Not covered: inSegment (evaluated after the SQL pass, in dependency order),
 * arithmetic, aggregates, multi-step chains, string ordering against a literal
 * that looks like a timestamp (PQL then compares instants), regexes, maps.
 */
import { occursBounds, type Binding, type Chain, type CmpOp, type Expr, type Literal, type OccursBounds, type Query } from "@segmentd/pql";
import type { SqlDialect } from "./dialect.js";

export type SqlCompileResult = { ok: true; sql: string } | { ok: false; reason: string };

export interface SqlTables {
  /** Events table with columns rid (profile row id), ts (epoch ms or NULL), doc. */
  events: string;
}

class Unsupported extends Error {}

/** Where a JSON document comes from: the profile row or one event row. */
interface Doc {
  doc: string;
  /** Set for event documents: the column holding the event's instant. */
  ts?: string;
}

interface Scope {
  /** The implicit context (bare fields). */
  implicit: Doc;
  profile: Doc;
  vars: ReadonlyMap<string, Doc>;
  /** Depth of event sub-queries, for unique aliases. */
  depth: number;
}

interface PathRef {
  doc: Doc;
  path: string[];
}

const STRING_METHODS = new Set(["startsWith", "doesNotStartWith", "endsWith", "doesNotEndWith", "contains", "doesNotContain", "equals", "notEqualTo"]);
const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const FLIP: Record<CmpOp, CmpOp> = { "=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=" };

/**
 * Could PQL read this string as a timestamp? (Its parser rejects anything
 * shorter than 10 characters or not starting with a digit or sign.) When it
 * could, PQL orders two such strings as instants, which SQL text order is not.
 */
function maybeTimestamp(s: string): boolean {
  return s.length >= 10 && /^[0-9+-]/.test(s);
}

export class SqlCompiler {
  constructor(
    private readonly d: SqlDialect,
    private readonly tables: SqlTables,
    /** The job's evaluation instant (epoch ms): time words are resolved at compile time. */
    private readonly now: number,
  ) {}

  compile(query: Query): SqlCompileResult {
    try {
      const profile: Doc = { doc: "p.doc" };
      const vars = new Map<string, Doc>();
      if (query.params[0] !== undefined) vars.set(query.params[0], profile);
      if (query.params.length > 1) throw new Unsupported("queries with more than one parameter");
      return { ok: true, sql: this.pred(query.body, { implicit: profile, profile, vars, depth: 0 }) };
    } catch (e) {
      if (e instanceof Unsupported) return { ok: false, reason: e.message };
      throw e;
    }
  }

  /** A total boolean predicate for `e` in a boolean position. */
  private pred(e: Expr, s: Scope): string {
    const d = this.d;
    switch (e.type) {
      case "Literal":
        if (e.kind === "boolean") return e.value ? d.TRUE : d.FALSE;
        throw new Unsupported("a non-boolean literal as a condition");
      case "Not":
        return `(NOT ${this.pred(e.operand, s)})`;
      case "Binary":
        switch (e.op) {
          case "and":
            return `(${this.pred(e.left, s)} AND ${this.pred(e.right, s)})`;
          case "or":
            return `(${this.pred(e.left, s)} OR ${this.pred(e.right, s)})`;
          case "=":
          case "!=":
          case "<":
          case "<=":
          case ">":
          case ">=":
            return this.comparison(e.op, e.left, e.right, s);
          case "in":
          case "notIn":
            return this.membership(e.op, e.left, e.right, s);
          default:
            throw new Unsupported(`operator ${e.op}`);
        }
      case "Method":
        return this.methodPred(e.name, e.receiver, e.args, s);
      case "Filter":
        // A filtered array in a boolean position is true when non-empty.
        return `EXISTS (${this.eventSubquery(e, s, "1")})`;
      case "Quantifier":
        if (e.quantifier !== "exists" || e.bindings.length !== 1) throw new Unsupported(`${e.quantifier} with ${e.bindings.length} bindings`);
        return `EXISTS (${this.bindingSubquery(e.bindings[0]!, s)})`;
      case "Chain":
        return this.chain(e, s);
      case "Occurs":
        return this.occurs(e.subject, occursBounds(e.tail, this.now), s);
      default:
        throw new Unsupported(`${e.type} in a condition`);
    }
  }

  /** Resolve a field path (Field, Member chain, Var, $1) to a document and path. */
  private pathOf(e: Expr, s: Scope): PathRef | null {
    switch (e.type) {
      case "Field":
        return { doc: s.implicit, path: [e.name] };
      case "Var": {
        const doc = s.vars.get(e.name);
        return doc === undefined ? null : { doc, path: [] };
      }
      case "Param":
        return e.index === 1 ? { doc: s.profile, path: [] } : null;
      case "Member": {
        const base = this.pathOf(e.object, s);
        return base === null ? null : { doc: base.doc, path: [...base.path, e.name] };
      }
      default:
        return null;
    }
  }

  private requirePath(e: Expr, s: Scope): PathRef {
    const p = this.pathOf(e, s);
    if (p === null || p.path.length === 0) throw new Unsupported(`${e.type} where a field path is needed`);
    return p;
  }

  private comparison(op: CmpOp, left: Expr, right: Expr, s: Scope): string {
    // `X.count() OP n` over events.
    const countSide = left.type === "Method" && left.name === "count" && left.args.length === 0 ? left : null;
    if (countSide !== null && right.type === "Literal" && (right.kind === "integer" || right.kind === "double")) {
      return `((${this.countOf(countSide.receiver, s)}) ${op} ${this.d.num(right.value as number)})`;
    }
    if (left.type === "Literal" && right.type !== "Literal") return this.comparison(FLIP[op], right, left, s);
    if (right.type !== "Literal") throw new Unsupported("a comparison whose sides are not a field and a literal");
    const ref = this.pathOf(left, s);
    if (ref !== null && ref.doc.ts !== undefined && ref.path.length === 1 && ref.path[0] === "timestamp") {
      throw new Unsupported("comparing an event timestamp with a literal (use occurs)");
    }
    return this.compareLiteral(this.requirePath(left, s), op, right);
  }

  /** field OP literal with PQL's coercion; every branch total. */
  private compareLiteral(ref: PathRef, op: CmpOp, lit: Literal): string {
    const d = this.d;
    const kind = d.kindAt(ref.doc.doc, ref.path);
    const branches: string[] = [];
    const num = d.numberAt(ref.doc.doc, ref.path);
    const text = d.textAt(ref.doc.doc, ref.path);
    const bool = d.boolAt(ref.doc.doc, ref.path);
    const sqlOp = op === "!=" ? "<>" : op;
    const textCompare = (value: string): string => {
      if (op !== "=" && op !== "!=" && maybeTimestamp(value)) throw new Unsupported("ordering strings that may be timestamps");
      return d.cmpText(text, sqlOp, d.str(value));
    };
    if (lit.kind === "string") {
      const v = lit.value as string;
      if (NUMBER_TEXT.test(v.trim())) branches.push(`WHEN 'number' THEN (${num} ${sqlOp} ${d.num(Number(v))})`);
      branches.push(`WHEN 'string' THEN ${textCompare(v)}`);
      const l = v.toLowerCase();
      if ((l === "true" || l === "false") && (op === "=" || op === "!=")) {
        branches.push(`WHEN 'boolean' THEN (${bool} ${sqlOp} ${l === "true" ? d.TRUE : d.FALSE})`);
      }
    } else if (lit.kind === "integer" || lit.kind === "double") {
      const v = lit.value as number;
      branches.push(`WHEN 'number' THEN (${num} ${sqlOp} ${d.num(v)})`);
      branches.push(`WHEN 'string' THEN ${textCompare(String(v))}`);
    } else {
      const v = lit.value as boolean;
      // Booleans are equal or not; they have no order (PQL: ordering them is false).
      if (op === "=" || op === "!=") branches.push(`WHEN 'boolean' THEN (${bool} ${sqlOp} ${v ? d.TRUE : d.FALSE})`);
      branches.push(`WHEN 'string' THEN ${textCompare(String(v))}`);
    }
    return d.total(`CASE ${kind} ${branches.join(" ")} ELSE ${d.FALSE} END`);
  }

  private membership(op: "in" | "notIn", left: Expr, right: Expr, s: Scope): string {
    if (right.type !== "List" || right.elements.length === 0 || !right.elements.every((x) => x.type === "Literal")) {
      throw new Unsupported(`${op} with something other than a non-empty list of literals`);
    }
    const ref = this.requirePath(left, s);
    const any = `(${right.elements.map((x) => this.compareLiteral(ref, "=", x as Literal)).join(" OR ")})`;
    if (op === "in") return any;
    return `(${this.notNull(ref)} AND NOT ${any})`;
  }

  /**
   * PQL's member access projects through arrays (`a.b` on `[{b:1}]` is `[1]`,
   * not null), so a path is null only when no proper prefix is an array and
   * the value itself is missing or JSON null.
   */
  private isNull(ref: PathRef): string {
    const d = this.d;
    const parts: string[] = [];
    for (let i = 1; i < ref.path.length; i++) {
      const k = d.kindAt(ref.doc.doc, ref.path.slice(0, i));
      parts.push(`(${k} IS NULL OR ${k} <> 'array')`);
    }
    const kind = d.kindAt(ref.doc.doc, ref.path);
    parts.push(`(${kind} IS NULL OR ${kind} = 'null')`);
    return `(${parts.join(" AND ")})`;
  }

  private notNull(ref: PathRef): string {
    return `(NOT ${this.isNull(ref)})`;
  }

  private methodPred(name: string, receiver: Expr, args: readonly Expr[], s: Scope): string {
    if ((name === "isNull" || name === "isNotNull") && args.length === 0) {
      const ref = this.requirePath(receiver, s);
      return name === "isNull" ? this.isNull(ref) : this.notNull(ref);
    }
    if (STRING_METHODS.has(name) && args.length === 1 && args[0]!.type === "Literal" && args[0]!.kind === "string") {
      const d = this.d;
      const ref = this.requirePath(receiver, s);
      const text = d.textAt(ref.doc.doc, ref.path);
      const lit = args[0]!.value as string;
      const n = [...lit].length;
      let test: string;
      switch (name) {
        case "startsWith":
        case "doesNotStartWith":
          test = `(${d.prefix(text, n)} = ${d.str(lit)})`;
          break;
        case "endsWith":
        case "doesNotEndWith":
          test = n === 0 ? d.TRUE : `(${d.length(text)} >= ${n} AND ${d.suffix(text, n)} = ${d.str(lit)})`;
          break;
        case "contains":
        case "doesNotContain":
          test = d.contains(text, lit);
          break;
        default:
          test = `(${text} = ${d.str(lit)})`;
      }
      const negated = name.startsWith("doesNot") || name === "notEqualTo";
      // Both forms are false when the receiver is not a string.
      return d.total(`${text} IS NOT NULL AND ${negated ? `NOT ${test}` : test}`);
    }
    if (name === "count" && args.length === 0) throw new Unsupported("count() outside a comparison");
    throw new Unsupported(`method ${name}`);
  }

  private isXEvent(e: Expr): boolean {
    return e.type === "XEvent";
  }

  private eventScope(s: Scope): { scope: Scope; alias: string; from: string } {
    const alias = `e${s.depth}`;
    const ev: Doc = { doc: `${alias}.doc`, ts: `${alias}.ts` };
    // Nested sub-queries stay correlated with the profile row (p.rid); aliases differ by depth.
    return {
      scope: { implicit: ev, profile: s.profile, vars: s.vars, depth: s.depth + 1 },
      alias,
      from: `FROM ${this.tables.events} ${alias} WHERE ${alias}.rid = p.rid`,
    };
  }

  /** `SELECT <what> FROM events WHERE rid = p.rid AND cond` for `xEvent[cond]`. */
  private eventSubquery(e: Expr, s: Scope, what: string): string {
    if (e.type !== "Filter" || !this.isXEvent(e.object)) throw new Unsupported("an array other than xEvent[...]");
    const { scope, from } = this.eventScope(s);
    return `SELECT ${what} ${from} AND ${this.pred(e.condition, scope)}`;
  }

  private countOf(receiver: Expr, s: Scope): string {
    if (this.isXEvent(receiver)) {
      const { from } = this.eventScope(s);
      return `SELECT count(*) ${from}`;
    }
    return this.eventSubquery(receiver, s, "count(*)");
  }

  private bindingSubquery(b: Binding, s: Scope): string {
    if (!this.isXEvent(b.source)) throw new Unsupported("a binding over something other than xEvent");
    const { scope, from, alias } = this.eventScope(s);
    const vars = new Map(s.vars);
    vars.set(b.variable, { doc: `${alias}.doc`, ts: `${alias}.ts` });
    // Bare fields in a binding's condition still mean the profile.
    const inner: Scope = { ...scope, implicit: s.implicit, vars };
    return `SELECT 1 ${from}${b.condition ? ` AND ${this.pred(b.condition, inner)}` : ""}`;
  }

  private chain(c: Chain, s: Scope): string {
    if (!this.isXEvent(c.source)) throw new Unsupported("chain over something other than xEvent");
    if (c.steps.length !== 1) throw new Unsupported("chain with more than one step");
    if (c.timestampField !== "timestamp") throw new Unsupported("chain ordered by a field other than timestamp");
    const step = c.steps[0]!;
    const { scope, from, alias } = this.eventScope(s);
    const conds = [`${alias}.ts IS NOT NULL`, this.pred(step.what, scope)];
    if (step.when) conds.push(this.boundsPred(`${alias}.ts`, occursBounds(step.when, this.now)));
    if (step.where) conds.push(this.pred(step.where, scope));
    const need = step.count ?? 1;
    if (need <= 1) return `EXISTS (SELECT 1 ${from} AND ${conds.join(" AND ")})`;
    return `((SELECT count(*) ${from} AND ${conds.join(" AND ")}) >= ${need})`;
  }

  private occurs(subject: Expr, bounds: OccursBounds | null, s: Scope): string {
    const ref = this.pathOf(subject, s);
    if (ref === null || ref.doc.ts === undefined || ref.path.length !== 1 || ref.path[0] !== "timestamp") {
      throw new Unsupported("occurs on something other than an event's timestamp");
    }
    return this.boundsPred(ref.doc.ts, bounds);
  }

  private boundsPred(ts: string, b: OccursBounds | null): string {
    if (b === null) throw new Unsupported("a time reference or unit the SQL back end does not resolve");
    const d = this.d;
    if (b.empty) return d.FALSE;
    const parts = [`${ts} IS NOT NULL`];
    if (b.lower !== undefined) parts.push(`${ts} ${b.lowerInclusive ? ">=" : ">"} ${d.num(b.lower)}`);
    if (b.upper !== undefined) parts.push(`${ts} ${b.upperInclusive ? "<=" : "<"} ${d.num(b.upper)}`);
    if (b.exclude !== undefined) parts.push(`NOT (${ts} >= ${d.num(b.exclude.start)} AND ${ts} < ${d.num(b.exclude.end)})`);
    return d.total(parts.join(" AND "));
  }
}
