// Parses uploaded batch files. NDJSON is parsed line by line so one malformed
// line costs only that record; a JSON file is one array (or one object) and is
// either readable or not at all.
import type { RecordError } from "./types.js";

export type RecordFileFormat = "json" | "ndjson";

export interface ParsedFile {
  /** Parsed records with their position in the file (0-based record index). */
  records: Array<{ index: number; value: unknown }>;
  errors: RecordError[];
}

export const FILE_ERROR_CODES = { malformedLine: "MALFORMED_JSON", malformedFile: "MALFORMED_FILE" } as const;

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export function parseRecordFile(text: string, format: RecordFileFormat): ParsedFile {
  if (format === "json") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      return { records: [], errors: [{ index: -1, code: FILE_ERROR_CODES.malformedFile, message: `file is not valid JSON: ${describe(e)}` }] };
    }
    const list = Array.isArray(parsed) ? parsed : [parsed];
    return { records: list.map((value, index) => ({ index, value })), errors: [] };
  }
  const records: ParsedFile["records"] = [];
  const errors: RecordError[] = [];
  let index = 0;
  const lines = text.split("\n");
  lines.forEach((raw, lineNo) => {
    const line = raw.trim();
    if (line === "") return;
    try {
      records.push({ index, value: JSON.parse(line) });
    } catch (e) {
      errors.push({ index, code: FILE_ERROR_CODES.malformedLine, message: `line ${lineNo + 1} is not valid JSON: ${describe(e)}` });
    }
    index++;
  });
  return { records, errors };
}

/**
 * Picks the format of an uploaded file: a file whose first non-blank character
 * is "[" is one JSON array; otherwise NDJSON (one record per line), except a
 * file that is exactly one (possibly pretty-printed) JSON object.
 */
export function detectRecordFileFormat(text: string): RecordFileFormat {
  const t = text.trimStart();
  if (t.startsWith("[")) return "json";
  if (t.startsWith("{") && t.trimEnd().includes("\n")) {
    try {
      JSON.parse(t);
      return "json";
    } catch {
      return "ndjson";
    }
  }
  return "ndjson";
}
