/**
 * Issue #37, item 7: `POST /ims/token/v3` throttles failed attempts per client id and per remote
 * address (token buckets), answering 429 `too_many_requests` with Retry-After in IMS's error
 * shape, before the secret is compared; successful use is never throttled; memory is bounded.
 * Over real HTTP from distinct loopback addresses (127.0.0.x); time moves on a ManualClock.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ManualClock } from "../src/platform/clock.js";
import { ConfigError, loadConfig } from "../src/platform/config.js";
import { TOKEN_THROTTLE_DEFAULTS, TokenThrottle } from "../src/services/auth/token-throttle.js";
import { DEFS, ORG_A, startHarness, type Harness } from "./helpers/server-harness.js";

const X = { id: "client-x-0123456789abcdef", secret: "secret-x-0123456789" };
const Y = { id: "client-y-0123456789abcdef", secret: "secret-y-0123456789" };
const T0 = Date.UTC(2026, 10, 29, 3);
const INVALID = { error: "invalid_client", error_description: "invalid client_id or client_secret parameter" };

interface Answer { status: number; retryAfter: string | undefined; json: Record<string, unknown> }

/** A token request sent from a chosen loopback address (the server sees it as request.ip). */
function token(baseUrl: string, from: string, client: { id: string }, secret: string): Promise<Answer> {
  const body = new URLSearchParams([["grant_type", "client_credentials"], ["client_id", client.id], ["client_secret", secret], ["scope", "openid"]]).toString();
  const url = new URL("/ims/token/v3", baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname, port: url.port, path: url.pathname, method: "POST", localAddress: from, agent: false,
      headers: { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(body) },
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => {
        const h = res.headers["retry-after"];
        resolve({ status: res.statusCode ?? 0, retryAfter: Array.isArray(h) ? h[0] : h, json: JSON.parse(text) as Record<string, unknown> });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

function tooMany(who: "for this client_id" | "from this address", seconds: number): Record<string, unknown> {
  return { error: "too_many_requests", error_description: `too many failed attempts ${who}; retry after ${seconds} seconds` };
}

function assertThrottled(r: Answer, who: "for this client_id" | "from this address", seconds: number, label: string): void {
  assert.equal(r.status, 429, `${label}: ${JSON.stringify(r.json)}`);
  assert.equal(r.retryAfter, String(seconds), label);
  assert.deepEqual(r.json, tooMany(who, seconds), label);
}

describe("a configured throttle (3 failures, one more every 2 s)", () => {
  let h: Harness;
  const clock = new ManualClock(T0);
  before(async () => {
    h = await startHarness("ims-throttle", {
      clock,
      patch: (c) => {
        c.auth.clients = [{ clientId: X.id, clientSecret: X.secret, orgs: [ORG_A] }, { clientId: Y.id, clientSecret: Y.secret, orgs: [ORG_A] }];
        c.auth.tokenThrottle = { failures: 3, refillMs: 2000 };
      },
    });
  });
  after(async () => h.close());

  test("wrong secrets: 401 three times, then 429 with Retry-After for the client and the address; others unaffected; after the wait it works", async () => {
    const A = "127.0.0.2";
    const B = "127.0.0.3";
    for (let i = 0; i < 3; i++) assert.deepEqual((await token(h.url, A, X, "wrong")).json, INVALID);
    // The 4th, even with the right secret: nothing tells a guesser whether it was right.
    assertThrottled(await token(h.url, A, X, "wrong"), "from this address", 2, "A, X, wrong");
    assertThrottled(await token(h.url, A, X, X.secret), "from this address", 2, "A, X, right");
    // Another client from another address is served.
    const y = await token(h.url, B, Y, Y.secret);
    assert.equal(y.status, 200, JSON.stringify(y.json));
    // Per client: X is throttled from an address that never failed, right secret or not.
    assertThrottled(await token(h.url, B, X, X.secret), "for this client_id", 2, "B, X, right");
    assertThrottled(await token(h.url, B, X, "wrong"), "for this client_id", 2, "B, X, wrong");
    // Per address: Y, which never failed, is throttled from A.
    assertThrottled(await token(h.url, A, Y, Y.secret), "from this address", 2, "A, Y, right");
    // Half the wait is not enough; Retry-After counts down.
    clock.advance(1000);
    assertThrottled(await token(h.url, B, X, X.secret), "for this client_id", 1, "B, X, after 1 s");
    clock.advance(1000);
    const x = await token(h.url, B, X, X.secret);
    assert.equal(x.status, 200, JSON.stringify(x.json));
    // The token works on the API.
    const api = await fetch(`${h.url}${DEFS}?limit=1`, { headers: { authorization: `Bearer ${x.json.access_token as string}`, "x-api-key": X.id, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod" } });
    assert.equal(api.status, 200);
    assert.equal((await token(h.url, A, Y, Y.secret)).status, 200);
    // One refilled attempt each: the next failure from A empties it again.
    assert.deepEqual((await token(h.url, A, Y, "wrong")).json, INVALID);
    assertThrottled(await token(h.url, A, Y, Y.secret), "from this address", 2, "A after one more failure");
  });

  test("unknown client ids share one bucket: random ids neither grow memory nor lock out a configured client", async () => {
    const C = "127.0.0.4";
    const D = "127.0.0.5";
    clock.advance(60_000);
    for (let i = 0; i < 3; i++) assert.deepEqual((await token(h.url, [C, D, "127.0.0.6"][i]!, { id: `nobody-${i}` }, "x")).json, INVALID);
    assertThrottled(await token(h.url, "127.0.0.7", { id: "nobody-else" }, "x"), "for this client_id", 2, "unknown ids");
    assert.equal((await token(h.url, "127.0.0.7", Y, Y.secret)).status, 200);
  });

  test("successful use is not throttled: 40 tokens in a row from one address", async () => {
    for (let i = 0; i < 40; i++) {
      const r = await token(h.url, "127.0.0.8", Y, Y.secret);
      assert.equal(r.status, 200, `request ${i}: ${JSON.stringify(r.json)}`);
    }
  });
});

describe("the defaults (10 failures, one more per second)", () => {
  let h: Harness;
  const clock = new ManualClock(T0);
  before(async () => {
    h = await startHarness("ims-throttle-defaults", { clock, patch: (c) => { c.auth.clients = [{ clientId: X.id, clientSecret: X.secret, orgs: [ORG_A] }]; } });
  });
  after(async () => h.close());

  test("a burst of 30 wrong secrets: 10 answered 401, 20 refused 429 Retry-After 1; a second later one more attempt", async () => {
    const statuses = await Promise.all(Array.from({ length: 30 }, () => token(h.url, "127.0.0.9", X, "wrong")));
    assert.equal(statuses.filter((r) => r.status === 401).length, TOKEN_THROTTLE_DEFAULTS.failures);
    const refused = statuses.filter((r) => r.status === 429);
    assert.equal(refused.length, 20);
    for (const r of refused) assert.equal(r.retryAfter, "1");
    clock.advance(TOKEN_THROTTLE_DEFAULTS.refillMs);
    assert.equal((await token(h.url, "127.0.0.9", X, X.secret)).status, 200);
    assert.equal((await token(h.url, "127.0.0.9", X, "wrong")).status, 401);
    assert.equal((await token(h.url, "127.0.0.9", X, X.secret)).status, 429);
  });
});

test("memory: at most maxAddresses addresses are tracked, the least recently failing dropped first", () => {
  const clock = new ManualClock(T0);
  const t = new TokenThrottle(clock, new Set([X.id]), { failures: 1, refillMs: 60_000, maxAddresses: 3 });
  for (let i = 0; i < 1000; i++) t.failed(`guess-${i}`, `10.0.${Math.floor(i / 256)}.${i % 256}`);
  assert.equal(t.trackedAddresses, 3);
  // The three most recent are still throttled; an older one was dropped and starts afresh.
  assert.deepEqual(t.check(undefined, "10.0.3.231"), { by: "address", retryAfterS: 60 });
  assert.equal(t.check(undefined, "10.0.0.0"), null);
  // Every unknown id shares one client bucket; a configured client keeps its own.
  assert.deepEqual(t.check("never-seen", "192.0.2.1"), { by: "client", retryAfterS: 60 });
  assert.equal(t.check(X.id, "192.0.2.1"), null);
});

test("auth.tokenThrottle in the config file: positive integers, known keys", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-throttle-"));
  try {
    const file = path.join(dir, "segmentd.config.json");
    const load = (tokenThrottle: unknown) => {
      writeFileSync(file, JSON.stringify({ auth: { tokenThrottle } }));
      return loadConfig({ cwd: dir, env: {} });
    };
    assert.deepEqual(load({ failures: 5, refillMs: 500, maxAddresses: 100 }).auth.tokenThrottle, { failures: 5, refillMs: 500, maxAddresses: 100 });
    assert.throws(() => load({ failures: 0 }), new ConfigError(`${file}: auth.tokenThrottle.failures must be a positive integer`));
    assert.throws(() => load({ refillMs: 1.5 }), new ConfigError(`${file}: auth.tokenThrottle.refillMs must be a non-negative integer`));
    assert.throws(() => load({ burst: 3 }), new ConfigError(`${file}: auth.tokenThrottle: unknown key "burst"`));
    assert.throws(() => load([]), new ConfigError(`${file}: auth.tokenThrottle must be an object`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
