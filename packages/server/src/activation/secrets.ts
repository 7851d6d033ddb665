/**
 * Destination secrets at rest (docs/activation.md "Safety"): AES-256-GCM with a key from
 * the config file (`activation.secretKey`, 32 bytes as base64 or hex) or, without one, a
 * key generated once into `<dataDir>/activation-secret.key` (mode 0600). Each value is
 * bound to the row it belongs to (additional authenticated data: org, sandbox, kind, id),
 * so a ciphertext copied into another tenant's row does not decrypt. The stored form
 * names the key by a short fingerprint, so a server started with another key says so
 * instead of failing obscurely.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export const KEY_FILE = "activation-secret.key";
const VERSION = "v1";

export class SecretKeyError extends Error {}

/** 32 key bytes from base64 (44 chars) or hex (64 chars). */
export function parseSecretKey(text: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, "hex") : Buffer.from(t, "base64");
  if (key.length !== 32 || (!/^[0-9a-f]{64}$/i.test(t) && key.toString("base64") !== t)) {
    throw new SecretKeyError("activation.secretKey must be 32 bytes written as base64 (44 characters) or hex (64 characters)");
  }
  return key;
}

/** The configured key, or the data directory's (created on first use; concurrent starters agree on one file). */
export function loadSecretKey(options: { secretKey?: string | undefined; dataDir: string }): Buffer {
  if (options.secretKey !== undefined) return parseSecretKey(options.secretKey);
  const file = path.join(options.dataDir, KEY_FILE);
  try {
    return parseSecretKey(readFileSync(file, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      if (err instanceof SecretKeyError) throw new SecretKeyError(`${file}: ${err.message}`);
      throw err;
    }
  }
  mkdirSync(options.dataDir, { recursive: true });
  try {
    // "wx": of two processes starting at once, one writes and the other reads its key.
    writeFileSync(file, randomBytes(32).toString("base64") + "\n", { mode: 0o600, flag: "wx" });
    chmodSync(file, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  return parseSecretKey(readFileSync(file, "utf8"));
}

/** What a secret belongs to: its ciphertext only decrypts for this row. */
export interface SecretBinding {
  orgId: string;
  sandboxName: string;
  kind: string;
  id: string;
}

export class SecretBox {
  private readonly keyId: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new SecretKeyError("the activation secret key must be 32 bytes");
    this.keyId = createHash("sha256").update(key).digest("hex").slice(0, 8);
  }

  private static aad(b: SecretBinding): Buffer {
    return Buffer.from(`${b.orgId}\u0000${b.sandboxName}\u0000${b.kind}\u0000${b.id}`, "utf8");
  }

  /** `v1:<key id>:<base64 of iv | tag | ciphertext>` */
  seal(value: unknown, binding: SecretBinding): string {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key, iv);
    c.setAAD(SecretBox.aad(binding));
    const body = Buffer.concat([c.update(JSON.stringify(value), "utf8"), c.final()]);
    return `${VERSION}:${this.keyId}:${Buffer.concat([iv, c.getAuthTag(), body]).toString("base64")}`;
  }

  open<T>(sealed: string, binding: SecretBinding): T {
    const [version, keyId, data] = sealed.split(":");
    if (version !== VERSION || keyId === undefined || data === undefined) throw new SecretKeyError("stored secret has an unknown format");
    if (keyId !== this.keyId) {
      throw new SecretKeyError(`stored secret was encrypted with another key (${keyId}, this server has ${this.keyId}); start every server with the same activation.secretKey`);
    }
    const raw = Buffer.from(data, "base64");
    const d = createDecipheriv("aes-256-gcm", this.key, raw.subarray(0, 12));
    d.setAAD(SecretBox.aad(binding));
    d.setAuthTag(raw.subarray(12, 28));
    try {
      return JSON.parse(Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString("utf8")) as T;
    } catch {
      throw new SecretKeyError("stored secret does not decrypt for this row (tampered with, or moved from another row)");
    }
  }
}

/** A Standard Webhooks signing secret: `whsec_` + base64 of 24 random bytes. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(24).toString("base64")}`;
}
