// An uploaded batch file is received into a temporary spool file before any of
// it is staged: memory held while receiving is one socket chunk, a client that
// goes away mid-upload leaves nothing in the batch (the spool is deleted), and
// the staging that follows reads the file back as a stream of records.
//
// JSON-array files are streamed too (record-stream.ts splits the elements), in
// two passes over the spool: the first only checks that the whole file reads,
// so that a JSON file is still staged whole or not at all (MALFORMED_FILE), as
// when it was parsed in one piece.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, open, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { RECORD_LIMITS, textNestsDeeperThan } from "../platform/limits.js";
import { detectRecordFileFormat, FILE_ERROR_CODES, parseRecordFile } from "./record-files.js";
import { jsonArrayRecords, MalformedFileError, malformedFile, ndjsonRecords, type RecordStreamOptions, type StreamItem } from "./record-stream.js";
import type { RecordError } from "./types.js";

export class UploadTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`Request body is larger than the limit of ${limit} bytes`);
    this.name = "UploadTooLargeError";
  }
}

export class UploadAbortedError extends Error {
  constructor() {
    super("The upload ended before the whole file arrived; nothing of it was staged");
    this.name = "UploadAbortedError";
  }
}

export interface SpooledFile {
  path: string;
  bytes: number;
}

const SPOOL_PREFIX = "segmentd-upload-";

/** A pretty-printed single JSON object is recognized only up to this size (a record is at most 100 KB). */
export const SINGLE_OBJECT_MAX_BYTES = 1024 * 1024;

/**
 * Runs `fn` with a fresh temporary directory under `dir` (created if missing; default: the
 * OS's temporary directory), removed afterwards whatever happens.
 */
export async function withSpoolDir<T>(dir: string | undefined, fn: (spoolDir: string) => Promise<T>): Promise<T> {
  if (dir !== undefined) await mkdir(dir, { recursive: true });
  const d = await mkdtemp(path.join(dir ?? os.tmpdir(), SPOOL_PREFIX));
  try {
    return await fn(d);
  } finally {
    await rm(d, { recursive: true, force: true });
  }
}

/**
 * Removes the spool directories under `dir` that a process killed mid-upload left behind.
 * For start-up, and only for a directory no other running server spools into.
 */
export async function removeStaleSpools(dir: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return 0;
  }
  const stale = names.filter((n) => n.startsWith(SPOOL_PREFIX));
  await Promise.all(stale.map((n) => rm(path.join(dir, n), { recursive: true, force: true })));
  return stale.length;
}

/**
 * Copies a request body into `file`. Rejects with UploadTooLargeError as soon as it passes
 * `maxBytes` (the rest is not read) and with UploadAbortedError when the client goes away
 * before its end. Backpressure: the body is paused while the file catches up.
 */
export function spoolBody(body: Readable, file: string, maxBytes: number): Promise<SpooledFile> {
  return new Promise((resolve, reject) => {
    if (body.destroyed || body.readableAborted) {
      reject(new UploadAbortedError());
      return;
    }
    const out = createWriteStream(file);
    let bytes = 0;
    let settled = false;
    const detach = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onAbort);
      body.off("close", onClose);
    };
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      detach();
      body.pause();
      out.destroy();
      // The stream's own 'error' after destroy would otherwise be unhandled.
      body.on("error", () => undefined);
      reject(err);
    };
    function onData(chunk: Buffer) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        fail(new UploadTooLargeError(maxBytes));
        return;
      }
      if (!out.write(chunk)) {
        body.pause();
        out.once("drain", () => { if (!settled) body.resume(); });
      }
    }
    function onEnd() {
      if (settled) return;
      detach();
      out.end();
      out.once("close", () => {
        if (settled) return;
        settled = true;
        resolve({ path: file, bytes });
      });
    }
    function onAbort() {
      fail(new UploadAbortedError());
    }
    function onClose() {
      if (!body.readableEnded) fail(new UploadAbortedError());
    }
    out.on("error", (e) => fail(e));
    body.on("data", onData);
    body.on("end", onEnd);
    body.on("error", onAbort);
    body.on("close", onClose);
    body.resume();
  });
}

/** The first character of the file that is not JSON whitespace, or "" (read in small pieces). */
async function firstNonBlank(file: string): Promise<string> {
  const fh = await open(file, "r");
  try {
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) return "";
      for (let i = 0; i < bytesRead; i++) {
        const c = buf[i]!;
        if (c !== 32 && c !== 10 && c !== 13 && c !== 9) return String.fromCharCode(c);
      }
    }
  } finally {
    await fh.close();
  }
}

const readChunks = (file: string) => createReadStream(file, { highWaterMark: 256 * 1024 });

/**
 * The records of a spooled file, as a stream, or the file's one error when it is a JSON
 * file that does not read. The format is that of record-files.ts: a file whose first
 * non-blank character is "[" is one JSON array; a file that is exactly one (possibly
 * pretty-printed) JSON object is one record; anything else is NDJSON.
 */
export async function spooledRecords(file: SpooledFile, opts: RecordStreamOptions): Promise<{ items: Iterable<StreamItem> | AsyncIterable<StreamItem> } | { fileError: RecordError }> {
  const first = await firstNonBlank(file.path);
  if (first === "[") {
    try {
      for await (const item of jsonArrayRecords(readChunks(file.path), opts)) {
        if ("error" in item && item.error.code === FILE_ERROR_CODES.malformedFile) return { fileError: item.error };
      }
    } catch (e) {
      if (e instanceof MalformedFileError) return { fileError: malformedFile(e.message) };
      throw e;
    }
    return { items: jsonArrayRecords(readChunks(file.path), opts) };
  }
  if (first === "{" && file.bytes <= SINGLE_OBJECT_MAX_BYTES) {
    const text = await readFile(file.path, "utf8");
    // A text nesting deeper than a record may is not parsed whole (its lines are reported).
    if (!textNestsDeeperThan(text, RECORD_LIMITS.maxDepth) && detectRecordFileFormat(text) === "json") {
      const parsed = parseRecordFile(text, "json");
      return { items: parsed.records.map((r) => ({ ...r, chars: text.length })) };
    }
  }
  return { items: ndjsonRecords(readChunks(file.path), opts) };
}
