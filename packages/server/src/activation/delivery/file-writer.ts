// Writing export files: one part file at a time, streamed (optionally through gzip) into a
// temporary `.partial` name, its bytes counted and hashed (sha256 of the bytes on disk), fsynced,
// then renamed to its final name — a crash leaves a `.partial` file that no manifest lists.
// Also the row formats (NDJSON, CSV) and the directory layout
// <dataDir>/exports/<org>/<sandbox>/<flow>/<run>/.
import { createHash, type Hash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir, open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { TenantScope } from "../types.js";

/** A file name the API serves: letters, digits, `.`, `_`, `-`, not starting with a dot. */
export const FILE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$/;

export function isSafeFileName(name: string): boolean {
  return FILE_NAME.test(name) && !name.includes("..");
}

/** A path segment from an id: kept when it is already safe, else a hash (never `..`, `/` or a leading dot). */
export function safeSegment(id: string): string {
  if (/^[A-Za-z0-9@_-][A-Za-z0-9@._-]{0,127}$/.test(id) && !id.includes("..")) return id;
  return `h-${createHash("sha256").update(id).digest("hex").slice(0, 32)}`;
}

export function flowExportDir(dataDir: string, scope: TenantScope, flowId: string): string {
  return path.join(dataDir, "exports", safeSegment(scope.orgId), safeSegment(scope.sandboxName), safeSegment(flowId));
}

export function runExportDir(dataDir: string, scope: TenantScope, flowId: string, runId: string): string {
  return path.join(flowExportDir(dataDir, scope, flowId), safeSegment(runId));
}

export interface WrittenFile {
  name: string;
  bytes: number;
  sha256: string;
}

/** One part file being written. `write` respects backpressure; `finish` makes it durable under its final name. */
export class PartWriter {
  private readonly head: Transform;
  private readonly done: Promise<void>;
  private readonly hash: Hash = createHash("sha256");
  private bytes = 0;
  private failed: unknown = null;
  readonly tmp: string;

  constructor(readonly dir: string, readonly name: string, gzip: boolean) {
    this.tmp = path.join(dir, `.${name}.partial`);
    const counter = new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        this.hash.update(chunk);
        this.bytes += chunk.length;
        cb(null, chunk);
      },
    });
    const out = createWriteStream(this.tmp, { flags: "wx" });
    this.head = gzip ? createGzip({ level: 6 }) : new Transform({ transform: (c, _e, cb) => cb(null, c) });
    this.done = pipeline(this.head, counter, out);
    this.done.catch((err: unknown) => {
      this.failed = err;
    });
  }

  async write(text: string): Promise<void> {
    if (this.failed !== null) throw this.failed;
    // `once` rejects when the stream errors (pipeline destroys every stage on a failure).
    if (!this.head.write(text)) await once(this.head, "drain");
  }

  async finish(): Promise<WrittenFile> {
    this.head.end();
    await this.done;
    await fsyncPath(this.tmp);
    await rename(this.tmp, path.join(this.dir, this.name));
    return { name: this.name, bytes: this.bytes, sha256: this.hash.digest("hex") };
  }

  /** Drops the temporary file (a failed run). */
  async abort(): Promise<void> {
    this.head.destroy();
    await this.done.catch(() => undefined);
    await rm(this.tmp, { force: true });
  }
}

export async function fsyncPath(p: string): Promise<void> {
  const fh = await open(p, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes a small file (the manifest) through a temporary name, fsynced, then renamed; the directory too. */
export async function writeFileAtomic(dir: string, name: string, text: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const tmp = path.join(dir, `.${name}.partial`);
  const fh = await open(tmp, "w");
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path.join(dir, name));
  await fsyncPath(dir);
}

// ---- row formats -----------------------------------------------------------------------

/** The fixed CSV columns; then one per selected attribute, then the identities. */
export function csvHeader(attributes: readonly string[], namespaces: readonly string[], incremental: boolean): string[] {
  return ["profileId", "audienceId", "status", "lastQualificationTime", ...(incremental ? ["seqs"] : []), ...attributes,
    ...(namespaces.length > 0 ? namespaces.map((n) => `identityMap.${n}`) : ["identityMap"])];
}

function csvCell(v: unknown): string {
  if (v === undefined || v === null) return "";
  const s = typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : JSON.stringify(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, "\"\"")}"` : s;
}

export function csvLine(cells: readonly unknown[]): string {
  return `${cells.map(csvCell).join(",")}\r\n`;
}

/** Parses CSV text as csvLine writes it (RFC 4180 quoting): the tests and the bench read files back with it. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === "\"" && text[i + 1] === "\"") {
        cell += "\"";
        i++;
      } else if (c === "\"") quoted = false;
      else cell += c;
    } else if (c === "\"") quoted = true;
    else if (c === ",") {
      row.push(cell);
      cell = "";
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
      i++;
    } else cell += c;
  }
  if (cell !== "" || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}

/** Reads a dotted path of an object (undefined when absent). */
export function valueAt(obj: Record<string, unknown>, dotted: string): unknown {
  let v: unknown = obj;
  for (const p of dotted.split(".")) {
    if (v === null || typeof v !== "object" || Array.isArray(v) || !Object.hasOwn(v, p)) return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}
