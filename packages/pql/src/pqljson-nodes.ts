/** pql/json node shapes and what the writer and the reader share (pqljson.ts describes the format). */

export type PqlJsonValue = string | number | boolean;

export type PqlJsonNode =
  | { nodeType: "fnApply"; fnName: string; params: PqlJsonNode[]; form?: "method" | "function" }
  | { nodeType: "fieldLookup"; fieldName: string; object?: PqlJsonNode }
  | {
      nodeType: "literal";
      literalType: "String" | "Integer" | "Double" | "Boolean" | "List";
      value: PqlJsonValue | (PqlJsonValue | PqlJsonNode)[];
    }
  | { nodeType: "parameterReference"; position: number }
  | { nodeType: "varRef"; varName: string }
  | { nodeType: "varDecl"; varName: string; range: PqlJsonNode; condition?: PqlJsonNode }
  | { nodeType: "fnCreate"; params: { varName: string }[]; body: PqlJsonNode };

export type FnApply = Extract<PqlJsonNode, { nodeType: "fnApply" }>;

/** Deepest non-spine nesting fromPqlJson accepts (the parser's limit is on text; JSON needs more levels per construct). */
export const MAX_JSON_NESTING = 1000;

/** fnApply names whose chains nest to the left (`a and b and c` is and(and(a, b), c)). */
export const LEFT_ASSOC = new Set(["and", "or", "+", "-", "*", "/", "%"]);
