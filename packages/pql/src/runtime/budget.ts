/**
 * A work budget for evaluation: the interpreter, the compiled closures, the
 * generated code and the columnar row fallback charge one unit per item a loop
 * visits (a binding's source, a filter, an item-context method, a chain's
 * events), charged when the loop starts. The cost model (cost.ts) counts the
 * same units, so a query it accepts at E events never needs more than its
 * estimate on a profile with at most E events.
 *
 * The budget is ambient (set around synchronous work by `run`): evaluation is
 * synchronous and single-threaded, and threading it through every closure
 * would cost the hot paths an argument each. Without a budget, charging is a
 * null test. The package has no clock: deadlines are the caller's checkpoint.
 */

export class BudgetExceededError extends Error {
  readonly code = "PQL_BUDGET_EXCEEDED";
  constructor(
    /** The units one evaluation may use. */
    readonly limit: number,
    /** The units the evaluation had charged when it was stopped. */
    readonly spent: number,
  ) {
    super(`one evaluation needed more than ${limit} units of work`);
    this.name = "BudgetExceededError";
  }
}

export interface BudgetOptions {
  /** The most units one evaluation (one profile, one call of a compiled query) may use. */
  unitsPerEvaluation: number;
  /**
   * Called when an evaluation starts ("begin") and about every `checkEvery`
   * units ("check"); it may throw to stop the work (a deadline).
   */
  checkpoint?: (phase: "begin" | "check") => void;
  /** Default 1,024. */
  checkEvery?: number;
}

export class WorkBudget {
  /** Units charged so far, by every evaluation under this budget. */
  spent = 0;
  /** Evaluations started. */
  evaluations = 0;
  private start = 0;
  private depth = 0;
  private nextCheck: number;
  private readonly checkEvery: number;

  constructor(private readonly options: BudgetOptions) {
    this.checkEvery = options.checkEvery ?? 1024;
    this.nextCheck = this.checkEvery;
  }

  /** Run `fn` (synchronous) with this budget charged by every evaluation inside it. */
  run<T>(fn: () => T): T {
    const prev = setActive(this);
    try {
      return fn();
    } finally {
      setActive(prev);
    }
  }

  /** An evaluation starts (nested evaluations count as part of the outer one). */
  enter(): void {
    if (this.depth++ > 0) return;
    this.start = this.spent;
    this.evaluations++;
    this.options.checkpoint?.("begin");
  }

  leave(): void {
    this.depth--;
  }

  charge(n: number): void {
    this.spent += n;
    const used = this.spent - this.start;
    if (used > this.options.unitsPerEvaluation) throw new BudgetExceededError(this.options.unitsPerEvaluation, used);
    if (this.spent >= this.nextCheck) {
      this.nextCheck = this.spent + this.checkEvery;
      this.options.checkpoint?.("check");
    }
  }
}

let active: WorkBudget | null = null;

/** Make `b` the running budget; the previous one. */
function setActive(b: WorkBudget | null): WorkBudget | null {
  const prev = active;
  active = b;
  return prev;
}

/** The budget set by the innermost `run`, if any. */
export function activeBudget(): WorkBudget | null {
  return active;
}

/** Charge `n` units to the running budget, if any. */
export function spend(n: number): void {
  if (active !== null && n > 0) active.charge(n);
}
