// Reads the records of an uploaded batch file from a stream, one at a time, so
// that memory held is one record's text, never the file. NDJSON is split into
// lines; a JSON-array file is split into its elements by a small scanner that
// tracks only nesting and strings (each element is then parsed alone). A
// record's text longer than `maxRecordChars` is never held: it is skipped to its
// end and reported as too large. Errors keep the codes and messages of
// record-files.ts (MALFORMED_JSON with the line number, MALFORMED_FILE).
import { StringDecoder } from "node:string_decoder";
import { RECORD_LIMITS, textNestsDeeperThan } from "../platform/limits.js";
import { FILE_ERROR_CODES, type RecordFileFormat } from "./record-files.js";
import type { RecordError } from "./types.js";
import { ERROR_CODES } from "./validate.js";

/** A parsed record (`chars`: the length of its text, for chunking by size) or a record's error. */
export type StreamItem = { index: number; value: unknown; chars?: number } | { index: number; error: RecordError };

export interface RecordStreamOptions {
  /** Longest record text held, UTF-16 code units (a longer one is reported, not read). */
  maxRecordChars: number;
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const isWs = (c: number) => c === 32 || c === 10 || c === 13 || c === 9;

/** Thrown (as the generator's error) when a JSON-array file breaks the array's structure. */
export class MalformedFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MalformedFileError";
  }
}

/** The file-level error reported for a JSON file that cannot be read. */
export function malformedFile(message: string): RecordError {
  return { index: -1, code: FILE_ERROR_CODES.malformedFile, message: `file is not valid JSON: ${message}` };
}

/** Parses one record's text; a text nesting deeper than a record may is refused unparsed (parsing it costs ~1 µs a level). */
function parseRecord(text: string, index: number, where: () => string): StreamItem {
  if (textNestsDeeperThan(text, RECORD_LIMITS.maxDepth)) {
    return { index, error: { index, code: ERROR_CODES.tooDeep, message: `record ${index} (${where()}) nests deeper than the limit of ${RECORD_LIMITS.maxDepth} levels` } };
  }
  try {
    return { index, value: JSON.parse(text), chars: text.length };
  } catch (e) {
    return { index, error: { index, code: FILE_ERROR_CODES.malformedLine, message: `${where()} is not valid JSON: ${describe(e)}` } };
  }
}

function tooLarge(index: number, where: string, max: number): StreamItem {
  return { index, error: { index, code: ERROR_CODES.tooLarge, message: `record ${index} (${where}) is longer than ${max} characters, over the size limit of a record` } };
}

/** NDJSON: one record per non-blank line, indexed in file order; a malformed line costs only that record. */
export async function* ndjsonRecords(source: AsyncIterable<Buffer | string>, opts: RecordStreamOptions): AsyncGenerator<StreamItem> {
  const decoder = new StringDecoder("utf8");
  let parts: string[] = [];
  let held = 0;
  let oversized = false;
  let lineNo = 0;
  let index = 0;
  function* finishLine(): Generator<StreamItem> {
    lineNo++;
    if (oversized) {
      yield tooLarge(index, `line ${lineNo}`, opts.maxRecordChars);
      index++;
    } else {
      const line = (parts.length === 1 ? parts[0]! : parts.join("")).trim();
      if (line !== "") {
        const n = lineNo;
        yield parseRecord(line, index, () => `line ${n}`);
        index++;
      }
    }
    parts = [];
    held = 0;
    oversized = false;
  }
  const take = function* (text: string): Generator<StreamItem> {
    let from = 0;
    for (;;) {
      const nl = text.indexOf("\n", from);
      const piece = nl < 0 ? text.slice(from) : text.slice(from, nl);
      if (!oversized && piece !== "") {
        held += piece.length;
        if (held > opts.maxRecordChars) {
          oversized = true;
          parts = [];
        } else parts.push(piece);
      }
      if (nl < 0) return;
      yield* finishLine();
      from = nl + 1;
    }
  };
  for await (const chunk of source) yield* take(typeof chunk === "string" ? chunk : decoder.write(chunk));
  yield* take(decoder.end());
  if (held > 0 || oversized) yield* finishLine();
}

type ArrayPhase = "start" | "first" | "afterComma" | "inElement" | "afterElement" | "end";

/**
 * A JSON-array file: its elements, each parsed alone. A break of the array's own
 * structure (no leading "[", a missing comma, text after "]", an unterminated
 * array) throws MalformedFileError; an element that does not parse yields a
 * MALFORMED_FILE item (the caller decides: the whole file is refused).
 */
export async function* jsonArrayRecords(source: AsyncIterable<Buffer | string>, opts: RecordStreamOptions): AsyncGenerator<StreamItem> {
  const decoder = new StringDecoder("utf8");
  let phase: ArrayPhase = "start";
  let depth = 0;
  let inString = false;
  let escaped = false;
  let parts: string[] = [];
  let held = 0;
  let oversized = false;
  let index = 0;
  let offset = 0; // characters before the current chunk, for messages
  const finishElement = (): StreamItem => {
    const item = oversized ? tooLarge(index, `element ${index}`, opts.maxRecordChars) : elementItem(parts.join(""), index);
    parts = [];
    held = 0;
    oversized = false;
    depth = 0;
    index++;
    return item;
  };
  const hold = (text: string) => {
    if (oversized || text === "") return;
    held += text.length;
    if (held > opts.maxRecordChars) {
      oversized = true;
      parts = [];
    } else parts.push(text);
  };
  function* take(text: string): Generator<StreamItem> {
    let start = -1; // where the current element's text begins in this chunk
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (phase === "inElement") {
        if (inString) {
          if (escaped) escaped = false;
          else if (c === 92 /* \ */) escaped = true;
          else if (c === 34 /* " */) inString = false;
          continue;
        }
        if (c === 34) inString = true;
        else if (c === 123 || c === 91) depth++;
        else if ((c === 125 || c === 93) && depth > 0) depth--;
        else if (depth === 0 && (c === 44 /* , */ || c === 93 /* ] */ || c === 125 || isWs(c))) {
          hold(text.slice(start < 0 ? 0 : start, i));
          start = -1;
          yield finishElement();
          phase = "afterElement";
          // The character that ended the element is read again as what follows it.
        } else continue;
        if (phase === "inElement") continue;
      }
      if (isWs(c)) continue;
      const at = () => `unexpected ${JSON.stringify(text[i])} at position ${offset + i}`;
      switch (phase) {
        case "start":
          if (c !== 91) throw new MalformedFileError(at());
          phase = "first";
          break;
        case "first":
        case "afterComma":
          if (c === 93 && phase === "first") {
            phase = "end";
            break;
          }
          if (c === 44 || c === 93 || c === 125) throw new MalformedFileError(at());
          phase = "inElement";
          start = i;
          depth = 0;
          i--; // the first character is scanned as part of the element
          break;
        case "afterElement":
          if (c === 44) phase = "afterComma";
          else if (c === 93) phase = "end";
          else throw new MalformedFileError(at());
          break;
        default: // "end"
          throw new MalformedFileError(at());
      }
    }
    if (phase === "inElement") hold(text.slice(start < 0 ? 0 : start));
    offset += text.length;
  }
  for await (const chunk of source) yield* take(typeof chunk === "string" ? chunk : decoder.write(chunk));
  yield* take(decoder.end());
  if ((phase as ArrayPhase) !== "end") throw new MalformedFileError("Unexpected end of JSON input"); // (set in take)
}

function elementItem(text: string, index: number): StreamItem {
  const item = parseRecord(text, index, () => `element ${index}`);
  if ("error" in item && item.error.code === FILE_ERROR_CODES.malformedLine) {
    // In a JSON file one bad element makes the file unreadable, as JSON.parse of the whole would.
    return { index, error: malformedFile(item.error.message.replace(/^element \d+ is not valid JSON: /, "")) };
  }
  return item;
}

/** The records of a file in `format`. */
export function recordStream(source: AsyncIterable<Buffer | string>, format: RecordFileFormat, opts: RecordStreamOptions): AsyncGenerator<StreamItem> {
  return format === "json" ? jsonArrayRecords(source, opts) : ndjsonRecords(source, opts);
}
