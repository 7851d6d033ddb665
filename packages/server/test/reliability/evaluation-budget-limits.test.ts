/**
 * The server's evaluation budget (services/evaluation-budget.ts) on its own, with a clock the
 * test moves: the request deadline (503), the per-profile time and units (422) with their exact
 * codes and messages, and jobs' budgets, which have no deadline.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compile } from "@segmentd/pql";
import { ApiError } from "../../src/services/errors.js";
import { EvaluationBudget } from "../../src/services/evaluation-budget.js";

const LIMITS = { eventsPerProfile: 10_000, evaluationCost: 1_000_000, evaluationMsPerProfile: 50, evaluationDeadlineMs: 1000 };
// No pair matches (the only "b" is the latest event): every pair is visited, 40 + 40² units a profile.
const PAIRS = compile(`exists X from xEvent, Y from xEvent : X.timestamp > Y.timestamp and Y.eventType = "b"`);
const profile = { profile: {}, events: Array.from({ length: 40 }, (_, i) => ({ eventType: i === 39 ? "b" : "a", timestamp: 1_700_000_000_000 + i })), now: 0 };

function refusal(status: number, code: string, message: RegExp | string) {
  return (e: unknown) => {
    assert.ok(e instanceof ApiError, String(e));
    assert.deepEqual([e.status, e.code], [status, code]);
    if (typeof message === "string") assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  };
}

test("the request deadline stops evaluation with 503 SEGMENTD-EVALUATION-BUDGET-503, also between stretches", () => {
  let t = 0;
  const budget = new EvaluationBudget(LIMITS, { deadline: true, now: () => t });
  assert.equal(budget.run(() => PAIRS(profile)), false);
  t = 1001;
  const message = "Evaluation stopped at its deadline of 1000 ms (limits.evaluationDeadlineMs) after 1 profile evaluations; retry later or narrow the expression";
  assert.throws(() => budget.check(), refusal(503, "SEGMENTD-EVALUATION-BUDGET-503", message));
  assert.throws(() => budget.run(() => PAIRS(profile)), refusal(503, "SEGMENTD-EVALUATION-BUDGET-503", message));
  // Reached inside an evaluation: each clock read is 100 ms later, the deadline passes while the pairs are visited.
  let u = 0;
  const inside = new EvaluationBudget({ ...LIMITS, evaluationMsPerProfile: 1e9 }, { deadline: true, now: () => (u += 100) });
  assert.throws(() => inside.run(() => PAIRS(profile)), refusal(503, "SEGMENTD-EVALUATION-BUDGET-503", /^Evaluation stopped at its deadline of 1000 ms/));
});

test("one profile's time and units: 422 SEGMENTD-EVALUATION-BUDGET-422; each profile starts afresh", () => {
  let t = 0;
  // Each read of the clock is 10 ms later, all of it the thread's: the profile is past 50 ms at
  // 60 ms and stopped once the thread has spent 25 ms more (at 90 ms).
  const slow = new EvaluationBudget(LIMITS, { deadline: false, now: () => (t += 10), cpu: () => t });
  assert.throws(() => slow.run(() => PAIRS(profile)), refusal(422, "SEGMENTD-EVALUATION-BUDGET-422", /^Evaluation stopped: one profile's evaluation took more than 50 ms \(limits\.evaluationMsPerProfile; stopped at 90 ms\); the expression is too costly for this profile's data$/));
  const units = new EvaluationBudget({ ...LIMITS, evaluationCost: 1000 }, { deadline: false });
  assert.throws(() => units.run(() => PAIRS(profile)), refusal(422, "SEGMENTD-EVALUATION-BUDGET-422", "Evaluation stopped: one profile needed more than 1,000 units of work (limits.evaluationCost); the expression is too costly for this profile's data"));
  // 1,640 units a profile: three profiles use 4,920 under a per-profile limit of 2,000.
  const each = new EvaluationBudget({ ...LIMITS, evaluationCost: 2000 }, { deadline: false });
  each.run(() => [1, 2, 3].forEach(() => PAIRS(profile)));
  assert.deepEqual([each.evaluations, each.spent], [3, 3 * (40 + 40 * 40)]);
});

test("a pause of the process is not the profile's time: past 50 ms of clock with the thread idle, the evaluation finishes", () => {
  // The clock jumps 100 ms a read (a host busy elsewhere) while the thread's CPU time stands still.
  let t = 0;
  const paused = new EvaluationBudget(LIMITS, { deadline: false, now: () => (t += 100), cpu: () => 5 });
  assert.equal(paused.run(() => PAIRS(profile)), false);
  assert.ok(t > 1000, `the clock passed ${t} ms`);
  // The real thread clock: a pause of 60 ms (no CPU) then a cheap profile is not stopped either.
  let jump = 0;
  const real = new EvaluationBudget(LIMITS, { deadline: false, now: () => performance.now() + (jump += 60) });
  assert.equal(real.run(() => PAIRS(profile)), false);
  // And with the thread busy after the pause, the profile is stopped.
  let c = 0;
  const busy = new EvaluationBudget(LIMITS, { deadline: false, now: () => (t += 100), cpu: () => (c += 20) });
  assert.throws(() => busy.run(() => PAIRS(profile)), refusal(422, "SEGMENTD-EVALUATION-BUDGET-422", /took more than 50 ms/));
});

test("a job's budget has no deadline", () => {
  let t = 0;
  const job = new EvaluationBudget(LIMITS, { deadline: false, now: () => t });
  t = 1e9;
  assert.equal(job.run(() => PAIRS(profile)), false);
  job.check();
});
