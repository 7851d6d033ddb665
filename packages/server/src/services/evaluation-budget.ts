/**
 * The budgets PQL evaluation runs under (docs/reliability.md, "Evaluation is
 * bounded"): at check time the cost model refuses an expression whose
 * worst case per profile exceeds `limits.evaluationCost` at
 * `limits.eventsPerProfile` events; while evaluating, each profile may use at
 * most `evaluationCost` units and `evaluationMsPerProfile` ms of the event
 * loop, and a request's evaluation ends at `evaluationDeadlineMs`. A profile
 * past its time is stopped only once this thread has also spent half that time
 * again on it: a pause of the process (a busy host, a collection of another
 * request's garbage) would otherwise fail a whole job on a cheap profile.
 */
import type { SandboxLimits } from "../platform/config.js";
import { RECORD_LIMITS } from "../platform/limits.js";
import { threadCpuMs } from "../platform/thread-cpu.js";
import { ApiError, ErrorCodes } from "./errors.js";
import { BudgetExceededError, costDiagnostic, WorkBudget, type Query } from "./pql.js";

export type EvaluationLimits = Pick<SandboxLimits, "eventsPerProfile" | "evaluationCost" | "evaluationMsPerProfile" | "evaluationDeadlineMs">;

export const EvaluationErrorCodes = {
  /** One profile needed more work or time than its budget: the same request fails again. */
  budget: "SEGMENTD-EVALUATION-BUDGET-422",
  /** The request's evaluation reached its deadline. */
  deadline: "SEGMENTD-EVALUATION-BUDGET-503",
} as const;

/** The cost model's bounds: events per profile, items of any other array (a record's limit), the bound. */
export function costLimits(limits: Pick<SandboxLimits, "eventsPerProfile" | "evaluationCost">): { eventsPerProfile: number; itemsPerArray: number; maxUnits: number } {
  return { eventsPerProfile: limits.eventsPerProfile, itemsPerArray: RECORD_LIMITS.maxArrayLength, maxUnits: limits.evaluationCost };
}

/**
 * The 400 (SEGMENTD-PQL-400, item PQL_TOO_COSTLY) for an expression whose worst case per
 * profile exceeds the sandbox's bound, or null. `label` names it in a request of several.
 */
export function costRefusal(text: string, query: Query, limits: Pick<SandboxLimits, "eventsPerProfile" | "evaluationCost">, label?: string): ApiError | null {
  const d = costDiagnostic(text, query, costLimits(limits));
  if (d === null) return null;
  const message = `line ${d.line}, column ${d.column}: ${d.message}`;
  return new ApiError(400, ErrorCodes.invalidPql, `${label ?? "The PQL expression"} is too costly to evaluate`, [
    { code: d.code, message, line: d.line, column: d.column, endLine: d.endLine, endColumn: d.endColumn },
  ]);
}

export interface BudgetOptions {
  /** Apply `evaluationDeadlineMs` from now (requests); jobs have none. */
  deadline: boolean;
  /** Milliseconds, default performance.now (tests of the deadline pass a clock of their own). */
  now?: () => number;
  /** This thread's CPU milliseconds, default threadCpuMs (read only once a profile is past its time). */
  cpu?: () => number;
  /** The time left of a deadline started elsewhere (an evaluation worker continuing a request's budget). */
  deadlineInMs?: number;
}

/**
 * A budget for one request or job: `run` each synchronous stretch of
 * evaluation through it; it throws ApiError 422/503 when a limit is reached.
 */
export class EvaluationBudget {
  private readonly work: WorkBudget;
  private readonly now: () => number;
  private readonly deadlineAt: number;
  private profileStart = 0;
  /** The thread's CPU time when the current profile was first seen past its time; -1 before. */
  private lateCpu = -1;

  constructor(
    private readonly limits: EvaluationLimits,
    opts: BudgetOptions,
  ) {
    this.now = opts.now ?? (() => performance.now());
    const cpu = opts.cpu ?? threadCpuMs;
    this.deadlineAt = opts.deadline ? this.now() + (opts.deadlineInMs ?? limits.evaluationDeadlineMs) : Infinity;
    this.work = new WorkBudget({
      unitsPerEvaluation: limits.evaluationCost,
      // A clock read every 128 units costs nothing next to them; explain's traced units are slow.
      checkEvery: 128,
      checkpoint: (phase) => {
        const t = this.now();
        if (phase === "begin") {
          this.profileStart = t;
          this.lateCpu = -1;
        } else if (t - this.profileStart > limits.evaluationMsPerProfile) {
          const c = cpu();
          if (this.lateCpu < 0) this.lateCpu = c;
          else if (c - this.lateCpu > limits.evaluationMsPerProfile / 2) throw this.tooSlow(t - this.profileStart);
        }
        if (t > this.deadlineAt) throw this.pastDeadline();
      },
    });
  }

  /** Profiles (evaluations) started so far. */
  get evaluations(): number {
    return this.work.evaluations;
  }

  /** Units of work charged so far. */
  get spent(): number {
    return this.work.spent;
  }

  /** Milliseconds left before the deadline (Infinity without one). */
  remainingMs(): number {
    return this.deadlineAt - this.now();
  }

  /** The limits the budget applies (an evaluation worker applies the same). */
  get evaluationLimits(): EvaluationLimits {
    return this.limits;
  }

  /** Between stretches (e.g. after an await): the deadline holds there too. */
  check(): void {
    if (this.now() > this.deadlineAt) throw this.pastDeadline();
  }

  run<T>(fn: () => T): T {
    this.check();
    try {
      return this.work.run(fn);
    } catch (err) {
      if (err instanceof BudgetExceededError) {
        throw new ApiError(
          422,
          EvaluationErrorCodes.budget,
          `Evaluation stopped: one profile needed more than ${err.limit.toLocaleString("en-US")} units of work (limits.evaluationCost); the expression is too costly for this profile's data`,
        );
      }
      throw err;
    }
  }

  private tooSlow(ms: number): ApiError {
    return new ApiError(
      422,
      EvaluationErrorCodes.budget,
      `Evaluation stopped: one profile's evaluation took more than ${this.limits.evaluationMsPerProfile} ms (limits.evaluationMsPerProfile; stopped at ${Math.round(ms)} ms); the expression is too costly for this profile's data`,
    );
  }

  private pastDeadline(): ApiError {
    return new ApiError(
      503,
      EvaluationErrorCodes.deadline,
      `Evaluation stopped at its deadline of ${this.limits.evaluationDeadlineMs} ms (limits.evaluationDeadlineMs) after ${this.work.evaluations} profile evaluations; retry later or narrow the expression`,
    );
  }
}
