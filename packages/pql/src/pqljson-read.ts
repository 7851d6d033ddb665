/** pql/json → Query, tolerant of the variants pqljson.ts lists; malformed input throws PQL_JSON_INVALID. */
import type { BinaryOp, Binding, ChainStep, CmpOp, Expr, OccursTail, Query, TimeRef, TimeUnit } from "./ast.js";
import { TIME_UNITS } from "./ast.js";
import { canonicalName, lookupBuiltin } from "./catalog.js";
import { PqlError } from "./errors.js";
import { LEFT_ASSOC, MAX_JSON_NESTING, type PqlJsonValue } from "./pqljson-nodes.js";

const BINARY_OPS = new Map<string, BinaryOp>([
  ["and", "and"],
  ["or", "or"],
  ["=", "="],
  ["!=", "!="],
  ["<", "<"],
  ["<=", "<="],
  [">", ">"],
  [">=", ">="],
  ["+", "+"],
  ["-", "-"],
  ["*", "*"],
  ["/", "/"],
  ["%", "%"],
  ["in", "in"],
  ["notin", "notIn"],
  ["like", "like"],
  ["matches", "matches"],
]);
const TIME_WORD_NAMES = new Set(["now", "today", "yesterday", "tomorrow"]);
const PERIOD_NAMES = new Set(["this", "last", "next"]);
const DIRECTION_NAMES = new Set(["before", "after", "from"]);
const AGGREGATES = new Set(["sum", "average", "min", "max"]);
const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

// ------------------------------------------------------------------ reading

/** A JSON path, kept as a linked list so that deep spines do not build long strings. */
interface Path {
  parent: Path | undefined;
  seg: string;
}

function render(p: Path | undefined): string {
  const segs: string[] = [];
  for (let q = p; q; q = q.parent) segs.push(q.seg);
  return "$" + segs.reverse().join("");
}

function sub(p: Path | undefined, seg: string | number): Path {
  return { parent: p, seg: typeof seg === "number" ? `[${seg}]` : `.${seg}` };
}

function bad(path: Path | undefined, message: string): never {
  const at = render(path);
  throw new PqlError("PQL_JSON_INVALID", `Invalid pql/json at ${at}: ${message}`, at, 0, 0);
}

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * How the reader takes an fnApply with no `form`, when its name is not one of
 * the structural names: a known built-in function, else a method when it has
 * a receiver, else a function.
 */
export function defaultCallForm(node: { fnName: string; params: unknown[] }): "method" | "function" | "other" {
  const lower = node.fnName.toLowerCase();
  if (structuralReading(lower, node.params) !== undefined) return "other";
  if (lookupBuiltin(node.fnName, "function")) return "function";
  if (lookupBuiltin(node.fnName, "method")) return "method";
  return node.params.length > 0 ? "method" : "function";
}

/** Names the reader treats as syntax rather than as calls, given the params' shape. */
function structuralReading(lower: string, params: unknown[]): string | undefined {
  const isDecl = (p: unknown) => isObj(p) && p.nodeType === "varDecl";
  if (BINARY_OPS.has(lower) && params.length >= 2) return "binary";
  if ((lower === "not" || lower === "!") && params.length === 1) return "not";
  if (lower === "-" && params.length === 1) return "negate";
  if (lower === "{}" || lower === "^" || lower === "[]" || lower === "occurs" || lower === "chain") return lower;
  if (TIME_WORD_NAMES.has(lower) && params.length === 0) return "timeword";
  if (PERIOD_NAMES.has(lower) && params.length === 1 && isTimeUnitLiteral(params[0])) return "period";
  if ((lower === "select" || lower === "exists" || lower === "forall") && params.length > 0 && params.every(isDecl)) {
    return "binder";
  }
  if (AGGREGATES.has(lower) && params.length > 0 && params.slice(params.length > 1 && !isDecl(params[0]) ? 1 : 0).every(isDecl)) {
    return "aggregate";
  }
  if (lower === "let" && params.length === 2 && isDecl(params[0])) return "let";
  return undefined;
}

/** The string of a String literal node or raw JSON string, without validating the rest. */
function literalString(p: unknown): string | undefined {
  if (typeof p === "string") return p;
  if (isObj(p) && p.nodeType === "literal" && typeof p.value === "string") {
    return p.literalType === undefined || String(p.literalType).toLowerCase() === "string" ? p.value : undefined;
  }
  return undefined;
}

function isTimeUnitLiteral(p: unknown): boolean {
  const s = literalString(p);
  return s !== undefined && (TIME_UNITS as readonly string[]).includes(s.toLowerCase());
}

/** Read pql/json (an object, or its JSON text) into a Query. Throws PqlError PQL_JSON_INVALID. */
export function fromPqlJson(json: object | string): Query {
  let root: unknown = json;
  if (typeof json === "string") {
    try {
      root = JSON.parse(json);
    } catch (err) {
      throw new PqlError("PQL_JSON_INVALID", `Invalid pql/json: not JSON (${(err as Error).message})`, json, 0, 0);
    }
  }
  const reader = new Reader();
  if (isObj(root) && root.nodeType === "fnCreate") {
    const params = reader.lambdaParams(root, undefined);
    return { type: "Query", params, body: reader.expr(root.body, sub(undefined, "body")) };
  }
  return { type: "Query", params: [], body: reader.expr(root, undefined) };
}

class Reader {
  private depth = 0;

  expr(v: unknown, path: Path | undefined): Expr {
    if (++this.depth > MAX_JSON_NESTING) bad(path, `nesting exceeds the limit of ${MAX_JSON_NESTING} levels`);
    try {
      return this.exprInner(v, path);
    } finally {
      this.depth--;
    }
  }

  private exprInner(v: unknown, path: Path | undefined): Expr {
    // Raw JSON values stand for literals ([SRCF] omits the literal wrapper).
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean" || Array.isArray(v)) {
      return this.rawLiteral(v, path);
    }
    if (!isObj(v)) bad(path, `expected a node object but found ${v === null ? "null" : typeof v}`);
    switch (v.nodeType) {
      case "literal":
        return this.literal(v, path);
      case "fieldLookup": {
        const name = this.ident(v.fieldName, sub(path, "fieldName"), "fieldName");
        if (v.object === undefined) return { type: "Field", name };
        return { type: "Member", object: this.expr(v.object, sub(path, "object")), name };
      }
      case "parameterReference": {
        const pos = v.position;
        if (typeof pos !== "number" || !Number.isSafeInteger(pos) || pos < 1) {
          bad(sub(path, "position"), "position must be a positive integer");
        }
        return { type: "Param", index: pos };
      }
      case "varRef": {
        if (v.varName === "_") return { type: "Param", index: 1 };
        const name = this.ident(v.varName, sub(path, "varName"), "varName");
        if (name.toLowerCase() === "xevent") return { type: "XEvent" };
        return { type: "Var", name };
      }
      case "fnApply":
        return this.fnApply(v, path);
      case "fnCreate": {
        const params = this.lambdaParams(v, path);
        return { type: "Lambda", params, body: this.expr(v.body, sub(path, "body")) };
      }
      case "varDecl":
        return bad(path, "a varDecl is only allowed as a binding of select/exists/forall/let/sum…over");
      case "set":
        return bad(path, "the legacy 'set' node is not supported");
      default:
        return bad(sub(path, "nodeType"), `unknown nodeType ${JSON.stringify(v.nodeType) ?? "undefined"}`);
    }
  }

  lambdaParams(v: Json, path: Path | undefined): string[] {
    const ps = v.params;
    if (!Array.isArray(ps) || ps.length === 0) bad(sub(path, "params"), "fnCreate needs a non-empty params array");
    return ps.map((p, i) => {
      const pp = sub(sub(path, "params"), i);
      if (!isObj(p)) bad(pp, "expected {varName}");
      return this.ident(p.varName, sub(pp, "varName"), "varName");
    });
  }

  private ident(v: unknown, path: Path, what: string): string {
    if (typeof v !== "string" || !IDENT.test(v)) bad(path, `${what} must be an identifier ([A-Za-z_][A-Za-z0-9_]*)`);
    return v;
  }

  private rawLiteral(v: PqlJsonValue | unknown[], path: Path | undefined): Expr {
    if (Array.isArray(v)) return { type: "List", elements: v.map((x, i) => this.expr(x, sub(path, i))) };
    if (typeof v === "number") {
      if (!Number.isFinite(v)) bad(path, "numbers must be finite");
      return Number.isInteger(v) ? this.integer(v, path) : { type: "Literal", kind: "double", value: v };
    }
    return { type: "Literal", kind: typeof v === "string" ? "string" : "boolean", value: v };
  }

  private integer(v: number, path: Path | undefined): Expr {
    if (!Number.isSafeInteger(v)) bad(path, `integer ${v} is outside the supported range`);
    return { type: "Literal", kind: "integer", value: v };
  }

  private literal(v: Json, path: Path | undefined): Expr {
    const vp = sub(path, "value");
    const value = v.value;
    if (v.literalType === undefined) {
      if (value === undefined || value === null || (typeof value === "object" && !Array.isArray(value))) {
        bad(vp, "a literal needs a value");
      }
      return this.rawLiteral(value as PqlJsonValue | unknown[], vp);
    }
    if (typeof v.literalType !== "string") bad(sub(path, "literalType"), "literalType must be a string");
    switch (v.literalType.toLowerCase()) {
      case "string":
        if (typeof value !== "string") bad(vp, "a String literal needs a string value");
        return { type: "Literal", kind: "string", value };
      case "integer":
      case "long": {
        // Legacy trees give integers as strings ("6").
        const n = typeof value === "string" && /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value;
        if (typeof n !== "number" || !Number.isInteger(n)) bad(vp, "an Integer literal needs an integer value");
        return this.integer(n, vp);
      }
      case "double": {
        const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
        if (typeof n !== "number" || !Number.isFinite(n)) bad(vp, "a Double literal needs a finite number");
        return { type: "Literal", kind: "double", value: n };
      }
      case "boolean": {
        const b = value === "true" ? true : value === "false" ? false : value;
        if (typeof b !== "boolean") bad(vp, "a Boolean literal needs true or false");
        return { type: "Literal", kind: "boolean", value: b };
      }
      case "list":
        if (!Array.isArray(value)) bad(vp, "a List literal needs an array value");
        return { type: "List", elements: value.map((x, i) => this.expr(x, sub(vp, i))) };
      case "xdmobject":
        if (value !== "profile") bad(vp, 'the only XDMObject literal is "profile"');
        return { type: "Param", index: 1 };
      default:
        return bad(sub(path, "literalType"), `unknown literalType ${JSON.stringify(v.literalType)}`);
    }
  }

  private params(v: Json, path: Path | undefined): unknown[] {
    if (!Array.isArray(v.params)) bad(sub(path, "params"), "fnApply needs a params array");
    return v.params;
  }

  private fnApply(v: Json, path: Path | undefined): Expr {
    if (v.function !== undefined && v.fnName === undefined) {
      bad(sub(path, "function"), "applying a function value (fnApply.function) is not supported");
    }
    if (typeof v.fnName !== "string" || v.fnName === "") bad(sub(path, "fnName"), "fnApply needs a fnName string");
    const params = this.params(v, path);
    const pp = sub(path, "params");
    const at = (i: number) => sub(pp, i);
    const form = v.form;
    if (form !== undefined && form !== "method" && form !== "function") {
      bad(sub(path, "form"), 'form must be "method" or "function"');
    }
    const lower = v.fnName.toLowerCase();
    const reading = form === undefined ? structuralReading(lower, params) : undefined;
    switch (reading) {
      case "binary":
        return this.binaryChain(v, path);
      case "not":
        return { type: "Not", operand: this.expr(params[0], at(0)) };
      case "negate":
        return { type: "Negate", operand: this.expr(params[0], at(0)) };
      case "{}": {
        if (params.length % 2 !== 0) bad(pp, "an object needs alternating key and value params");
        const entries: { key: string; value: Expr }[] = [];
        for (let i = 0; i < params.length; i += 2) {
          entries.push({ key: this.stringParam(params[i], at(i), "an object key"), value: this.expr(params[i + 1], at(i + 1)) });
        }
        return { type: "Object", entries };
      }
      case "^": {
        if (params.length !== 2) bad(pp, "^ needs [levels, name]");
        const levels = this.intParam(params[0], at(0), "the number of levels");
        if (levels < 1) bad(at(0), "levels must be at least 1");
        const name = this.stringParam(params[1], at(1), "the field name");
        if (!IDENT.test(name)) bad(at(1), "the field name must be an identifier");
        return { type: "Up", levels, name };
      }
      case "[]":
        if (params.length !== 2) bad(pp, "[] needs [array, condition]");
        return { type: "Filter", object: this.expr(params[0], at(0)), condition: this.expr(params[1], at(1)) };
      case "timeword":
        return { type: "TimeWord", word: lower as "now" | "today" | "yesterday" | "tomorrow" };
      case "period":
        return { type: "RelPeriod", which: lower as "this" | "last" | "next", unit: this.unitParam(params[0], at(0)) };
      case "occurs": {
        if (params.length < 2) bad(pp, "occurs needs a subject and a time condition");
        return { type: "Occurs", subject: this.expr(params[0], at(0)), tail: this.tail(params, 1, pp) };
      }
      case "chain":
        return this.chain(params, pp);
      case "binder": {
        const bindings = this.bindings(params, 0, pp);
        if (lower === "select") return { type: "Select", bindings };
        return { type: "Quantifier", quantifier: lower as "exists" | "forall", bindings };
      }
      case "aggregate": {
        const hasValue = !(isObj(params[0]) && params[0].nodeType === "varDecl");
        const node: Expr = {
          type: "AggregateOver",
          fn: lower as "sum" | "average" | "min" | "max",
          bindings: this.bindings(params, hasValue ? 1 : 0, pp),
        };
        if (hasValue) node.value = this.expr(params[0], at(0));
        return node;
      }
      case "let": {
        const decl = params[0] as Json;
        const variable = this.ident(decl.varName, sub(at(0), "varName"), "varName");
        if (decl.condition !== undefined) bad(sub(at(0), "condition"), "a let binding has no condition");
        return {
          type: "Let",
          variable,
          value: this.expr(decl.range, sub(at(0), "range")),
          body: this.expr(params[1], at(1)),
        };
      }
    }
    // A call: built-in names are canonicalised, others kept as written.
    const chosen = form ?? defaultCallForm({ fnName: v.fnName, params });
    if (!IDENT.test(v.fnName)) bad(sub(path, "fnName"), `unknown operator or function ${JSON.stringify(v.fnName)}`);
    if (chosen === "method") {
      if (params.length === 0) bad(pp, `the method '${v.fnName}' needs its receiver as the first param`);
      const name = canonicalName(v.fnName, "method");
      return {
        type: "Method",
        receiver: this.expr(params[0], at(0)),
        name,
        args: params.slice(1).map((p, i) => this.expr(p, at(i + 1))),
      };
    }
    return { type: "Call", name: canonicalName(v.fnName, "function"), args: params.map((p, i) => this.expr(p, at(i))) };
  }

  /**
   * A binary operator node, walking nested left operands iteratively: legacy
   * writers nest `and`/`or` instead of using n-ary nodes, and such spines can
   * be as long as the query.
   */
  private binaryChain(v: Json, path: Path | undefined): Expr {
    const frames: { node: Json; path: Path | undefined }[] = [];
    let cur: unknown = v;
    let curPath = path;
    while (
      isObj(cur) &&
      cur.nodeType === "fnApply" &&
      cur.form === undefined &&
      typeof cur.fnName === "string" &&
      Array.isArray(cur.params) &&
      structuralReading(cur.fnName.toLowerCase(), cur.params) === "binary"
    ) {
      frames.push({ node: cur, path: curPath });
      curPath = sub(sub(curPath, "params"), 0);
      cur = cur.params[0];
    }
    let acc = this.expr(cur, curPath);
    for (let f = frames.length - 1; f >= 0; f--) {
      const { node, path: fp } = frames[f]!;
      const lower = (node.fnName as string).toLowerCase();
      const op = BINARY_OPS.get(lower)!;
      const params = node.params as unknown[];
      if (params.length > 2 && !LEFT_ASSOC.has(lower)) {
        bad(sub(fp, "params"), `'${node.fnName as string}' takes exactly two params`);
      }
      for (let i = 1; i < params.length; i++) {
        acc = { type: "Binary", op, left: acc, right: this.expr(params[i], sub(sub(fp, "params"), i)) };
      }
    }
    return acc;
  }

  private stringParam(v: unknown, path: Path, what: string): string {
    const e = this.expr(v, path);
    if (e.type !== "Literal" || e.kind !== "string") bad(path, `expected ${what} as a String literal`);
    return e.value as string;
  }

  private intParam(v: unknown, path: Path, what: string): number {
    const e = this.expr(v, path);
    if (e.type !== "Literal" || e.kind !== "integer") bad(path, `expected ${what} as an Integer literal`);
    return e.value as number;
  }

  private unitParam(v: unknown, path: Path): TimeUnit {
    const s = this.stringParam(v, path, "a time unit").toLowerCase();
    if (!(TIME_UNITS as readonly string[]).includes(s)) bad(path, `unknown time unit ${JSON.stringify(s)}`);
    return s as TimeUnit;
  }

  /** An occurs tail from params[from…]. */
  private tail(params: unknown[], from: number, pp: Path): OccursTail {
    const n = params.length - from;
    const at = (i: number) => sub(pp, from + i);
    const firstStr = literalString(params[from])?.toLowerCase();
    if (n === 5) {
      const op = this.stringParam(params[from], at(0), "a comparison");
      if (!["=", "!=", "<", "<=", ">", ">="].includes(op)) bad(at(0), `unknown comparison ${JSON.stringify(op)}`);
      const amount = this.intParam(params[from + 1], at(1), "the amount");
      if (amount < 0) bad(at(1), "the amount must not be negative");
      const unit = this.unitParam(params[from + 2], at(2));
      const direction = this.stringParam(params[from + 3], at(3), "a direction").toLowerCase();
      if (!DIRECTION_NAMES.has(direction)) bad(at(3), "the direction must be before, after or from");
      return {
        kind: "relative",
        op: op as CmpOp,
        amount,
        unit,
        direction: direction as "before" | "after" | "from",
        ref: this.timeRef(params[from + 4], at(4)),
      };
    }
    if (n === 3 && firstStr === "between") {
      return { kind: "between", from: this.timeRef(params[from + 1], at(1)), to: this.timeRef(params[from + 2], at(2)) };
    }
    if (n === 2 && firstStr !== undefined && DIRECTION_NAMES.has(firstStr)) {
      return {
        kind: "direction",
        direction: firstStr as "before" | "after" | "from",
        ref: this.timeRef(params[from + 1], at(1)),
      };
    }
    if (n === 1) return { kind: "on", ref: this.timeRef(params[from], at(0)) };
    return bad(pp, "unrecognised occurs time condition (see the encoding in pqljson.ts)");
  }

  private timeRef(v: unknown, path: Path): TimeRef {
    return this.expr(v, path);
  }

  private chain(params: unknown[], pp: Path): Expr {
    if (params.length < 3) bad(pp, "chain needs [source, timestamp field, step, ...]");
    const source = this.expr(params[0], sub(pp, 0));
    const ts = this.stringParam(params[1], sub(pp, 1), "the timestamp field name");
    if (!IDENT.test(ts)) bad(sub(pp, 1), "the timestamp field must be an identifier");
    const steps: ChainStep[] = [];
    for (let i = 2; i < params.length; i++) steps.push(this.step(params[i], sub(pp, i)));
    return { type: "Chain", source, timestampField: ts, steps };
  }

  private step(v: unknown, path: Path): ChainStep {
    if (!isObj(v) || v.nodeType !== "fnApply" || typeof v.fnName !== "string" || v.fnName.toLowerCase() !== "step") {
      bad(path, 'expected a chain step fnApply{fnName: "step"}');
    }
    const params = this.params(v, path);
    const pp = sub(path, "params");
    if (params.length < 2) bad(pp, "a step needs [label, what, clauses...]");
    const label = this.stringParam(params[0], sub(pp, 0), "the step label");
    if (!IDENT.test(label)) bad(sub(pp, 0), "the step label must be an identifier");
    const step: ChainStep = { label, what: this.expr(params[1], sub(pp, 1)) };
    for (let i = 2; i < params.length; i++) {
      const cp = sub(pp, i);
      const c = params[i];
      if (!isObj(c) || c.nodeType !== "fnApply" || typeof c.fnName !== "string") bad(cp, "expected a WHEN, COUNT or WHERE clause");
      const cparams = this.params(c, cp);
      const cpp = sub(cp, "params");
      switch (c.fnName.toLowerCase()) {
        case "when":
          if (step.when) bad(cp, "duplicate WHEN clause");
          step.when = this.tail(cparams, 0, cpp);
          break;
        case "count": {
          if (step.count !== undefined) bad(cp, "duplicate COUNT clause");
          if (cparams.length !== 1) bad(cpp, "COUNT takes one Integer");
          const n = this.intParam(cparams[0], sub(cpp, 0), "the count");
          if (n < 1) bad(sub(cpp, 0), "COUNT must be a positive integer");
          step.count = n;
          break;
        }
        case "where":
          if (step.where) bad(cp, "duplicate WHERE clause");
          if (cparams.length !== 1) bad(cpp, "WHERE takes one condition");
          step.where = this.expr(cparams[0], sub(cpp, 0));
          break;
        default:
          bad(sub(cp, "fnName"), "expected a WHEN, COUNT or WHERE clause");
      }
    }
    return step;
  }

  private bindings(params: unknown[], from: number, pp: Path): Binding[] {
    const out: Binding[] = [];
    for (let i = from; i < params.length; i++) {
      const bp = sub(pp, i);
      const d = params[i] as Json;
      const b: Binding = {
        variable: this.ident(d.varName, sub(bp, "varName"), "varName"),
        source: this.expr(d.range, sub(bp, "range")),
      };
      if (d.condition !== undefined) b.condition = this.expr(d.condition, sub(bp, "condition"));
      out.push(b);
    }
    return out;
  }
}
