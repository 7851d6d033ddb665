/**
 * Issue #39's audience-tool wording and logic, without a browser: plurals,
 * sentences, the chart's day labels and y axis, schedules in words and their
 * next run, warnings for misspelled fields, where a valid token comes from.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { describeFailure, TOKEN_HINT } from "../src/api/errors.js";
import { yAxisTicks } from "../src/chart.js";
import { schemaOfPalette, unknownFieldWarnings } from "../src/field-warnings.js";
import { formatBucketLabel, profilesText, sentence } from "../src/format.js";
import { cronShape, cronWords, dailyCron, dailyTime, nextFiring, nextRun, scheduleOf } from "../src/schedule-words.js";

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe("plurals and sentences", () => {
  it("says 1 profile and 2 profiles", () => {
    assert.equal(profilesText(1, "≈ "), "≈ 1 profile");
    assert.equal(profilesText(0, "≈ "), "≈ 0 profiles");
    assert.equal(profilesText(2), "2 profiles");
  });
  it("ends a message as a sentence once", () => {
    assert.equal(sentence("Enter a number, such as 3 or 2.5"), "Enter a number, such as 3 or 2.5.");
    assert.equal(sentence("Enter a number, such as 3 or 2.5."), "Enter a number, such as 3 or 2.5.");
    assert.equal(sentence("Is it?"), "Is it?");
  });
});

describe("the metrics chart", () => {
  it("names the newest day bucket Today and the one before Yesterday (the buckets end now)", () => {
    // The server's 7-day buckets: 7 × 24 h ending at `now`, here 10:30 local time.
    const now = new Date(2026, 10, 29, 10, 30).getTime();
    const starts = Array.from({ length: 7 }, (_, i) => now - (7 - i) * DAY);
    assert.equal(formatBucketLabel(new Date(starts[6]!).toISOString(), DAY, now), "Today");
    assert.equal(formatBucketLabel(new Date(starts[5]!).toISOString(), DAY, now), "Yesterday");
    const third = formatBucketLabel(new Date(starts[4]!).toISOString(), DAY, now);
    assert.equal(third, new Date(2026, 10, 27).toLocaleDateString(undefined, { month: "short", day: "numeric" }));
  });
  it("labels hour buckets by their start time", () => {
    const start = new Date(2026, 10, 29, 9, 30);
    assert.equal(formatBucketLabel(start.toISOString(), HOUR, start.getTime() + HOUR), start.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }));
  });
  it("puts the largest counts on the y axis, 0 at the zero line", () => {
    const b = (q: number, d: number) => ({ start: "", end: "", qualified: q, disqualified: d, net: q - d });
    assert.deepEqual(yAxisTicks({ buckets: [b(3, 0), b(0, 1)] }), [{ label: "+3", at: 0 }, { label: "0", at: 0.75 }, { label: "−1", at: 1 }]);
    assert.deepEqual(yAxisTicks({ buckets: [b(5, 0)] }), [{ label: "+5", at: 0 }, { label: "0", at: 1 }]);
    assert.deepEqual(yAxisTicks({ buckets: [b(0, 0)] }), [{ label: "0", at: 1 }]);
  });
});

describe("batch schedules in words", () => {
  it("reads daily and hourly Quartz crons, and shows any other as written", () => {
    assert.equal(cronWords("0 0 1 * * ?"), "Every day at 01:00 UTC");
    assert.equal(cronWords("0 30 14 ? * *"), "Every day at 14:30 UTC");
    assert.equal(cronWords("0 0 * * * ?"), "Every hour, on the hour");
    assert.equal(cronWords("0 15 * * * ?"), "Every hour at 15 minutes past");
    assert.equal(cronWords("0 0 1 ? * MON-FRI"), "Cron “0 0 1 ? * MON-FRI” (Quartz, UTC)");
    assert.deepEqual(cronShape("0 0 24 * * ?"), { kind: "other" });
    assert.deepEqual(cronShape("0 0 1 * *"), { kind: "other" });
  });
  it("turns a time of day into a daily cron and back", () => {
    assert.equal(dailyCron("02:30"), "0 30 2 * * ?");
    assert.equal(dailyCron("24:00"), undefined);
    assert.equal(dailyCron("2:30"), undefined);
    assert.equal(dailyTime("0 30 2 * * ?"), "02:30");
    assert.equal(dailyTime("0 0 1 ? * MON"), undefined);
  });
  it("computes the next run strictly after now, in UTC", () => {
    const now = Date.UTC(2026, 10, 29, 1, 0, 0);
    assert.equal(nextFiring("0 0 1 * * ?", now), Date.UTC(2026, 10, 30, 1, 0, 0), "at the instant itself: the next day");
    assert.equal(nextFiring("0 30 2 * * ?", now), Date.UTC(2026, 10, 29, 2, 30, 0));
    assert.equal(nextFiring("0 15 * * * ?", now), Date.UTC(2026, 10, 29, 1, 15, 0));
    assert.equal(nextFiring("0 0 1 ? * MON", now), undefined);
  });
  it("prefers the server's next run time, and has none when the schedule is off", () => {
    const now = Date.UTC(2026, 10, 29, 1, 0, 0);
    assert.equal(nextRun({ schedule: "0 0 1 * * ?", state: "active", nextRunTime: "2026-11-29T05:00:00.000Z" }, now), Date.UTC(2026, 10, 29, 5));
    assert.equal(nextRun({ schedule: "0 0 1 * * ?", state: "active", nextRunTime: Date.UTC(2026, 10, 29, 5) / 1000 }, now), Date.UTC(2026, 10, 29, 5), "epoch seconds");
    assert.equal(nextRun({ schedule: "0 0 1 * * ?", state: "active" }, now), Date.UTC(2026, 10, 30, 1));
    assert.equal(nextRun({ schedule: "0 0 1 * * ?", state: "inactive" }, now), null);
  });
  it("finds the schedule evaluating an audience: one naming it or every batch audience, active first", () => {
    const all = { id: "all", schedule: "0 0 1 * * ?", state: "inactive" as const, properties: { segments: ["*"] } };
    const mine = { id: "mine", schedule: "0 0 2 * * ?", state: "active" as const, properties: { segments: ["a"] } };
    assert.equal(scheduleOf("a", [all, mine])?.id, "mine");
    assert.equal(scheduleOf("b", [all, mine])?.id, "all");
    assert.equal(scheduleOf("b", [mine]), undefined);
  });
});

describe("misspelled profile fields", () => {
  const palette = {
    profile: {
      sampled: 10,
      fields: [
        { path: "person", type: "object" as const, count: 10, examples: [] },
        { path: "person.age", type: "integer" as const, count: 10, examples: [] },
        { path: "homeAddress.countryCode", type: "string" as const, count: 10, examples: [] },
      ],
    },
  };
  const schema = schemaOfPalette(palette);
  it("names the closest known field as a warning", () => {
    const w = unknownFieldWarnings("person.agee > 30", schema);
    assert.equal(w.length, 1);
    assert.equal(w[0]!.severity, "warning");
    assert.equal(w[0]!.message, "No sampled profile has the field person.agee, so it matches nobody. Did you mean person.age?");
    assert.equal(unknownFieldWarnings('homeAddres.countryCode = "US"', schema)[0]!.message, "No sampled profile has the field homeAddres, so it matches nobody. Did you mean homeAddress?");
  });
  it("says nothing for known fields, events, memberships and unsampled sandboxes", () => {
    assert.deepEqual(unknownFieldWarnings('person.age > 30 and homeAddress.countryCode = "US"', schema), []);
    assert.deepEqual(unknownFieldWarnings('xEvent[eventType = "x"].count() > 0 and inSegment("a")', schema), []);
    assert.deepEqual(unknownFieldWarnings('identityMap.email.id = "a"', schema), [], "a top-level name with nothing close is not flagged");
    assert.deepEqual(unknownFieldWarnings("person.agee > 30", schemaOfPalette({ profile: { sampled: 0, fields: [] } })), []);
  });
  it("flags an unknown child of a known object even with nothing close", () => {
    assert.match(unknownFieldWarnings("person.zzzzzzzz > 3", schema)[0]!.message, /^No sampled profile has the field person\.zzzzzzzz, so it matches nobody\. Check its name/);
  });
});

describe("a refused token", () => {
  it("says where the right one comes from", () => {
    assert.match(TOKEN_HINT, /npm run segmentd -- token/);
    assert.match(describeFailure(401, undefined).message, /^The token was refused\. Print this server's development token with `npm run segmentd -- token`/);
  });
});
