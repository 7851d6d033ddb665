/**
 * Errors and diagnostics with source positions. Lines and columns are
 * 1-based; columns count UTF-16 code units, as editors and JSON bodies do.
 */

export interface Position {
  line: number;
  column: number;
}

export interface Diagnostic {
  severity: "error" | "warning";
  /** Stable machine-readable code, e.g. `PQL_UNKNOWN_FUNCTION`. */
  code: string;
  message: string;
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

/** The position (1-based line and column) of a UTF-16 offset in `text`. */
export function positionAt(text: string, offset: number): Position {
  const clamped = Math.max(0, Math.min(offset, text.length));
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < clamped; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: clamped - lineStart + 1 };
}

/** A syntax (or evaluation-limit) error located in the source text. */
export class PqlError extends Error {
  readonly code: string;
  readonly line: number;
  readonly column: number;
  readonly endLine: number;
  readonly endColumn: number;
  /** Offsets into the source text. */
  readonly start: number;
  readonly end: number;

  constructor(code: string, message: string, text: string, start: number, end: number = start + 1) {
    super(message);
    this.name = "PqlError";
    this.code = code;
    const from = positionAt(text, start);
    const to = positionAt(text, Math.max(end, start));
    this.line = from.line;
    this.column = from.column;
    this.endLine = to.line;
    this.endColumn = to.column;
    this.start = start;
    this.end = end;
  }

  toDiagnostic(): Diagnostic {
    return {
      severity: "error",
      code: this.code,
      message: this.message,
      line: this.line,
      column: this.column,
      endLine: this.endLine,
      endColumn: this.endColumn,
    };
  }
}

/** Build a diagnostic for the span [start, end) of `text`. */
export function diagnosticAt(
  text: string,
  severity: Diagnostic["severity"],
  code: string,
  message: string,
  start: number,
  end: number,
): Diagnostic {
  const from = positionAt(text, start);
  const to = positionAt(text, Math.max(end, start));
  return { severity, code, message, line: from.line, column: from.column, endLine: to.line, endColumn: to.column };
}
