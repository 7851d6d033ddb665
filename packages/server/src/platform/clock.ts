/**
 * Time as a dependency. Everything that reads the time takes a `Clock`, so that
 * tests can move time across days, month ends and leap days without sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }
}

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  private current: number;

  constructor(start: number | Date = 0) {
    this.current = typeof start === "number" ? start : start.getTime();
  }

  now(): number {
    return this.current;
  }

  set(at: number | Date): void {
    this.current = typeof at === "number" ? at : at.getTime();
  }

  advance(ms: number): void {
    this.current += ms;
  }
}
