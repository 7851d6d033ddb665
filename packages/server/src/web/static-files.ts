/**
 * The audience tool's built files (packages/server/static/, written by
 * `npm run build`): which names may be served and with which content type.
 * Only names from a fixed allow-list pattern are looked up, so a request can
 * never reach outside the directory.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** src/web and dist/web are both two levels under packages/server. */
export const DEFAULT_STATIC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "static");

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
};

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/;

export function contentTypeOf(name: string): string | undefined {
  return CONTENT_TYPES[path.extname(name).toLowerCase()];
}

/** The file's bytes and type, or undefined when the name is not servable or the file is absent. */
export async function readStaticFile(dir: string, name: string): Promise<{ body: Buffer; type: string } | undefined> {
  if (!SAFE_NAME.test(name) || name.includes("..")) return undefined;
  const type = contentTypeOf(name);
  if (type === undefined) return undefined;
  try {
    return { body: await readFile(path.join(dir, name)), type };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
