/**
 * RFC 6902 JSON Patch (add, remove, replace, move, copy, test) over plain JSON
 * values. Applied to a copy: the input is never modified, so a failing
 * operation leaves nothing half-applied.
 */

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

type Container = JsonValue[] | { [k: string]: JsonValue };

/**
 * Own properties only: a path segment like `__proto__` or `constructor` must
 * never reach Object.prototype (prototype pollution).
 */
function child(cur: JsonValue, token: string): JsonValue | undefined {
  if (Array.isArray(cur)) return /^(0|[1-9]\d*)$/.test(token) ? cur[Number(token)] : undefined;
  if (isContainer(cur) && Object.hasOwn(cur, token)) return cur[token];
  return undefined;
}

function setOwn(obj: { [k: string]: JsonValue }, key: string, value: JsonValue): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

function isContainer(v: JsonValue | undefined): v is Container {
  return typeof v === "object" && v !== null;
}

function parentOf(doc: JsonValue, tokens: string[], path: string): { parent: Container; key: string } {
  let cur: JsonValue = doc;
  for (const t of tokens.slice(0, -1)) {
    const next = child(cur, t);
    if (!isContainer(next)) throw new Error(`path "${path}" does not exist`);
    cur = next;
  }
  if (!isContainer(cur)) throw new Error(`path "${path}" does not exist`);
  return { parent: cur, key: tokens[tokens.length - 1]! };
}

function arrayIndex(arr: JsonValue[], key: string, path: string, forAdd: boolean): number {
  if (forAdd && key === "-") return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(key)) throw new Error(`"${key}" is not an array index in "${path}"`);
  const i = Number(key);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new Error(`index ${i} is out of range in "${path}"`);
  return i;
}

function get(doc: JsonValue, path: string): JsonValue {
  let cur: JsonValue = doc;
  for (const t of parsePointer(path)) {
    const next = child(cur, t);
    if (next === undefined) throw new Error(`path "${path}" does not exist`);
    cur = next;
  }
  return cur;
}

function add(doc: JsonValue, path: string, value: JsonValue): JsonValue {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return value;
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, path, true), 0, value);
  else setOwn(parent, key, value);
  return doc;
}

function remove(doc: JsonValue, path: string): JsonValue {
  const tokens = parsePointer(path);
  if (tokens.length === 0) throw new Error("cannot remove the whole document");
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, path, false), 1);
  else {
    if (!Object.hasOwn(parent, key)) throw new Error(`path "${path}" does not exist`);
    delete parent[key];
  }
  return doc;
}

function deepEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]!));
  if (isContainer(a) && isContainer(b) && !Array.isArray(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual((a as Record<string, JsonValue>)[k]!, b[k]!));
  }
  return false;
}

export function applyPatch(input: JsonValue, ops: readonly PatchOperation[]): JsonValue {
  let doc = structuredClone(input);
  ops.forEach((op, i) => {
    try {
      switch (op.op) {
        case "add":
          if (op.value === undefined) throw new Error('"value" is required');
          doc = add(doc, op.path, structuredClone(op.value));
          break;
        case "remove":
          doc = remove(doc, op.path);
          break;
        case "replace":
          if (op.value === undefined) throw new Error('"value" is required');
          get(doc, op.path);
          doc = add(remove(doc, op.path), op.path, structuredClone(op.value));
          break;
        case "move": {
          if (op.from === undefined) throw new Error('"from" is required');
          if (op.path.startsWith(op.from + "/")) throw new Error("cannot move a value into itself");
          const v = get(doc, op.from);
          doc = add(remove(doc, op.from), op.path, v);
          break;
        }
        case "copy": {
          if (op.from === undefined) throw new Error('"from" is required');
          doc = add(doc, op.path, structuredClone(get(doc, op.from)));
          break;
        }
        case "test":
          if (op.value === undefined) throw new Error('"value" is required');
          if (!deepEqual(get(doc, op.path), op.value)) throw new Error(`test failed: the value at "${op.path}" differs`);
          break;
        default:
          throw new Error(`unknown op "${String((op as { op: unknown }).op)}"`);
      }
    } catch (err) {
      if (err instanceof JsonPatchError) throw err;
      throw new JsonPatchError(i, (err as Error).message);
    }
  });
  return doc;
}
