// Standard Webhooks signatures and the retry schedule of the delivery engine.
import { test } from "node:test";
import assert from "node:assert/strict";
import { sign, verify } from "../../src/activation/delivery/signing.js";
import { nextRetry, retryAfterMs, SVIX_SCHEDULE_MS } from "../../src/activation/delivery/retry.js";

// The Standard Webhooks specification's example.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS = 1614265330;
const BODY = '{"test": 2432232314}';

test("signature: the specification's example", () => {
  assert.equal(sign(SECRET, ID, TS, BODY), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
});

test("verify: accepts the signature among several, refuses a changed body, id or timestamp, and an old timestamp", () => {
  const sig = sign(SECRET, ID, TS, BODY);
  assert.equal(verify(SECRET, { id: ID, timestamp: String(TS), signature: `v1,bm90IGl0 ${sig}` }, BODY, TS + 10), true);
  assert.equal(verify(SECRET, { id: ID, timestamp: String(TS), signature: sig }, `${BODY} `, TS), false);
  assert.equal(verify(SECRET, { id: `${ID}x`, timestamp: String(TS), signature: sig }, BODY, TS), false);
  assert.equal(verify(SECRET, { id: ID, timestamp: String(TS + 1), signature: sig }, BODY, TS), false);
  assert.equal(verify(SECRET, { id: ID, timestamp: String(TS), signature: sig }, BODY, TS + 301), false, "older than the 5-minute tolerance");
  assert.equal(verify("whsec_b3RoZXI=", { id: ID, timestamp: String(TS), signature: sig }, BODY, TS), false, "another secret");
});

test("retry schedule: Svix's delays with ±20 % jitter, capped at an eighth of the period, dead after the period; Retry-After when longer", () => {
  const day = 86_400_000;
  assert.deepEqual(SVIX_SCHEDULE_MS, [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000]);
  assert.deepEqual(nextRetry(1, 0, 0, day, null, 0.5), { dead: false, nextAt: 5_000 });
  assert.deepEqual(nextRetry(2, 0, 10_000, day, null, 0.5), { dead: false, nextAt: 310_000 });
  assert.deepEqual(nextRetry(2, 0, 10_000, day, null, 0), { dead: false, nextAt: 10_000 + 240_000 });
  assert.deepEqual(nextRetry(2, 0, 10_000, day, null, 0.999_999), { dead: false, nextAt: 10_000 + 360_000 });
  // The fifth and later retries wait at most 3 h (a day / 8).
  assert.deepEqual(nextRetry(6, 0, 50_000_000, day, null, 0.5), { dead: false, nextAt: 50_000_000 + 10_800_000 });
  assert.deepEqual(nextRetry(7, 0, 80_000_000, day, null, 0.5), { dead: true, nextAt: 80_000_000 + 10_800_000 });
  // A 2 s period: delays of at most 250 ms.
  assert.deepEqual(nextRetry(1, 0, 0, 2000, null, 0.5), { dead: false, nextAt: 250 });
  assert.deepEqual(nextRetry(1, 0, 0, day, 60_000, 0.5), { dead: false, nextAt: 60_000 });
  assert.equal(retryAfterMs("120", 0), 120_000);
  assert.equal(retryAfterMs(new Date(30_000).toUTCString(), 0), 30_000);
  assert.equal(retryAfterMs("soon", 0), null);
  assert.equal(retryAfterMs(undefined, 0), null);
  assert.equal(retryAfterMs("999999", 0), 3_600_000);
});
