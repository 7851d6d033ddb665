/**
 * RFC 6902 JSON Patch (add, remove, replace, move, copy, test) over plain JSON
 * values, applied by fast-json-patch to a copy: the input is never modified,
 * so a failing operation leaves nothing half-applied.
 *
 * What is ours: the error messages (the API's titles quote them), and a walk
 * over own properties before each operation. fast-json-patch tests a path with
 * `obj[key] === undefined`, so inherited names (`constructor`, `toString`)
 * would count as present (removing `/a/toString` would "succeed" and change
 * nothing), and it refuses `__proto__` with a TypeError of its own wording.
 */
import jsonpatch from "fast-json-patch";
import type { Operation } from "fast-json-patch";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

export interface PatchOperation {
  op: "add" | "remove" | "replace" | "move" | "copy" | "test";
  path: string;
  value?: JsonValue;
  from?: string;
}

export class JsonPatchError extends Error {
  constructor(
    readonly index: number,
    message: string,
  ) {
    super(`operation ${index}: ${message}`);
  }
}

export function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new Error(`"${pointer}" is not a JSON pointer (it must start with "/")`);
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

const INDEX = /^(0|[1-9]\d*)$/;

/**
 * Checks `pointer` against `doc` through own properties only. `whole`: the last
 * token must exist too (remove, replace, test, a move's or copy's `from`);
 * otherwise only its parent must (add).
 */
function checkPath(doc: unknown, pointer: string, whole: boolean, forAdd: boolean): void {
  const tokens = parsePointer(pointer);
  let cur = doc;
  tokens.forEach((token, i) => {
    // The keys that lead to a prototype (as fast-json-patch bans them), refused wherever they stand.
    if (token === "__proto__" || (token === "prototype" && tokens[i - 1] === "constructor")) throw new Error(`path "${pointer}" is refused: "${token}" may not be patched`);
    const last = i === tokens.length - 1;
    if (Array.isArray(cur)) {
      if (last && forAdd && token === "-") return;
      if (!INDEX.test(token)) throw new Error(`"${token}" is not an array index in "${pointer}"`);
      const n = Number(token);
      if (n > cur.length || (n === cur.length && (!last || whole))) throw new Error(`index ${n} is out of range in "${pointer}"`);
      cur = cur[n];
    } else if (typeof cur === "object" && cur !== null && Object.hasOwn(cur, token)) {
      cur = (cur as Record<string, unknown>)[token];
    } else if (!(last && !whole && typeof cur === "object" && cur !== null)) {
      throw new Error(`path "${pointer}" does not exist`);
    }
  });
}

function check(doc: JsonValue, op: PatchOperation): void {
  switch (op.op) {
    case "add":
    case "replace":
    case "test":
      if (op.value === undefined) throw new Error('"value" is required');
      checkPath(doc, op.path, op.op !== "add", op.op === "add");
      break;
    case "remove":
      if (op.path === "") throw new Error("cannot remove the whole document");
      checkPath(doc, op.path, true, false);
      break;
    case "move":
    case "copy":
      if (op.from === undefined) throw new Error('"from" is required');
      checkPath(doc, op.from, true, false);
      if (op.op === "move" && op.path.startsWith(op.from + "/")) throw new Error("cannot move a value into itself");
      checkPath(doc, op.path, false, true);
      break;
    default:
      throw new Error(`unknown op "${String((op as { op: unknown }).op)}"`);
  }
}

export function applyPatch(input: JsonValue, ops: readonly PatchOperation[]): JsonValue {
  let doc = structuredClone(input);
  ops.forEach((op, i) => {
    try {
      check(doc, op);
      // The value is cloned so that a later operation cannot change the caller's object.
      const operation = (op.value === undefined ? op : { ...op, value: structuredClone(op.value) }) as Operation;
      doc = jsonpatch.applyOperation(doc, operation, true, true, true, i).newDocument;
    } catch (err) {
      if (err instanceof JsonPatchError) throw err;
      if (err instanceof jsonpatch.JsonPatchError && err.name === "TEST_OPERATION_FAILED") {
        throw new JsonPatchError(i, `test failed: the value at "${op.path}" differs`);
      }
      // Anything else the library refuses is a path our walk let through: first line only (it appends the document).
      throw new JsonPatchError(i, (err as Error).message.split("\n")[0]!);
    }
  });
  return doc;
}
