/**
 * The benches' reference: a bare Fastify JSON endpoint (the same response schema as a small API
 * answer), in a process of its own so that it is measured as the serving processes are. POST
 * /bare parses the body and answers; /spin?us=N first spins N µs (calibration).
 */
import Fastify from "fastify";

const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
const schema = { response: { 200: { type: "object", properties: { requestId: { type: "string" }, ok: { type: "boolean" } } } } };
app.post("/bare", { schema }, async () => ({ requestId: "r", ok: true }));
app.post<{ Querystring: { us?: string } }>("/spin", { schema }, async (request) => {
  const end = performance.now() + Number(request.query.us ?? 0) / 1000;
  while (performance.now() < end);
  return { requestId: "r", ok: true };
});
const url = await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`listening on ${url}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
