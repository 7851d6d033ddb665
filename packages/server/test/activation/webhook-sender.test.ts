// One webhook request as the sender makes it, against real HTTP servers on loopback: the Standard
// Webhooks headers (a signature the receiver verifies), custom headers, bearer and OAuth2 client
// credentials (the token fetched once, fetched again after a 401), Retry-After, the timeout, and
// the same sender reused for many requests (its parsed URL and checked address kept).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { verify } from "../../src/activation/delivery/signing.js";
import { WebhookSender } from "../../src/activation/delivery/webhook-sender.js";
import type { WebhookTarget } from "../../src/activation/types.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

interface Seen { url: string; headers: http.IncomingHttpHeaders; body: string }
const seen: Seen[] = [];
let answer: (req: Seen, res: http.ServerResponse) => void = (_, res) => res.end("ok");
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const s = { url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
    seen.push(s);
    answer(s, res);
  });
});
let base = "";
before(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

const target = (auth: WebhookTarget["auth"]): WebhookTarget => ({ kind: "webhook", url: `${base}/hook?x=1`, auth, headers: { "X-Api-Key": "k-1" }, signingSecret: SECRET });
const sender = () => new WebhookSender({ allowPrivateNetworks: true, timeoutMs: 500, userAgent: "segmentd-webhooks/1" });

test("headers, signature and body of every request; a bearer token as given", async () => {
  seen.length = 0;
  answer = (_, res) => res.end("ok");
  const s = sender();
  try {
    const now = Date.now();
    for (let i = 0; i < 3; i++) {
      const body = JSON.stringify([{ n: i, text: "é✓" }]);
      assert.deepEqual(await s.send(target({ type: "bearer", token: "tok-b" }), `msg_${i}`, body, now), { ok: true, status: 200 });
    }
    assert.equal(seen.length, 3);
    seen.forEach((r, i) => {
      const body = JSON.stringify([{ n: i, text: "é✓" }]);
      assert.equal(r.url, "/hook?x=1");
      assert.equal(r.body, body);
      assert.equal(r.headers["content-length"], String(Buffer.byteLength(body)));
      assert.equal(r.headers["content-type"], "application/json");
      assert.equal(r.headers["user-agent"], "segmentd-webhooks/1");
      assert.equal(r.headers["x-api-key"], "k-1");
      assert.equal(r.headers.authorization, "Bearer tok-b");
      assert.equal(r.headers["webhook-id"], `msg_${i}`);
      assert.equal(r.headers["webhook-timestamp"], String(Math.floor(now / 1000)));
      assert.equal(verify(SECRET, { id: `msg_${i}`, timestamp: r.headers["webhook-timestamp"] as string, signature: r.headers["webhook-signature"] as string }, r.body, Math.floor(now / 1000)), true);
    });
  } finally {
    s.close();
  }
});

test("OAuth2 client credentials: one token for many requests, a new one after a 401", async () => {
  seen.length = 0;
  let tokens = 0;
  let refuse = false;
  answer = (r, res) => {
    if (r.url === "/token") {
      tokens++;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ access_token: `tok-${tokens}`, expires_in: 3600 }));
      return;
    }
    if (refuse) {
      refuse = false;
      res.statusCode = 401;
      res.end("expired");
      return;
    }
    res.end("ok");
  };
  const s = sender();
  try {
    const t = target({ type: "oauth2", tokenUrl: `${base}/token`, clientId: "cid", clientSecret: "cs", scope: "write" });
    const now = Date.now();
    assert.equal((await s.send(t, "a", "[]", now)).ok, true);
    assert.equal((await s.send(t, "b", "[]", now)).ok, true);
    refuse = true;
    assert.deepEqual(await s.send(t, "c", "[]", now), { ok: false, status: 401, message: "Receiver answered HTTP 401: expired", retryAfterMs: null });
    assert.equal((await s.send(t, "c", "[]", now)).ok, true);
    const tokenReqs = seen.filter((r) => r.url === "/token");
    assert.equal(tokenReqs.length, 2);
    assert.equal(tokenReqs[0]!.body, "grant_type=client_credentials&client_id=cid&client_secret=cs&scope=write");
    assert.equal(tokenReqs[0]!.headers["content-length"], String(tokenReqs[0]!.body.length));
    assert.deepEqual(seen.filter((r) => r.url !== "/token").map((r) => [r.headers["webhook-id"], r.headers.authorization]),
      [["a", "Bearer tok-1"], ["b", "Bearer tok-1"], ["c", "Bearer tok-1"], ["c", "Bearer tok-2"]]);
  } finally {
    s.close();
  }
});

test("a 503 with Retry-After, and a receiver that does not answer in time", async () => {
  const s = sender();
  try {
    answer = (_, res) => {
      res.statusCode = 503;
      res.setHeader("retry-after", "7");
      res.end("busy");
    };
    assert.deepEqual(await s.send(target({ type: "none" }), "r", "[]", Date.now()), { ok: false, status: 503, message: "Receiver answered HTTP 503: busy", retryAfterMs: 7000 });
    answer = () => undefined; // never answers
    assert.deepEqual(await s.send(target({ type: "none" }), "t", "[]", Date.now()), { ok: false, message: "Receiver did not answer within 500 ms", retryAfterMs: null });
  } finally {
    s.close();
  }
});

test("a refused address at send time: loopback without allowPrivateNetworks", async () => {
  const s = new WebhookSender({ allowPrivateNetworks: false, timeoutMs: 500, userAgent: "segmentd-webhooks/1" });
  try {
    assert.deepEqual(await s.send(target({ type: "none" }), "x", "[]", Date.now()), { ok: false, retryAfterMs: null,
      message: "Destination address refused at send time: Destination address 127.0.0.1 is a loopback address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set" });
  } finally {
    s.close();
  }
});
