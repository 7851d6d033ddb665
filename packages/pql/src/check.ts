/**
 * `check`: every problem in a PQL text as diagnostics — the syntax error from
 * the parser, or the semantic problems the tree shows: unknown names, arity,
 * statically known type errors, guardrails from pql.md §10, Java-only regex
 * syntax and, given a schema, unknown fields and impossible comparisons.
 *
 * `check` never throws. Types are inferred bottom-up (types.ts); a value whose
 * type cannot be known statically (a field without a schema) is `any` and is
 * never reported, so a clean profile query stays clean.
 *
 * Stable codes (docs/eligibility.md lists them with examples):
 *   PQL_UNKNOWN_FUNCTION, PQL_UNKNOWN_METHOD, PQL_ARITY, PQL_ARGUMENT_TYPE,
 *   PQL_RECEIVER_TYPE, PQL_OPERAND_TYPE, PQL_CONDITION_TYPE,
 *   PQL_INCOMPATIBLE_COMPARISON, PQL_ORDERING_COMPARISON (warning),
 *   PQL_OCCURS_TYPE, PQL_SOURCE_TYPE, PQL_UNKNOWN_VARIABLE, PQL_CHAIN_TOO_LONG,
 *   PQL_NON_BOOLEAN_RESULT (warning), PQL_REGEX_UNSUPPORTED,
 *   PQL_REGEX_CATASTROPHIC, PQL_REGEX_INVALID, PQL_REGEX_TOO_LARGE, PQL_LIKE_TOO_LARGE, PQL_INSEGMENT_ID,
 *   PQL_DATE_RANGE, PQL_TOPN_COUNT, PQL_TOO_MANY_AGGREGATIONS (warning),
 *   PQL_UNKNOWN_FIELD, PQL_TOO_COMPLEX; syntax errors keep the parser's code.
 */
import { costDiagnostic, type CostLimits } from "./cost.js";
import type { Binding, Expr, Node, OccursTail, Query, TimeRef } from "./ast.js";
import { tailExprs } from "./ast.js";
import { BUILTINS, lookupBuiltin, type BuiltinSpec, type PqlType } from "./catalog.js";
import { hasNestedUnboundedRepetition } from "./check/regex.js";
import { PqlError, diagnosticAt, type Diagnostic } from "./errors.js";
import { parse } from "./parser.js";
import { LIKE_MAX_PATTERN } from "./runtime/builtins.js";
import { validateJavaRegex } from "./runtime/regex.js";
import {
  SchemaIndex,
  closest,
  familyOf,
  fits,
  isNonBooleanScalar,
  typeName,
  xdmToPql,
  type XdmFieldType,
} from "./types.js";
import { ANY, ARITH, arithmeticResult, comparisonProblem, type Info, type PathRef, type Scope } from "./check-comparison.js";

export type { XdmFieldType } from "./types.js";

export interface CheckOptions {
  /**
   * Field types by dotted path from the profile root (`person.birthDate`).
   * Array item fields continue the array's path (`orders` = "array",
   * `orders.price` = "double"); experience-event fields are prefixed `xEvent.`
   * (`xEvent.eventType`). Parents whose children are declared are "closed":
   * any other child is PQL_UNKNOWN_FIELD. Maps, and objects/arrays declared
   * without children, stay open.
   */
  schema?: Record<string, XdmFieldType>;
  /**
   * Refuse (PQL_TOO_COSTLY) a query whose worst-case work per profile at these
   * limits exceeds `maxUnits` (cost.ts). Only checked when nothing else is wrong.
   */
  cost?: CostLimits & { maxUnits: number };
}

/** The most steps a chain may have (pql.md §10 [VAL]). */
export const MAX_CHAIN_STEPS = 6;
/** More aggregation functions than this draw a warning (pql.md §10 [VAL]). */
export const MAX_AGGREGATIONS = 3;

export function check(text: string, options: CheckOptions = {}): Diagnostic[] {
  let query: Query;
  try {
    query = parse(text);
  } catch (e) {
    if (e instanceof PqlError) return [e.toDiagnostic()];
    return [diagnosticAt(text, "error", "PQL_SYNTAX", `The expression could not be read: ${String(e)}`, 0, text.length)];
  }
  const checker = new Checker(text, options.schema ? new SchemaIndex(options.schema) : undefined);
  try {
    checker.checkQuery(query);
  } catch (e) {
    // Deep trees are bounded by the parser's nesting limit and flattened operator
    // chains; this is the last line of defence so that check never throws.
    const message =
      e instanceof RangeError ? "The expression is too deeply nested to check" : `The expression could not be checked: ${String(e)}`;
    checker.report("error", "PQL_TOO_COMPLEX", message, query);
  }
  const diags = checker.result();
  if (options.cost !== undefined && !diags.some((d) => d.severity === "error")) {
    const costly = costDiagnostic(text, query, options.cost);
    if (costly !== null) diags.push(costly);
  }
  return diags;
}

const ROOT: PathRef = { key: "", item: true, projected: false };
const AGGREGATION_METHODS = new Set(["count", "sum", "average", "min", "max"]);
const METHOD_NAMES = BUILTINS.filter((b) => b.form === "method").map((b) => b.name);
const FUNCTION_NAMES = BUILTINS.filter((b) => b.form === "function").map((b) => b.name);

class Checker {
  private readonly diags: { d: Diagnostic; start: number }[] = [];
  private readonly aggregations: Node[] = [];

  constructor(
    private readonly text: string,
    private readonly schema: SchemaIndex | undefined,
  ) {}

  report(severity: Diagnostic["severity"], code: string, message: string, node: Node | { start?: number; end?: number }): void {
    const start = node.start ?? 0;
    const end = node.end ?? this.text.length;
    this.diags.push({ d: diagnosticAt(this.text, severity, code, message, start, end), start });
  }

  result(): Diagnostic[] {
    return this.diags.sort((a, b) => a.start - b.start).map((x) => x.d);
  }

  checkQuery(q: Query): void {
    const vars = new Map<string, Info>();
    q.params.forEach((p, i) => vars.set(p, i === 0 ? { type: "object", ref: ROOT, isPath: true } : { type: "any", isPath: true }));
    const scope: Scope = { levels: [{ ref: ROOT }], vars };
    const info = this.infer(q.body, scope);
    if (isNonBooleanScalar(info.type) && !info.isPath) {
      this.report(
        "warning",
        "PQL_NON_BOOLEAN_RESULT",
        `A segment definition should be true or false, but this expression is ${typeName(info.type)}; it counts as true whenever it has a value`,
        q.body,
      );
    }
    const aggs = this.aggregations.sort((a, b) => (a.start ?? 0) - (b.start ?? 0));
    if (aggs.length > MAX_AGGREGATIONS) {
      this.report(
        "warning",
        "PQL_TOO_MANY_AGGREGATIONS",
        `The expression uses ${aggs.length} aggregation functions; more than ${MAX_AGGREGATIONS} slow evaluation down`,
        aggs[MAX_AGGREGATIONS]!,
      );
    }
  }

  // ------------------------------------------------------------------ inference

  private infer(e: Expr, s: Scope): Info {
    switch (e.type) {
      case "Literal":
        return { type: e.kind, isPath: false, literal: e };
      case "List":
        for (const el of e.elements) this.infer(el, s);
        return { type: "array", isPath: false };
      case "Object":
        for (const en of e.entries) this.infer(en.value, s);
        return { type: "object", isPath: false };
      case "Field":
        return this.child(s.levels[s.levels.length - 1]!.ref, e.name, e);
      case "Var":
        return s.vars.get(e.name) ?? { type: "any", isPath: true };
      case "Param":
        return e.index === 1 ? { type: "object", ref: ROOT, isPath: true } : { type: "any", isPath: true };
      case "Up": {
        const depth = s.levels.length - 1;
        if (e.levels > depth) {
          const carets = "^".repeat(e.levels);
          this.report(
            "error",
            "PQL_UNKNOWN_VARIABLE",
            depth === 0
              ? `'${carets}${e.name}' refers to an enclosing item, but it is not inside a filter`
              : `'${carets}${e.name}' climbs ${e.levels} levels, but only ${depth} enclosing ${depth === 1 ? "level is" : "levels are"} available`,
            e,
          );
          return { type: "any", isPath: true };
        }
        return this.child(s.levels[depth - e.levels]!.ref, e.name, e);
      }
      case "XEvent":
        return { type: "array", ref: { key: "xEvent", item: false, projected: false }, isPath: true };
      case "TimeWord":
        return { type: e.word === "now" ? "timestamp" : "dateInterval", isPath: false };
      case "RelPeriod":
        return { type: "dateInterval", isPath: false };
      case "Member": {
        const obj = this.infer(e.object, s);
        if (obj.ref) return this.child(obj.ref, e.name, e, obj.type);
        return { type: "any", isPath: obj.isPath };
      }
      case "Method":
        return this.method(e, s);
      case "Call":
        return this.call(e, s);
      case "Filter": {
        const obj = this.infer(e.object, s);
        if (obj.type !== "any" && obj.type !== "array") {
          this.report("error", "PQL_RECEIVER_TYPE", `A filter [...] needs an array, but this is ${typeName(obj.type)}`, e.object);
        }
        this.condition(e.condition, this.withItem(s, obj), "A filter condition");
        return { type: "array", ref: obj.ref, isPath: false };
      }
      case "Negate": {
        const op = this.infer(e.operand, s);
        if (!fits(op.type, "number")) {
          this.report("error", "PQL_OPERAND_TYPE", `Unary '-' needs a number, but the operand is ${typeName(op.type)}`, e.operand);
          return { type: "number", isPath: false };
        }
        return { type: op.type === "any" ? "number" : op.type, isPath: false };
      }
      case "Not":
        this.condition(e.operand, s, "The operand of 'not'");
        return { type: "boolean", isPath: false };
      case "Binary":
        return this.binary(e, s);
      case "Occurs":
        this.occursSubject(e.subject, s);
        this.tail(e.tail, s);
        return { type: "boolean", isPath: false };
      case "Chain":
        return this.chain(e, s);
      case "Select":
        this.bindings(e.bindings, s);
        return { type: "array", isPath: false };
      case "Quantifier":
        this.bindings(e.bindings, s);
        return { type: "boolean", isPath: false };
      case "AggregateOver": {
        this.aggregations.push(e);
        const inner = this.bindings(e.bindings, s);
        if (e.value) {
          const v = this.infer(e.value, inner);
          if ((e.fn === "sum" || e.fn === "average") && !fits(v.type, "number")) {
            this.report("error", "PQL_ARGUMENT_TYPE", `'${e.fn}' adds up numbers, but this is ${typeName(v.type)}`, e.value);
          }
        }
        return { type: e.fn === "average" ? "double" : "number", isPath: false };
      }
      case "Let": {
        const v = this.infer(e.value, s);
        const vars = new Map(s.vars);
        // The variable is a name for the value, not a literal (literals never convert when compared).
        vars.set(e.variable, { type: v.type, ref: v.ref, isPath: true });
        return this.infer(e.body, { ...s, vars });
      }
      case "Lambda": {
        const vars = new Map(s.vars);
        for (const p of e.params) vars.set(p, { type: "any", isPath: true });
        this.infer(e.body, { ...s, vars });
        return { type: "function", isPath: false };
      }
    }
  }

  /** A scope whose implicit context is one item of `collection`. */
  private withItem(s: Scope, collection: Info): Scope {
    const ref = collection.ref ? { key: collection.ref.key, item: true, projected: false } : undefined;
    return { ...s, levels: [...s.levels, { ref }] };
  }

  /** Checks an expression in a boolean position: a known non-boolean scalar is meaningless there. */
  private condition(e: Expr, s: Scope, what: string): Info {
    const info = this.infer(e, s);
    if (isNonBooleanScalar(info.type) && !info.isPath) {
      this.report("error", "PQL_CONDITION_TYPE", `${what} must be true or false, but this is ${typeName(info.type)}`, e);
    }
    return info;
  }

  /** Field `name` of the value at `parent`, with the schema's type and unknown-field check. */
  private child(parent: PathRef | undefined, name: string, node: Expr, parentType?: PqlType): Info {
    if (!parent) return { type: "any", isPath: true };
    const key = parent.key === "" ? name : `${parent.key}.${name}`;
    // Through an array (not one of its items): projection, pql.md §6.1.
    const projected = parent.projected || (parentType === "array" && !parent.item);
    const ref: PathRef = { key, item: false, projected };
    if (!this.schema) return { type: "any", ref, isPath: true };
    const entry = this.schema.get(key);
    if (!entry) {
      if (this.schema.isClosed(parent.key)) {
        const siblings = this.schema.childrenOf(parent.key).map((k) => k.slice(k.lastIndexOf(".") + 1));
        const guess = closest(name, siblings);
        const where = parent.key === "" ? "the profile" : `'${parent.key}'`;
        this.report(
          "error",
          "PQL_UNKNOWN_FIELD",
          `Unknown field '${name}' in ${where}${guess ? `; did you mean '${guess}'?` : ""}`,
          node,
        );
      }
      return { type: "any", isPath: true };
    }
    const declared: PqlType = entry.type ? xdmToPql(entry.type) : "object";
    return { type: projected && declared !== "array" ? "array" : declared, ref, isPath: true };
  }

  // ------------------------------------------------------------------ methods and functions

  private method(e: Extract<Expr, { type: "Method" }>, s: Scope): Info {
    const recv = this.infer(e.receiver, s);
    const spec = lookupBuiltin(e.name, "method");
    if (!spec) {
      const asFunction = lookupBuiltin(e.name, "function");
      const guess = closest(e.name, METHOD_NAMES);
      this.report(
        "error",
        "PQL_UNKNOWN_METHOD",
        asFunction
          ? `'${asFunction.name}' is a function, not a method: write ${asFunction.name}(...)`
          : `Unknown method '${e.name}'${guess ? `; did you mean '${guess}'?` : ""}`,
        this.methodNameSpan(e),
      );
      for (const a of e.args) this.infer(a, s);
      return ANY;
    }
    if (AGGREGATION_METHODS.has(spec.name)) this.aggregations.push(e);
    this.arity(spec, e.args.length, e);
    if (spec.receiver && !spec.receiver.some((t) => fits(recv.type, t))) {
      this.report(
        "error",
        "PQL_RECEIVER_TYPE",
        `Method '${spec.name}' needs ${spec.receiver.map(typeName).join(" or ")}, but it is applied to ${typeName(recv.type)}`,
        e.receiver,
      );
    }
    const itemScope = this.withItem(s, recv);
    e.args.forEach((a, i) => {
      const itemArg = spec.itemArgs?.includes(i) ?? false;
      const info = this.infer(a, itemArg ? itemScope : s);
      this.argument(spec, i, a, info);
    });
    this.methodSpecifics(spec, e);
    return this.methodResult(spec, recv);
  }

  /** The span of a method's name (after the receiver and the dot), so that a typo is underlined, not the whole call. */
  private methodNameSpan(e: Extract<Expr, { type: "Method" }>): { start?: number; end?: number } {
    if (e.receiver.end === undefined) return e;
    const m = /^\s*\.\s*/.exec(this.text.slice(e.receiver.end, e.receiver.end + 200));
    if (!m) return e;
    const start = e.receiver.end + m[0].length;
    return this.text.slice(start, start + e.name.length).toLowerCase() === e.name.toLowerCase() ? { start, end: start + e.name.length } : e;
  }

  private methodSpecifics(spec: BuiltinSpec, e: Extract<Expr, { type: "Method" }>): void {
    if ((spec.name === "topN" || spec.name === "bottomN") && e.args[1]?.type === "Literal") {
      const n = e.args[1].value;
      if (typeof n === "number" && n <= 0) {
        this.report("error", "PQL_TOPN_COUNT", `${spec.name} needs a positive number of items, but got ${n}`, e.args[1]);
      }
    }
    if ((spec.name === "matches" || spec.name === "regexGroup") && e.args[0]) this.regex(e.args[0]);
  }

  private methodResult(spec: BuiltinSpec, recv: Info): Info {
    switch (spec.name) {
      case "filter":
      case "topN":
      case "bottomN":
      case "distinct":
        return { type: "array", ref: recv.ref, isPath: false };
      case "head":
        return { type: "any", ref: recv.ref ? { ...recv.ref, item: true } : undefined, isPath: false };
      case "map":
        return { type: recv.type === "map" ? "map" : recv.type === "array" ? "array" : "any", isPath: false };
      default:
        return { type: spec.returns, isPath: false };
    }
  }

  private call(e: Extract<Expr, { type: "Call" }>, s: Scope): Info {
    const spec = lookupBuiltin(e.name, "function");
    if (!spec) {
      const asMethod = lookupBuiltin(e.name, "method");
      const guess = closest(e.name, FUNCTION_NAMES);
      this.report(
        "error",
        "PQL_UNKNOWN_FUNCTION",
        asMethod
          ? `'${asMethod.name}' is a method, not a function: write value.${asMethod.name}(...)`
          : `Unknown function '${e.name}'${guess ? `; did you mean '${guess}'?` : ""}`,
        { start: e.start, end: e.start === undefined ? undefined : e.start + e.name.length },
      );
      for (const a of e.args) this.infer(a, s);
      return ANY;
    }
    this.arity(spec, e.args.length, e);
    const infos = e.args.map((a, i) => {
      const info = spec.name === "if" && i === 0 ? this.condition(a, s, "The test of 'if'") : this.infer(a, s);
      // inSegment's argument has its own, more precise diagnostic (segmentId).
      if (spec.name !== "inSegment") this.argument(spec, i, a, info);
      return info;
    });
    if (spec.name === "date") this.dateArgs(e.args);
    if (spec.name === "inSegment") this.segmentId(e);
    if (spec.name === "if" && infos.length === 3) {
      const [, a, b] = infos;
      return a!.type === b!.type ? { type: a!.type, isPath: false } : ANY;
    }
    return { type: spec.returns, isPath: false };
  }

  private arity(spec: BuiltinSpec, got: number, node: Expr): void {
    if (got >= spec.minArgs && got <= spec.maxArgs) return;
    const kind = spec.form === "method" ? "Method" : "Function";
    const want =
      spec.minArgs === spec.maxArgs
        ? `${spec.minArgs} argument${spec.minArgs === 1 ? "" : "s"}`
        : `${spec.minArgs} to ${spec.maxArgs} arguments`;
    this.report("error", "PQL_ARITY", `${kind} '${spec.name}' expects ${want}, but got ${got}`, node);
  }

  private argument(spec: BuiltinSpec, i: number, node: Expr, info: Info): void {
    const expected = spec.args?.[i];
    if (!expected || expected === "any" || node.type === "Lambda") return;
    if (expected === "boolean") {
      if (spec.name !== "if" && isNonBooleanScalar(info.type) && !info.isPath) {
        this.report("error", "PQL_CONDITION_TYPE", `The condition of '${spec.name}' must be true or false, but this is ${typeName(info.type)}`, node);
      }
      return;
    }
    if (!fits(info.type, expected)) {
      this.report(
        "error",
        "PQL_ARGUMENT_TYPE",
        `Argument ${i + 1} of '${spec.name}' must be ${typeName(expected)}, but this is ${typeName(info.type)}`,
        node,
      );
    }
  }

  private dateArgs(args: Expr[]): void {
    const lit = (a: Expr | undefined) => (a?.type === "Literal" && a.kind === "integer" ? (a.value as number) : undefined);
    const [y, m, d] = [lit(args[0]), lit(args[1]), lit(args[2])];
    if (m !== undefined && (m < 1 || m > 12)) {
      this.report("error", "PQL_DATE_RANGE", `Month ${m} is out of range; months are 1 to 12`, args[1]!);
      return;
    }
    if (d === undefined) return;
    // Without a literal year, February may have 29 days; without a month, 31.
    const max = m === undefined ? 31 : y === undefined && m === 2 ? 29 : new Date(Date.UTC(y ?? 2000, m, 0)).getUTCDate();
    if (d < 1 || d > max) {
      const monthText = m === undefined ? "" : y === undefined ? ` in month ${m}` : ` in ${y}-${String(m).padStart(2, "0")}`;
      this.report("error", "PQL_DATE_RANGE", `Day ${d} is out of range${monthText}; it must be 1 to ${max}`, args[2]!);
    }
  }

  private segmentId(e: Extract<Expr, { type: "Call" }>): void {
    const a = e.args[0];
    if (!a) return;
    if (a.type !== "Literal" || a.kind !== "string") {
      this.report("error", "PQL_INSEGMENT_ID", "inSegment needs the audience id as a text literal, like inSegment(\"<id>\")", a);
    } else if ((a.value as string).trim() === "") {
      this.report("error", "PQL_INSEGMENT_ID", "inSegment needs a non-empty audience id", a);
    }
  }

  /** A literal pattern: the runtime's validator decides what is invalid or Java-only; check adds the backtracking rule. */
  private regex(node: Expr): void {
    if (node.type !== "Literal" || node.kind !== "string") return;
    const pattern = node.value as string;
    const v = validateJavaRegex(pattern);
    if (!v.ok) {
      this.report("error", v.code, v.message.charAt(0).toUpperCase() + v.message.slice(1), node);
    } else if (hasNestedUnboundedRepetition(pattern)) {
      this.report(
        "error",
        "PQL_REGEX_CATASTROPHIC",
        "The pattern repeats a group that itself contains an unbounded repetition (like '(a+)+'); backtracking regex engines can take exponential time on it",
        node,
      );
    }
  }

  /** A literal like pattern longer than the runtime searches would never match: refuse it. */
  private likePattern(node: Expr): void {
    if (node.type !== "Literal" || node.kind !== "string") return;
    const length = (node.value as string).length;
    if (length > LIKE_MAX_PATTERN) {
      this.report(
        "error",
        "PQL_LIKE_TOO_LARGE",
        `The 'like' pattern is ${length} characters long; at most ${LIKE_MAX_PATTERN} are allowed`,
        node,
      );
    }
  }

  // ------------------------------------------------------------------ operators

  private binary(e: Extract<Expr, { type: "Binary" }>, s: Scope): Info {
    if (e.op === "and" || e.op === "or") {
      // Long and/or chains are left-nested thousands deep: walk the spine iteratively.
      const operands: { node: Expr; op: string }[] = [];
      let cur: Expr = e;
      while (cur.type === "Binary" && (cur.op === "and" || cur.op === "or")) {
        operands.push({ node: cur.right, op: cur.op });
        cur = cur.left;
      }
      operands.push({ node: cur, op: operands[operands.length - 1]!.op });
      for (let i = operands.length - 1; i >= 0; i--) {
        this.condition(operands[i]!.node, s, `The operand of '${operands[i]!.op}'`);
      }
      return { type: "boolean", isPath: false };
    }
    if (ARITH.has(e.op)) return this.arithmetic(e, s);
    const l = this.infer(e.left, s);
    const r = this.infer(e.right, s);
    switch (e.op) {
      case "in":
      case "notIn":
        this.membership(e, l, r);
        break;
      case "like":
      case "matches":
        for (const [side, info, node] of [["left", l, e.left], ["right", r, e.right]] as const) {
          if (!fits(info.type, "string")) {
            this.report("error", "PQL_OPERAND_TYPE", `'${e.op}' needs text on both sides, but the ${side} operand is ${typeName(info.type)}`, node);
          }
        }
        if (e.op === "matches") this.regex(e.right);
        else this.likePattern(e.right);
        break;
      default:
        this.compare(e, l, r);
    }
    return { type: "boolean", isPath: false };
  }

  private arithmetic(e: Extract<Expr, { type: "Binary" }>, s: Scope): Info {
    const steps: { op: string; node: Expr }[] = [];
    let cur: Expr = e;
    while (cur.type === "Binary" && ARITH.has(cur.op)) {
      steps.push({ op: cur.op, node: cur.right });
      cur = cur.left;
    }
    steps.reverse();
    const first = this.infer(cur, s);
    let result: PqlType = first.type;
    this.numericOperand(steps[0]!.op, "left", first, cur);
    for (const st of steps) {
      const r = this.infer(st.node, s);
      this.numericOperand(st.op, "right", r, st.node);
      result = arithmeticResult(st.op, result, r.type);
    }
    return { type: result, isPath: false };
  }

  private numericOperand(op: string, side: string, info: Info, node: Expr): void {
    // Timestamps may be stored as epoch milliseconds (pql.md §4.4): not reported.
    if (fits(info.type, "number") || info.type === "timestamp") return;
    this.report("error", "PQL_OPERAND_TYPE", `Operator '${op}' needs numbers, but the ${side} operand is ${typeName(info.type)}`, node);
  }

  private membership(e: Extract<Expr, { type: "Binary" }>, l: Info, r: Info): void {
    if (r.type !== "any" && r.type !== "array") {
      this.report("error", "PQL_OPERAND_TYPE", `'${e.op}' needs a list on the right, but this is ${typeName(r.type)}`, e.right);
      return;
    }
    if (e.right.type !== "List" || l.type === "any") return;
    for (const el of e.right.elements) {
      if (el.type !== "Literal") continue;
      const problem = comparisonProblem("=", l, { type: el.kind, isPath: false, literal: el }, this.schema);
      if (problem?.severity === "error") this.report("error", problem.code, problem.message, el);
    }
  }

  private compare(e: Extract<Expr, { type: "Binary" }>, l: Info, r: Info): void {
    const problem = comparisonProblem(e.op, l, r, this.schema);
    if (problem) this.report(problem.severity, problem.code, problem.message, e);
  }

  // ------------------------------------------------------------------ time

  private occursSubject(subject: Expr, s: Scope): void {
    const info = this.infer(subject, s);
    if (info.type === "any" || familyOf(info.type) === "time") return;
    const what = info.ref && info.isPath && this.schema ? `'${info.ref.key}' is ${typeName(info.type)} field` : `this is ${typeName(info.type)}`;
    this.report("error", "PQL_OCCURS_TYPE", `'occurs' needs a date or date-time, but ${what}`, subject);
  }

  private tail(tail: OccursTail, s: Scope): void {
    for (const ref of tailExprs(tail)) this.timeRef(ref, s);
  }

  private timeRef(ref: TimeRef, s: Scope): void {
    const info = this.infer(ref, s);
    if (info.type === "any" || familyOf(info.type) === "time") return;
    this.report("error", "PQL_OCCURS_TYPE", `A time reference must be a date or date-time, but this is ${typeName(info.type)}`, ref);
  }

  // ------------------------------------------------------------------ binders

  private chain(e: Extract<Expr, { type: "Chain" }>, s: Scope): Info {
    const src = this.infer(e.source, s);
    if (src.type !== "any" && src.type !== "array") {
      this.report("error", "PQL_SOURCE_TYPE", `A chain needs an array of events, but this is ${typeName(src.type)}`, e.source);
    }
    if (e.steps.length > MAX_CHAIN_STEPS) {
      this.report("error", "PQL_CHAIN_TOO_LONG", `A chain can have at most ${MAX_CHAIN_STEPS} steps, but this one has ${e.steps.length}`, e);
    }
    const item = this.withItem(s, src);
    // The timestamp field is looked up once per chain (one diagnostic, on the chain), not per WHEN.
    const ts = this.child(item.levels[item.levels.length - 1]!.ref, e.timestampField, e);
    if (ts.type !== "any" && familyOf(ts.type) !== "time") {
      this.report("error", "PQL_OCCURS_TYPE", `A chain needs a date-time field for its order, but '${e.timestampField}' is ${typeName(ts.type)}`, e);
    }
    for (const step of e.steps) {
      this.condition(step.what, item, "The WHAT condition");
      if (step.when) this.tail(step.when, s);
      if (step.where) this.condition(step.where, item, "The WHERE condition");
    }
    return { type: "boolean", isPath: false };
  }

  /** Binds each variable in turn (left to right) and checks its source and condition. */
  private bindings(bindings: Binding[], s: Scope): Scope {
    let scope = s;
    for (const b of bindings) {
      const src = this.infer(b.source, scope);
      if (src.type !== "any" && src.type !== "array") {
        this.report("error", "PQL_SOURCE_TYPE", `'from' needs an array, but this is ${typeName(src.type)}`, b.source);
      }
      const vars = new Map(scope.vars);
      vars.set(b.variable, { type: "any", ref: src.ref ? { key: src.ref.key, item: true, projected: false } : undefined, isPath: true });
      scope = { ...scope, vars };
      if (b.condition) this.condition(b.condition, scope, "The 'where' condition");
    }
    return scope;
  }
}
