/**
 * What the editor overlay draws: the highlight tokens cut at diagnostic
 * boundaries, so that the characters a diagnostic covers get a squiggle, and
 * a zero-width marker where a diagnostic has no extent (e.g. "expected an
 * expression" at the end of the text). Pure, so it is tested without a DOM.
 */
import { tokenize, type TokenKind } from "./highlight.js";

export interface Span {
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

export interface Segment {
  kind: TokenKind | "marker";
  text: string;
  error: boolean;
}

/** UTF-16 offset of a 1-based line/column, clamped to the text. */
export function offsetOf(text: string, line: number, column: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf("\n", offset);
    if (nl < 0) return text.length;
    offset = nl + 1;
  }
  const lineEnd = text.indexOf("\n", offset);
  const max = lineEnd < 0 ? text.length : lineEnd;
  return Math.min(max, offset + Math.max(0, column - 1));
}

export function segmentsOf(text: string, diagnostics: readonly Span[]): Segment[] {
  const ranges = diagnostics.map((d) => {
    const start = offsetOf(text, d.line, d.column);
    return { start, end: Math.max(start, offsetOf(text, d.endLine, d.endColumn)) };
  });
  const covered = (i: number) => ranges.some((r) => i >= r.start && i < r.end);
  const markers = new Set(ranges.filter((r) => r.start === r.end).map((r) => r.start));
  const out: Segment[] = [];
  let offset = 0;
  const pushMarker = (at: number) => {
    if (markers.has(at)) {
      out.push({ kind: "marker", text: "", error: true });
      markers.delete(at);
    }
  };
  for (const tok of tokenize(text)) {
    let i = 0;
    while (i < tok.text.length) {
      pushMarker(offset + i);
      const err = covered(offset + i);
      let j = i + 1;
      while (j < tok.text.length && covered(offset + j) === err && !markers.has(offset + j)) j++;
      out.push({ kind: tok.kind, text: tok.text.slice(i, j), error: err });
      i = j;
    }
    offset += tok.text.length;
  }
  pushMarker(text.length);
  return out;
}
