import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { CronError, parseCron } from "../../src/batch/schedules/cron.js";

const at = (s: string) => Date.parse(s);
const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());

describe("Quartz cron (UTC)", () => {
  it("fires daily at 01:00 as AEP's sample schedule", () => {
    const c = parseCron("0 0 1 * * ?");
    assert.equal(iso(c.next(at("2026-11-21T13:00:00Z"))), "2026-11-22T01:00:00.000Z");
    assert.equal(iso(c.next(at("2026-11-21T00:59:59Z"))), "2026-11-21T01:00:00.000Z");
    assert.equal(iso(c.next(at("2026-11-21T01:00:00Z"))), "2026-11-22T01:00:00.000Z", "strictly after");
  });

  it("handles steps, ranges, lists and names", () => {
    assert.equal(iso(parseCron("0 */15 9-10 ? * MON-FRI").next(at("2026-11-21T12:00:00Z"))), "2026-11-23T09:00:00.000Z", "Saturday → Monday 09:00");
    assert.equal(iso(parseCron("30 5,35 * * JAN,jul ?").next(at("2026-11-21T12:00:00Z"))), "2027-01-01T00:05:30.000Z");
    assert.equal(iso(parseCron("0 0 12 ? * 1").next(at("2026-11-21T12:00:00Z"))), "2026-11-22T12:00:00.000Z", "1 = Sunday");
  });

  it("handles L, L-n, W, LW, nL and n#k", () => {
    assert.equal(iso(parseCron("0 0 0 L * ?").next(at("2028-02-03T00:00:00Z"))), "2028-02-29T00:00:00.000Z", "leap February");
    assert.equal(iso(parseCron("0 0 0 L-2 * ?").next(at("2027-02-01T00:00:00Z"))), "2027-02-26T00:00:00.000Z");
    assert.equal(iso(parseCron("0 0 0 15W * ?").next(at("2026-11-01T00:00:00Z"))), "2026-11-16T00:00:00.000Z", "15 Nov 2026 is a Sunday");
    assert.equal(iso(parseCron("0 0 0 1W * ?").next(at("2026-07-31T00:00:00Z"))), "2026-08-03T00:00:00.000Z", "1 Aug 2026 is a Saturday: Monday the 3rd, not July");
    assert.equal(iso(parseCron("0 0 0 LW * ?").next(at("2026-05-01T00:00:00Z"))), "2026-05-29T00:00:00.000Z", "31 May 2026 is a Sunday");
    assert.equal(iso(parseCron("0 0 0 ? * 6L").next(at("2026-11-01T00:00:00Z"))), "2026-11-27T00:00:00.000Z", "last Friday");
    assert.equal(iso(parseCron("0 0 0 ? * 2#1").next(at("2026-11-21T00:00:00Z"))), "2026-12-07T00:00:00.000Z", "first Monday");
    assert.equal(iso(parseCron("0 0 0 1 1 ? 2030").next(at("2026-11-21T00:00:00Z"))), "2030-01-01T00:00:00.000Z");
    assert.equal(parseCron("0 0 0 1 1 ? 2020").next(at("2026-11-21T00:00:00Z")), null);
  });

  it("rejects malformed expressions with a reason", () => {
    const cases: Array<[string, string]> = [
      ["0 0 1 * *", "A Quartz cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]); got 5"],
      ["0 0 24 * * ?", 'Invalid hours value "24" (allowed 0-23)'],
      ["0 0 1 * * MON", "Exactly one of day-of-month and day-of-week must be '?'"],
      ["0 0 1 ? FOO *", 'Invalid month value "FOO" (allowed 1-12 or JAN-DEC)'],
      ["0 0 5-2 * * ?", 'Invalid hours range "5-2"'],
    ];
    for (const [text, message] of cases) assert.throws(() => parseCron(text), (e: unknown) => e instanceof CronError && e.message === message, text);
  });

  it("next() agrees with a brute-force minute scan for simple expressions", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 2 * 86_400 }), (m, step, h, offset) => {
        const c = parseCron(`0 ${m}/${Math.min(step * 10, 59)} ${h} * * ?`);
        const from = at("2026-11-21T00:00:00Z") + offset * 1000;
        let want: number | null = null;
        for (let t = Math.floor(from / 60_000) * 60_000; t < from + 3 * 86_400_000; t += 60_000) {
          const d = new Date(t);
          if (t > from && d.getUTCHours() === h && d.getUTCMinutes() >= m && (d.getUTCMinutes() - m) % Math.min(step * 10, 59) === 0) {
            want = t;
            break;
          }
        }
        assert.equal(c.next(from), want);
      }),
      { numRuns: 100 },
    );
  });
});
