/** Query → pql/json (pqljson.ts describes the mapping). */
import type { Binding, ChainStep, Expr, OccursTail, Query } from "./ast.js";
import { parse } from "./parser.js";
import { defaultCallForm } from "./pqljson-read.js";
import { LEFT_ASSOC, type FnApply, type PqlJsonNode } from "./pqljson-nodes.js";

// ------------------------------------------------------------------ writing

/** pql/json for a query given as text or as a tree. */
export function toPqlJson(query: string | Query): PqlJsonNode {
  const q = typeof query === "string" ? parse(query) : query;
  const body = enc(q.body);
  if (q.params.length === 0) return body;
  return { nodeType: "fnCreate", params: q.params.map((varName) => ({ varName })), body };
}

const str = (value: string): PqlJsonNode => ({ nodeType: "literal", literalType: "String", value });
const int = (value: number): PqlJsonNode => ({ nodeType: "literal", literalType: "Integer", value });

function fn(fnName: string, params: PqlJsonNode[]): FnApply {
  return { nodeType: "fnApply", fnName, params };
}

/** A method or function call, with `form` when the reader would otherwise take it for something else. */
function call(name: string, params: PqlJsonNode[], form: "method" | "function"): FnApply {
  const node = fn(name, params);
  if (defaultCallForm(node) !== form) node.form = form;
  return node;
}

function enc(e: Expr): PqlJsonNode {
  switch (e.type) {
    case "Literal":
      switch (e.kind) {
        case "string":
          return str(e.value as string);
        case "integer":
          return int(e.value as number);
        case "double":
          return { nodeType: "literal", literalType: "Double", value: e.value as number };
        case "boolean":
          return { nodeType: "literal", literalType: "Boolean", value: e.value as boolean };
      }
      break;
    case "List": {
      const raw = e.elements.every((x) => x.type === "Literal" && x.kind !== "double");
      return {
        nodeType: "literal",
        literalType: "List",
        value: e.elements.map((x) => (raw && x.type === "Literal" ? x.value : enc(x))),
      };
    }
    case "Object":
      return fn(
        "{}",
        e.entries.flatMap((en) => [str(en.key), enc(en.value)]),
      );
    case "Field":
      return { nodeType: "fieldLookup", fieldName: e.name };
    case "Member":
      return { nodeType: "fieldLookup", fieldName: e.name, object: enc(e.object) };
    case "Var":
      return { nodeType: "varRef", varName: e.name };
    case "XEvent":
      return { nodeType: "varRef", varName: "xEvent" };
    case "Param":
      return { nodeType: "parameterReference", position: e.index };
    case "Up":
      return fn("^", [int(e.levels), str(e.name)]);
    case "TimeWord":
      return fn(e.word, []);
    case "RelPeriod":
      return fn(e.which, [str(e.unit)]);
    case "Binary":
      return encBinary(e);
    case "Not":
      return fn("not", [enc(e.operand)]);
    case "Negate":
      return fn("-", [enc(e.operand)]);
    case "Method":
      return call(e.name, [enc(e.receiver), ...e.args.map(enc)], "method");
    case "Call":
      return call(e.name, e.args.map(enc), "function");
    case "Filter":
      return fn("[]", [enc(e.object), enc(e.condition)]);
    case "Occurs":
      return fn("occurs", [enc(e.subject), ...encTail(e.tail)]);
    case "Chain":
      return fn("chain", [enc(e.source), str(e.timestampField), ...e.steps.map(encStep)]);
    case "Select":
      return fn("select", e.bindings.map(encBinding));
    case "Quantifier":
      return fn(e.quantifier, e.bindings.map(encBinding));
    case "AggregateOver":
      return fn(e.fn, [...(e.value ? [enc(e.value)] : []), ...e.bindings.map(encBinding)]);
    case "Let":
      return fn("let", [{ nodeType: "varDecl", varName: e.variable, range: enc(e.value) }, enc(e.body)]);
    case "Lambda":
      return { nodeType: "fnCreate", params: e.params.map((varName) => ({ varName })), body: enc(e.body) };
  }
  throw new Error("unreachable");
}

/** Left spines are walked iteratively; runs of one left-associative operator become one n-ary node. */
function encBinary(e: Expr & { type: "Binary" }): PqlJsonNode {
  const spine: (Expr & { type: "Binary" })[] = [];
  let left: Expr = e;
  while (left.type === "Binary") {
    spine.push(left);
    left = left.left;
  }
  let acc = enc(left);
  let accOp: string | undefined;
  for (let i = spine.length - 1; i >= 0; i--) {
    const b = spine[i]!;
    const right = enc(b.right);
    if (accOp === b.op && LEFT_ASSOC.has(b.op) && acc.nodeType === "fnApply") {
      acc.params.push(right);
    } else {
      acc = fn(b.op, [acc, right]);
      accOp = b.op;
    }
  }
  return acc;
}

function encTail(t: OccursTail): PqlJsonNode[] {
  switch (t.kind) {
    case "relative":
      return [str(t.op), int(t.amount), str(t.unit), str(t.direction), enc(t.ref)];
    case "direction":
      return [str(t.direction), enc(t.ref)];
    case "between":
      return [str("between"), enc(t.from), enc(t.to)];
    case "on":
      return [enc(t.ref)];
  }
}

function encStep(s: ChainStep): PqlJsonNode {
  const params: PqlJsonNode[] = [str(s.label), enc(s.what)];
  if (s.when) params.push(fn("WHEN", encTail(s.when)));
  if (s.count !== undefined) params.push(fn("COUNT", [int(s.count)]));
  if (s.where) params.push(fn("WHERE", [enc(s.where)]));
  return fn("step", params);
}

function encBinding(b: Binding): PqlJsonNode {
  const node: PqlJsonNode = { nodeType: "varDecl", varName: b.variable, range: enc(b.source) };
  if (b.condition) node.condition = enc(b.condition);
  return node;
}
