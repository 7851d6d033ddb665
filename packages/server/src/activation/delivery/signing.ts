// Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
// `${webhook-id}.${webhook-timestamp}.${body}` with the secret's bytes (base64 after "whsec_"),
// sent as `webhook-signature: v1,<base64>`. A receiver recomputes it and rejects old timestamps.
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from "node:crypto";

export function secretBytes(secret: string): Buffer {
  const b64 = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  const bytes = Buffer.from(b64, "base64");
  if (bytes.length === 0) throw new Error("the signing secret is empty");
  return bytes;
}

/** Decoded secrets, by text: a flow signs every request with the same one. */
const keys = new Map<string, KeyObject>();

function keyOf(secret: string): KeyObject {
  let k = keys.get(secret);
  if (k === undefined) {
    k = createSecretKey(secretBytes(secret));
    if (keys.size >= 256) keys.clear();
    keys.set(secret, k);
  }
  return k;
}

export function sign(secret: string, id: string, timestampSeconds: number, body: string | Uint8Array): string {
  // The body is hashed as it is (no `${id}.${ts}.${body}` copy of a large string).
  return `v1,${createHmac("sha256", keyOf(secret)).update(`${id}.${timestampSeconds}.`).update(body).digest("base64")}`;
}

/** A receiver's check: any of the space-separated v1 signatures matches, and the timestamp is within `toleranceSeconds`. */
export function verify(secret: string, headers: { id: string; timestamp: string; signature: string }, body: string, nowSeconds: number, toleranceSeconds = 300): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowSeconds - ts) > toleranceSeconds) return false;
  const expected = Buffer.from(sign(secret, headers.id, ts, body).slice(3), "base64");
  return headers.signature.split(" ").some((s) => {
    if (!s.startsWith("v1,")) return false;
    const got = Buffer.from(s.slice(3), "base64");
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}
