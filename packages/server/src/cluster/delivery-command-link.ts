/**
 * Several hubs (issue #43): a flow's deliveries run on the hub holding its delivery lease, but
 * "Activate now", replaying dead letters and "Export now" may reach any hub. A hub that does not
 * deliver the flow sends the command as a core NATS request on one subject every hub listens to;
 * only the hub that delivers it (or takes its free lease on the way) answers — with the result,
 * or the error it would have given its own client. No answer within 3 s: the asking hub says so
 * (503, retry shortly).
 */
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { ApiError } from "../services/errors.js";
import { DELIVERY_COMMAND_SUBJECT } from "./subjects.js";

type Scope = { orgId: string; sandboxName: string };

/** The activation side, structurally (cluster does not import activation). */
export interface DeliveryCommandTarget<C> {
  here(scope: Scope, flowId: string, cmd: C): Promise<unknown>;
  elsewhere(err: unknown): boolean;
  forward: ((scope: Scope, flowId: string, cmd: C) => Promise<{ answered: true; result: unknown } | { answered: false }>) | undefined;
}

interface Request<C> {
  v: 1;
  scope: Scope;
  flowId: string;
  cmd: C;
}

type Reply = { ok: unknown } | { error: { status: number; code: string; message: string } };

const TIMEOUT_MS = 3_000;
const text = new TextDecoder();

export function linkDeliveryCommands<C>(nc: NatsConnection, target: DeliveryCommandTarget<C>, onError: (err: unknown) => void): () => void {
  const sub: Subscription = nc.subscribe(DELIVERY_COMMAND_SUBJECT, {
    callback: (err, msg) => {
      if (err !== null) return onError(err);
      let req: Request<C>;
      try {
        req = JSON.parse(text.decode(msg.data)) as Request<C>;
      } catch (e) {
        return onError(e);
      }
      const answer = (r: Reply) => msg.respond(JSON.stringify(r));
      target.here(req.scope, req.flowId, req.cmd).then(
        (ok) => answer({ ok }),
        (e: unknown) => {
          // Not delivered here: the hub that delivers it answers.
          if (target.elsewhere(e)) return;
          if (e instanceof ApiError) answer({ error: { status: e.status, code: e.code, message: e.message } });
          else {
            onError(e);
            answer({ error: { status: 500, code: "SEGMENTD-INTERNAL-500", message: "The hub delivering this flow failed to run the command" } });
          }
        },
      );
    },
  });
  target.forward = async (scope, flowId, cmd) => {
    const req: Request<C> = { v: 1, scope, flowId, cmd };
    let reply: Reply;
    try {
      const m = await nc.request(DELIVERY_COMMAND_SUBJECT, JSON.stringify(req), { timeout: TIMEOUT_MS });
      reply = JSON.parse(text.decode(m.data)) as Reply;
    } catch {
      return { answered: false };
    }
    if ("error" in reply) throw new ApiError(reply.error.status, reply.error.code, reply.error.message);
    return { answered: true, result: reply.ok };
  };
  return () => {
    sub.unsubscribe();
    target.forward = undefined;
  };
}
