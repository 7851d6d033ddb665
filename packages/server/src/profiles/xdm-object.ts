// Small helpers over plain JSON objects (XDM records): type guards, deep merge
// and dotted-path access. Used by validation, merging and hygiene field updates.
import type { JsonObject, JsonValue } from "./types.js";

export function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Overlays `top` onto `base` and returns a new object: nested objects merge key by
 * key, anything else (arrays included) is replaced whole. Arrays are replaced, not
 * concatenated, because XDM arrays (productListItems, addresses) are values of one
 * fragment; concatenating them across fragments would duplicate entries.
 *
 * Iterative (an explicit work list, not recursion): a stored body nested thousands of
 * levels deep once overflowed the stack here and took the profile store's worker down.
 */
export function deepMerge(base: JsonObject, top: JsonObject): JsonObject {
  const root: JsonObject = { ...base };
  // Each entry: an output object (a copy of its base) still to overlay with `top`.
  const work: Array<{ out: JsonObject; top: JsonObject }> = [{ out: root, top }];
  for (let w = work.pop(); w !== undefined; w = work.pop()) {
    const { out } = w;
    for (const [k, v] of Object.entries(w.top)) {
      const prev = out[k];
      if (isPlainObject(prev) && isPlainObject(v)) {
        const child: JsonObject = { ...prev };
        out[k] = child;
        work.push({ out: child, top: v });
      } else {
        out[k] = v;
      }
    }
  }
  return root;
}

export function splitPath(path: string): string[] {
  return path.split(".").filter((p) => p.length > 0);
}

export function getPath(obj: JsonObject, path: string): JsonValue | undefined {
  let cur: JsonValue | undefined = obj;
  for (const part of splitPath(path)) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}

/** Sets `path` to `value`, creating intermediate objects. Returns a new object. */
export function setPath(obj: JsonObject, path: string, value: JsonValue): JsonObject {
  const parts = splitPath(path);
  if (parts.length === 0) return obj;
  const [head, ...rest] = parts as [string, ...string[]];
  if (rest.length === 0) return { ...obj, [head]: value };
  const child = obj[head];
  return { ...obj, [head]: setPath(isPlainObject(child) ? child : {}, rest.join("."), value) };
}

/** Removes `path`; returns the same object when nothing was there. */
export function removePath(obj: JsonObject, path: string): JsonObject {
  const parts = splitPath(path);
  if (parts.length === 0) return obj;
  const [head, ...rest] = parts as [string, ...string[]];
  if (!(head in obj)) return obj;
  if (rest.length === 0) {
    const out = { ...obj };
    delete out[head];
    return out;
  }
  const child = obj[head];
  if (!isPlainObject(child)) return obj;
  const next = removePath(child, rest.join("."));
  return next === child ? obj : { ...obj, [head]: next };
}
