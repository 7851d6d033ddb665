/**
 * A backfill (issue #40) and the source of a membership change, in words. Pure, so that the
 * words are tested without a browser (test/backfill-words.test.ts).
 */
import type { Backfill } from "./api/types.js";
import { formatCount } from "./format.js";

/** Who set a status: the transition's source as a history or a member row shows it. */
export function sourceWords(source: string): string {
  switch (source) {
    case "backfill": return "backfill (filled when saved)";
    case "batch":
    case "streaming":
    case "edge":
      return `${source} evaluation`;
    default:
      return source;
  }
}

const REASONS: Readonly<Record<Backfill["reason"], string>> = {
  created: "the audience was created",
  updated: "the audience was edited or enabled",
  requested: "it was asked for again",
  restarted: "the server restarted during the last run",
  referenced: "an audience it reads with inSegment was backfilled",
  mergePolicy: "its merge policy changed",
};

/** Why the backfill runs (a reason a newer server adds is shown as sent). */
export function reasonWords(reason: string): string {
  return (REASONS as Readonly<Record<string, string>>)[reason] ?? reason;
}

const PHASES: Readonly<Record<Backfill["phase"], string>> = {
  queued: "Queued behind the sandbox's other backfills",
  evaluating: "Evaluating every profile",
  writing: "Writing the changes",
  fencing: "Deciding the profiles that changed meanwhile",
  done: "Done",
};

export function isBackfillRunning(b: Pick<Backfill, "state">): boolean {
  return b.state === "queued" || b.state === "running";
}

/** The state as one headline: "Complete", "Failed", or what it is doing now. */
export function backfillHeadline(b: Pick<Backfill, "state" | "phase">): string {
  if (b.state === "succeeded") return "Complete";
  if (b.state === "failed") return "Failed";
  return (PHASES as Readonly<Record<string, string>>)[b.phase] ?? b.phase;
}

/** Percent done (0–100); null while it cannot be known (evaluating, or queued). */
export function backfillPercent(b: Pick<Backfill, "state" | "phase" | "processed" | "total">): number | null {
  if (b.state === "succeeded") return 100;
  if (b.phase === "writing" || b.phase === "fencing") return b.total === 0 ? 100 : Math.min(100, Math.floor((100 * b.processed) / b.total));
  return null;
}

/** The counts: decided of total, and the transitions written. */
export function backfillCounts(b: Pick<Backfill, "processed" | "total" | "entered" | "exited">): string {
  return `${formatCount(b.processed)} of ${formatCount(b.total)} changes decided · ${formatCount(b.entered)} entered, ${formatCount(b.exited)} exited`;
}
