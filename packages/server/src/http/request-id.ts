/**
 * Every process's Fastify app (the hub's, an edge node's) names its requests the same way:
 * a client's `x-request-id` when it is a sane token, else a random UUID. Fastify's own default
 * (`req-1`, `req-2`, …) restarts at 1 in every process, so two edge nodes would answer the same ids.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export function requestIdOf(req: IncomingMessage): string {
  const h = req.headers["x-request-id"];
  const v = Array.isArray(h) ? h[0] : h;
  return v && REQUEST_ID.test(v) ? v : randomUUID();
}
