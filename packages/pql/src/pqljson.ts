/**
 * pql/json (pql.md §9): the tree form of PQL used by Adobe's conversion and
 * sources APIs, and its mapping to and from our AST.
 *
 * Adobe documents only six node types (fnApply, fieldLookup, literal,
 * parameterReference, varRef, varDecl, fnCreate) and the names of a few
 * operators (OQ-27). Everything else is our encoding, chosen so that
 * `fromPqlJson(toPqlJson(q))` is structurally equal to `q` for every query:
 *
 *   construct                 encoding
 *   ------------------------- -----------------------------------------------------------------
 *   literal                   literal{literalType: String|Integer|Double|Boolean, value}
 *   [a, b]                    literal{literalType: List, value: [...]}; items are raw JSON values
 *                             when all are string/integer/boolean literals, else nodes
 *   {"k": v}                  fnApply{fnName: "{}", params: [String key, v, String key, v, ...]}
 *   field (implicit context)  fieldLookup{fieldName}                  (no `object`)
 *   a.b                       fieldLookup{fieldName: "b", object: <a>}
 *   $n                        parameterReference{position: n}
 *   variable                  varRef{varName}
 *   xEvent                    varRef{varName: "xEvent"}
 *   ^name, ^^name             fnApply{fnName: "^", params: [Integer levels, String name]}
 *   now/today/...             fnApply{fnName: "now"|"today"|"yesterday"|"tomorrow", params: []}
 *   this/last/next U          fnApply{fnName: "this"|"last"|"next", params: [String unit]}
 *   a op b                    fnApply{fnName: op, params: [a, b]}  op: and or = != < <= > >= +
 *                             - * / % in notIn like matches. A chain of one left-associative
 *                             operator is written n-ary ([a, b, c] = (a op b) op c), as Adobe
 *                             writes `and`, which keeps 50,000-term `or`s shallow.
 *   not a                     fnApply{fnName: "not", params: [a]}
 *   -a                        fnApply{fnName: "-", params: [a]}
 *   recv.m(args)              fnApply{fnName: m, params: [recv, ...args]}            (R) §9.2
 *   f(args)                   fnApply{fnName: f, params: [...args]}
 *   a[cond]                   fnApply{fnName: "[]", params: [a, cond]}
 *   s occurs TAIL             fnApply{fnName: "occurs", params: [s, ...TAIL]} where TAIL is
 *                               [String op, Integer n, String unit, String direction, ref]
 *                               [String direction, ref]          (before/after/from)
 *                               [String "between", from, to]
 *                               [ref]                             (on)
 *   chain(src, ts, steps)     fnApply{fnName: "chain", params: [src, String ts, step, ...]}
 *     step                    fnApply{fnName: "step", params: [String label, what, clause...]}
 *     clauses                 fnApply{fnName: "WHEN", params: TAIL} / "COUNT" [Integer] /
 *                             "WHERE" [cond]
 *   select/exists/forall      fnApply{fnName: "select"|"exists"|"forall", params: [varDecl...]}
 *     binding                 varDecl{varName, range: source, condition?: cond}
 *   sum/average/min/max over  fnApply{fnName: fn, params: [value?, varDecl...]}
 *   let V = a in b            fnApply{fnName: "let", params: [varDecl{varName: V, range: a}, b]}
 *   lambda / query head       fnCreate{params: [{varName}], body}
 *
 * A name can mean several things (`exists` is a quantifier and a method,
 * `matches` an operator and a method, `last` a period word and maybe a
 * user method): the reader decides from the name and the shape of the
 * params, and when that default would be wrong the writer adds
 * `form: "method" | "function"` to the fnApply, which the reader obeys.
 *
 * Reading is tolerant (pql.md §9.2): fnName and literalType are matched
 * case-insensitively (`NOT`, `AND`, `string`), `!` is `not`, integers may be
 * given as strings (`"6"`), literals may lack a literalType, raw JSON values
 * may stand for literals, and the legacy roots literal{literalType:
 * "XDMObject", value: "profile"} and varRef{varName: "_"} are read as the
 * profile, i.e. `$1` (parameterReference{position: 1}). Any malformed input
 * throws PqlError PQL_JSON_INVALID naming the JSON path of the bad node.
 */
export { toPqlJson } from "./pqljson-write.js";
export { fromPqlJson } from "./pqljson-read.js";
export { MAX_JSON_NESTING } from "./pqljson-nodes.js";
export type { PqlJsonNode, PqlJsonValue } from "./pqljson-nodes.js";
