/**
 * "Last evaluated" for the audiences list. Streaming and edge audiences are
 * evaluated continuously, so they have no single time. A batch audience was
 * last evaluated by the newest successful segment job that named it — or that
 * evaluated every batch audience ("*") and was created after the audience
 * existed (a "*" job resolves its definitions when it is created).
 */
import type { SegmentDefinition, SegmentJob } from "./api/types.js";
import { methodOf } from "./methods.js";

export type LastEvaluated = { kind: "continuous" } | { kind: "at"; time: number } | { kind: "never" };

export function lastEvaluated(def: Pick<SegmentDefinition, "id" | "evaluationInfo" | "creationTime">, jobs: readonly SegmentJob[]): LastEvaluated {
  if (methodOf(def) !== "batch") return { kind: "continuous" };
  let best: number | undefined;
  for (const j of jobs) {
    if (j.status !== "SUCCEEDED") continue;
    const ids = (j.segments ?? []).map((s) => s.segmentId);
    const named = ids.includes(def.id);
    const all = ids.includes("*") && def.evaluationInfo.batch.enabled && j.creationTime >= def.creationTime;
    if ((named || all) && (best === undefined || j.updateTime > best)) best = j.updateTime;
  }
  return best === undefined ? { kind: "never" } : { kind: "at", time: best };
}
