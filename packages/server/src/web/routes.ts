/**
 * The audience tool (packages/web, built into packages/server/static/) served
 * by segmentd:
 *
 *   GET /                       index.html (also for the client routes below,
 *   GET /signin, /audiences,    so that a reload or a shared link opens the
 *       /audiences/*, /destinations, /destinations/*,
 *       /lifecycle                 right page: the SPA fallback)
 *   GET /ui/:file               the bundle (app.js, app.css, …)
 *   GET /ui/config.json         what the sign-in form may pre-fill (ui-config.ts)
 *
 * Register it after the API areas:
 *   await app.register(webPlugin, { config: deps.config });
 *
 * The fallback is an explicit list of client routes rather than a catch-all
 * not-found handler, so that unknown API paths keep their JSON 404.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import fp from "fastify-plugin";
import type { Config } from "../platform/config.js";
import { DEFAULT_STATIC_DIR, readStaticFile } from "./static-files.js";
import { devTenantCredentials, uiConfigFor } from "./ui-config.js";

export interface WebRoutesOptions {
  config: Config;
  /** Where the built UI lives; default packages/server/static. */
  staticDir?: string;
}

export const CLIENT_ROUTES = ["/", "/signin", "/audiences", "/audiences/*", "/destinations", "/destinations/*", "/lifecycle"] as const;

/** Everything the page loads comes from this server: no outside host, no inline script. */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>segmentd — audience tool not built</title></head>
<body><h1>The audience tool is not built</h1>
<p>segmentd is running and its APIs answer, but the web UI's files are missing.
Run <code>npm run build</code> in the segmentd checkout, then reload this page.</p></body></html>
`;

function secure(reply: FastifyReply): FastifyReply {
  return reply.header("content-security-policy", CSP).header("x-content-type-options", "nosniff").header("referrer-policy", "no-referrer");
}

export async function webRoutes(app: FastifyInstance, opts: WebRoutesOptions): Promise<void> {
  const dir = opts.staticDir ?? DEFAULT_STATIC_DIR;
  // Read once: the dev tenant is fixed for the life of the process.
  const dev = devTenantCredentials(opts.config);
  const hide = { schema: { hide: true } };

  const sendIndex = async (_req: unknown, reply: FastifyReply) => {
    const file = await readStaticFile(dir, "index.html");
    secure(reply).header("cache-control", "no-cache");
    if (!file) return reply.code(503).type("text/html; charset=utf-8").send(NOT_BUILT);
    return reply.type(file.type).send(file.body);
  };
  for (const url of CLIENT_ROUTES) app.get(url, hide, sendIndex);

  app.get("/ui/config.json", hide, async (request, reply) => {
    secure(reply).header("cache-control", "no-store");
    return uiConfigFor(dev, { remoteAddress: request.socket.remoteAddress, headers: request.headers });
  });

  app.get<{ Params: { file: string } }>("/ui/:file", hide, async (request, reply) => {
    const file = await readStaticFile(dir, request.params.file);
    secure(reply).header("cache-control", "no-cache");
    if (!file) {
      return reply.code(404).type("text/plain; charset=utf-8").send(`No UI file named ${request.params.file.slice(0, 100)}; run npm run build if the UI is missing.`);
    }
    return reply.type(file.type).send(file.body);
  });
}

/** `webRoutes` as a named, encapsulated plugin (the app's `web` capability). */
export const webPlugin = fp(async (app: FastifyInstance, opts: WebRoutesOptions) => webRoutes(app, opts), { name: "segmentd-web", fastify: "5.x", encapsulate: true });
