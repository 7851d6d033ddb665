// A destination's transport, as the flow runner drives it: one attempt for one unit. The webhook
// transport lives here; NATS in nats-sender.ts.
import type { Dataflow, WebhookTarget } from "../types.js";
import type { ProfilePayload } from "./payload.js";
import type { DeliveryUnit, UnitItem } from "./state-store.js";
import { WebhookSender } from "./webhook-sender.js";

/** What one attempt to deliver a unit came to. */
export type SendResult = { ok: true } | { ok: false; message: string; status?: number; retryAfterMs?: number | null };

export interface SendContext {
  flow: Dataflow;
  /** When the attempt started (epoch ms). */
  now: number;
  /** The unit's profiles as the webhook payload has them (payload.ts): identities and selected attributes. */
  payload(items: readonly UnitItem[]): Promise<ProfilePayload[]>;
  /** The same as a webhook's JSON body, as bytes (selection-cache.ts: profiles kept between requests); absent: JSON of payload(). */
  body?(items: readonly UnitItem[]): Promise<Buffer>;
}

/**
 * A destination's transport (webhook, NATS): one attempt for one unit. The runner owns the rest —
 * units, per-profile order, concurrency, retries and dead letters — the same for every kind.
 */
export interface UnitSender {
  send(u: DeliveryUnit, ctx: SendContext): Promise<SendResult>;
  close(): void;
}

/** The HTTP API destination: the unit as one signed request (webhook-sender.ts). */
export class WebhookUnitSender implements UnitSender {
  private readonly http: WebhookSender;
  constructor(allowPrivateNetworks: boolean, timeoutMs: number) {
    this.http = new WebhookSender({ allowPrivateNetworks, timeoutMs, userAgent: "segmentd-webhooks/1" });
  }
  async send(u: DeliveryUnit, ctx: SendContext): Promise<SendResult> {
    const target = ctx.flow.target as WebhookTarget;
    const body = ctx.body !== undefined ? await ctx.body(u.items) : JSON.stringify(await ctx.payload(u.items));
    const outcome = await this.http.send(target, webhookId(ctx.flow.flowId, u.unitId), body, ctx.now);
    return outcome.ok ? { ok: true } : { ok: false, message: outcome.message, retryAfterMs: outcome.retryAfterMs, ...(outcome.status === undefined ? {} : { status: outcome.status }) };
  }
  close(): void {
    this.http.close();
  }
}

/** The Standard Webhooks message id: one per delivery unit, the same on every attempt and after restarts. */
export function webhookId(flowId: string, unitId: string): string {
  return `msg_${flowId}_${unitId}`;
}
