/**
 * Evaluation methods as the marketer sees them (Batch / Streaming / Edge) and
 * as the API stores them (independent flags). A definition may carry several
 * flags when written through the API; the UI names it by the most immediate
 * one, so Edge wins over Streaming, which wins over Batch.
 */
import type { Method, SegmentDefinition } from "./api/types.js";

export const METHODS: readonly Method[] = ["batch", "continuous", "synchronous"];

export const METHOD_LABELS: Readonly<Record<Method, string>> = {
  batch: "Batch",
  continuous: "Streaming",
  synchronous: "Edge",
};

export const METHOD_HINTS: Readonly<Record<Method, string>> = {
  batch: "Evaluated by the sandbox's scheduled batch job (daily) or on demand. Every expression qualifies.",
  continuous: "Evaluated as records and events stream in.",
  synchronous: "Evaluated on the edge, in the request that carries the event.",
};

export function methodOf(d: Pick<SegmentDefinition, "evaluationInfo">): Method {
  if (d.evaluationInfo.synchronous.enabled) return "synchronous";
  if (d.evaluationInfo.continuous.enabled) return "continuous";
  return "batch";
}

/** The list filters that select exactly the definitions `methodOf` names `m`. */
export function methodFilter(m: Method): Partial<Record<Method, boolean>> {
  switch (m) {
    case "synchronous": return { synchronous: true };
    case "continuous": return { continuous: true, synchronous: false };
    case "batch": return { batch: true, continuous: false, synchronous: false };
  }
}

export function parseMethod(text: string | null): Method | undefined {
  return text !== null && (METHODS as readonly string[]).includes(text) ? (text as Method) : undefined;
}
