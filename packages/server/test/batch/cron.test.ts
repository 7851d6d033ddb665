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

  it("L-n is L shifted back n days, strictly after, and skips months it does not fit", () => {
    const c = parseCron("0 0 0 L-2 * ?");
    assert.equal(iso(c.next(at("2027-02-26T00:00:00Z"))), "2027-03-29T00:00:00.000Z", "strictly after the February run");
    assert.equal(iso(parseCron("0 0 0 L-2 2 ?").next(at("2027-03-01T00:00:00Z"))), "2028-02-27T00:00:00.000Z", "leap February: 29 - 2");
    assert.equal(iso(parseCron("0 0 0 L-30 * ?").next(at("2026-11-02T00:00:00Z"))), "2026-12-01T00:00:00.000Z", "30-day November has no L-30");
    assert.equal(parseCron("0 0 0 L-30 2 ?").next(at("2026-11-02T00:00:00Z")), null, "February never has an L-30");
    assert.equal(iso(parseCron("0 30 6 L-0 * ?").next(at("2026-11-21T00:00:00Z"))), "2026-11-30T06:30:00.000Z");
  });

  it("reads Quartz's L, W and # the way Quartz does", () => {
    const runs = (text: string, from: string, n: number) => {
      const c = parseCron(text);
      const out: string[] = [];
      for (let t: number | null = at(from); out.length < n; ) {
        t = c.next(t);
        if (t === null) break;
        out.push(new Date(t).toISOString().slice(0, 10));
      }
      return out;
    };
    assert.deepEqual(runs("0 0 0 ? * L", "2026-11-21T00:00:00Z", 2), ["2026-11-28", "2026-12-05"], "a lone L is Saturday");
    assert.deepEqual(runs("0 0 0 ? * FRIL", "2026-11-01T00:00:00Z", 3), ["2026-11-27", "2026-12-25", "2027-01-29"], "last Friday by name");
    assert.deepEqual(runs("0 0 0 ? * 7L", "2026-11-01T00:00:00Z", 2), ["2026-11-28", "2026-12-26"], "last Saturday");
    assert.deepEqual(runs("0 0 0 ? * MON#2", "2026-11-21T00:00:00Z", 2), ["2026-12-14", "2027-01-11"]);
    assert.deepEqual(runs("0 0 0 ? * 6#5", "2026-11-21T00:00:00Z", 2), ["2027-01-29", "2027-04-30"], "only months with a fifth Friday");
    assert.deepEqual(runs("0 0 0 31W * ?", "2026-11-01T00:00:00Z", 3), ["2026-12-31", "2027-01-29", "2027-03-31"], "31 Jan 2027 is a Sunday: Friday the 29th; 30-day months have no 31st");
    assert.deepEqual(runs("0 0 0 LW * ?", "2026-10-01T00:00:00Z", 2), ["2026-10-30", "2026-11-30"], "31 Oct 2026 is a Saturday");
    assert.deepEqual(runs("0 0 0 ? * 1-7/3", "2026-11-21T00:00:00Z", 3), ["2026-11-22", "2026-11-25", "2026-11-28"], "Sunday, Wednesday, Saturday");
    assert.equal(iso(parseCron("0 5/20 1 * * ?").next(at("2026-11-21T01:25:00Z"))), "2026-11-21T01:45:00.000Z", "a/s runs from a to the field's end");
  });

  it("the k-th and last weekday and the nearest weekday agree with a day-by-day scan", () => {
    const DAY = 86_400_000;
    fc.assert(
      fc.property(fc.integer({ min: 2026, max: 2040 }), fc.integer({ min: 0, max: 11 }), fc.integer({ min: 1, max: 7 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 31 }), (y, m0, wd, k, d) => {
        const start = Date.UTC(y, m0, 1) - 1;
        const days: Date[] = [];
        for (let t = start + 1; new Date(t).getUTCMonth() === m0; t += DAY) days.push(new Date(t));
        const ofWeekday = days.filter((x) => x.getUTCDay() + 1 === wd);
        const inMonth = (t: number | null) => (t !== null && t < Date.UTC(y, m0 + 1, 1) ? new Date(t).getUTCDate() : null);
        assert.equal(inMonth(parseCron(`0 0 0 ? ${m0 + 1} ${wd}#${k}`).next(start)), ofWeekday[k - 1]?.getUTCDate() ?? null, `${wd}#${k}`);
        assert.equal(inMonth(parseCron(`0 0 0 ? ${m0 + 1} ${wd}L`).next(start)), ofWeekday[ofWeekday.length - 1]!.getUTCDate(), `${wd}L`);
        // Nearest weekday to d, within the month (none when the month has no day d).
        let want: number | null = null;
        if (d <= days.length) {
          const w = days[d - 1]!.getUTCDay();
          want = w === 6 ? (d === 1 ? 3 : d - 1) : w === 0 ? (d === days.length ? d - 2 : d + 1) : d;
        }
        assert.equal(inMonth(parseCron(`0 0 0 ${d}W ${m0 + 1} ?`).next(start)), want, `${d}W`);
      }),
      { numRuns: 200 },
    );
  });

  it("rejects malformed expressions with a reason", () => {
    const cases: Array<[string, string]> = [
      ["0 0 1 * *", "A Quartz cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]); got 5"],
      ["0 0 24 * * ?", 'Invalid hours value "24" (allowed 0-23)'],
      ["0 0 1 * * MON", "Exactly one of day-of-month and day-of-week must be '?'"],
      ["0 0 1 ? FOO *", 'Invalid month value "FOO" (allowed 1-12 or JAN-DEC)'],
      ["0 0 5-2 * * ?", 'Invalid hours range "5-2"'],
      ["0 ? 1 * * ?", 'Invalid minutes value "?" (allowed 0-59)'],
      ["0 0 1 ? * 0", 'Invalid day-of-week value "0" (allowed 1-7 or SUN-SAT)'],
      ["0 0 1 ? * 2,4L", 'Invalid day-of-week value "4L" (allowed 1-7 or SUN-SAT)'],
      ["0 0 1 ? * 2#6", 'Invalid day-of-week occurrence value "6" (allowed 1-5)'],
      ["0 0 1 L-31 * ?", 'Invalid day-of-month offset value "31" (allowed 0-30)'],
      ["0 0 1 32W * ?", 'Invalid day-of-month value "32" (allowed 1-31)'],
      ["0 0 1 1 1 ? 2100", 'Invalid year value "2100" (allowed 1970-2099)'],
      ["0 0/0 1 * * ?", 'Invalid minutes step value "0" (allowed 1-59)'],
      ["0 0 1,,2 * * ?", 'Empty item in hours "1,,2"'],
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
