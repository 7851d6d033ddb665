// One webhook request: the destination's address checked again at send time (DNS resolved
// anew; the socket connects only to the checked addresses), auth (bearer; OAuth2 client
// credentials with the token cached until shortly before it expires), custom headers, the
// Standard Webhooks headers, and a timeout covering the whole exchange. Each dataflow has its
// own agents, so one receiver's slow sockets never hold another's.
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { urlToHttpOptions } from "node:url";
import { assertPublicTarget, hostOf, safeLookup } from "../url-safety.js";
import type { WebhookTarget } from "../types.js";
import { sign } from "./signing.js";
import { retryAfterMs } from "./retry.js";

/** Largest response body read (the rest is discarded): only the status matters. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export type SendOutcome =
  | { ok: true; status: number }
  | { ok: false; status?: number; message: string; retryAfterMs: number | null };

export interface SenderOptions {
  allowPrivateNetworks: boolean;
  timeoutMs: number;
  /** Identifies segmentd to receivers. */
  userAgent: string;
}

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export class WebhookSender {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 64 });
  private token: { value: string; expiresAt: number; key: string } | null = null;
  /** Parsed URLs by text, with their request options (the flow's URL is parsed once, not per request). */
  private readonly urls = new Map<string, { url: URL; options: http.RequestOptions }>();
  /** URLs whose host is an address literal that passed the check: the answer cannot change (no DNS). */
  private readonly literalOk = new Set<string>();
  private readonly lookup: ReturnType<typeof safeLookup>;

  constructor(private readonly opts: SenderOptions) {
    this.lookup = safeLookup({ allowPrivateNetworks: opts.allowPrivateNetworks });
  }

  private parsed(url: string): { url: URL; options: http.RequestOptions } {
    let u = this.urls.get(url);
    if (u === undefined) {
      const parsed = new URL(url);
      u = { url: parsed, options: urlToHttpOptions(parsed) };
      if (this.urls.size >= 64) this.urls.clear();
      this.urls.set(url, u);
    }
    return u;
  }

  /** The send-time check: names are resolved and checked anew every time; an address literal once. */
  private async checkTarget(url: string): Promise<void> {
    if (this.literalOk.has(url)) return;
    await assertPublicTarget(url, { allowPrivateNetworks: this.opts.allowPrivateNetworks });
    if (isIP(hostOf(this.parsed(url).url)) !== 0 && this.literalOk.size < 64) this.literalOk.add(url);
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /** `body` as bytes is sent (and signed) as it is: no copy, no second encoding. */
  async send(target: WebhookTarget, id: string, body: string | Buffer, now: number): Promise<SendOutcome> {
    try {
      // An address literal already checked needs no await (a turn of the event loop per request).
      if (!this.literalOk.has(target.url)) await this.checkTarget(target.url);
    } catch (err) {
      return { ok: false, message: `Destination address refused at send time: ${(err as Error).message}`, retryAfterMs: null };
    }
    const timestamp = Math.floor(now / 1000);
    const headers: Record<string, string> = {
      ...target.headers,
      "content-type": "application/json",
      "user-agent": this.opts.userAgent,
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": sign(target.signingSecret, id, timestamp, body),
    };
    try {
      const a = target.auth;
      const auth = a.type === "none" ? null : a.type === "bearer" ? `Bearer ${a.token}` : await this.authorization(target, now);
      if (auth !== null) headers.authorization = auth;
    } catch (err) {
      return { ok: false, message: `OAuth2 token request failed: ${(err as Error).message}`, retryAfterMs: null };
    }
    let res: RawResponse;
    try {
      res = await this.request("POST", target.url, headers, body);
    } catch (err) {
      return { ok: false, message: (err as Error).message, retryAfterMs: null };
    }
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
    if (res.status === 401 && target.auth.type === "oauth2") this.token = null;
    const ra = res.status === 429 || res.status === 503 ? retryAfterMs(headerOf(res.headers, "retry-after"), Date.now()) : null;
    const detail = res.body.trim().slice(0, 200);
    return { ok: false, status: res.status, message: `Receiver answered HTTP ${res.status}${detail === "" ? "" : `: ${detail}`}`, retryAfterMs: ra };
  }

  private async authorization(target: WebhookTarget, now: number): Promise<string | null> {
    const a = target.auth;
    if (a.type === "none") return null;
    if (a.type === "bearer") return `Bearer ${a.token}`;
    const key = `${a.tokenUrl}\u0000${a.clientId}\u0000${a.scope ?? ""}`;
    if (this.token !== null && this.token.key === key && this.token.expiresAt > now) return `Bearer ${this.token.value}`;
    await assertPublicTarget(a.tokenUrl, { allowPrivateNetworks: this.opts.allowPrivateNetworks });
    const form = new URLSearchParams({ grant_type: "client_credentials", client_id: a.clientId, client_secret: a.clientSecret, ...(a.scope !== undefined ? { scope: a.scope } : {}) });
    const res = await this.request("POST", a.tokenUrl, { "content-type": "application/x-www-form-urlencoded", accept: "application/json" }, form.toString());
    if (res.status < 200 || res.status >= 300) throw new Error(`token endpoint answered HTTP ${res.status}`);
    let parsed: { access_token?: unknown; expires_in?: unknown };
    try {
      parsed = JSON.parse(res.body) as typeof parsed;
    } catch {
      throw new Error("token endpoint did not answer JSON");
    }
    if (typeof parsed.access_token !== "string" || parsed.access_token === "") throw new Error("token endpoint answered no access_token");
    const ttl = typeof parsed.expires_in === "number" && parsed.expires_in > 0 ? parsed.expires_in * 1000 : 3_600_000;
    // Renewed a little before it expires (or at half its life when that is short).
    this.token = { value: parsed.access_token, expiresAt: now + Math.max(ttl - 30_000, ttl / 2), key };
    return `Bearer ${this.token.value}`;
  }

  private request(method: string, url: string, headers: Record<string, string>, body: string | Buffer): Promise<RawResponse> {
    const { url: u, options } = this.parsed(url);
    const lib = u.protocol === "https:" ? https : http;
    const agent = u.protocol === "https:" ? this.httpsAgent : this.httpAgent;
    // `headers` is this request's own object (built by the caller for it).
    headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.length);
    return new Promise((resolve, reject) => {
      const req = lib.request({ ...options, method, headers, agent, lookup: this.lookup as never }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          if (size < MAX_RESPONSE_BYTES) chunks.push(c);
          size += c.length;
        });
        res.on("end", () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8").slice(0, MAX_RESPONSE_BYTES) });
        });
        res.on("error", (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
      const timer = setTimeout(() => req.destroy(new Error(`Receiver did not answer within ${this.opts.timeoutMs} ms`)), this.opts.timeoutMs);
      req.on("error", (err) => {
        clearTimeout(timer);
        const code = (err as NodeJS.ErrnoException).code;
        reject(new Error(code !== undefined && !err.message.includes(code) ? `${err.message} (${code})` : err.message));
      });
      req.end(body);
    });
  }
}

function headerOf(h: http.IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}
