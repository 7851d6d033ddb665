/**
 * Renders HygieneError in the data-hygiene API's own shapes (hygiene-api.md
 * §1.4): `{error_code, message}`, or the problem-style HYGN body. Errors that
 * are not HygieneErrors are rethrown to the app's handler (gateway and UPS shapes).
 */
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { HygieneError } from "../errors.js";

export function problemBody(err: HygieneError, request: FastifyRequest, sandboxName: string, now: number): Record<string, unknown> {
  const apiKey = request.headers["x-api-key"];
  const additionalContext: Record<string, string | number> = { "Invoking Client ID": typeof apiKey === "string" ? apiKey : "" };
  Object.assign(additionalContext, err.details ?? {});
  return {
    type: `http://ns.adobe.com/aep/errors/${err.code}`,
    title: err.message,
    status: err.status,
    report: {
      tenantInfo: { sandboxName, sandboxId: "not-applicable", imsOrgId: request.orgId ?? "" },
      additionalContext,
    },
    "error-chain": [{ serviceId: "HYGN", errorCode: err.code, invokingServiceId: "acp_privacy_hygiene", unixTimeStampMs: now }],
  };
}

export function hygieneErrorHandler(sandboxOf: (request: FastifyRequest) => string, now: () => number) {
  return (error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): void => {
    if (!(error instanceof HygieneError)) throw error;
    const body = error.shape === "problem" ? problemBody(error, request, sandboxOf(request), now()) : { error_code: error.code, message: error.message };
    reply
      .code(error.status)
      .type("application/json; charset=utf-8")
      .serializer((x) => JSON.stringify(x))
      .send(body);
  };
}
