/**
 * GET /ui/config.json — what the audience tool's sign-in form may pre-fill.
 *
 * The rule: the development credentials (org token, API key, org id, sandbox)
 * are returned ONLY when both hold:
 *   1. the server runs the local development tenant, i.e. no organization is
 *      configured and `<dataDir>/dev-credentials.json` defines the one org the
 *      server serves (what `npm start` does out of the box), and
 *   2. the request comes straight from the loopback interface: its socket
 *      address is 127.0.0.0/8 or ::1, and it carries no Forwarded /
 *      X-Forwarded-For header (a reverse proxy on the same host would
 *      otherwise make every outside caller look local).
 * Otherwise the answer is `{devTenant: false}` and the user types a token.
 * The operator token is never returned: the UI only needs org access.
 */
import type { Config } from "../platform/config.js";
import { readDevCredentials, type DevCredentials } from "../services/dev-bootstrap.js";

export interface UiConfig {
  devTenant: boolean;
  /** Present only when the rule above allows it. */
  credentials?: { token: string; apiKey: string; orgId: string; sandboxName: string };
}

/** The dev credentials when `config` is exactly the local development tenant; undefined otherwise. */
export function devTenantCredentials(config: Config): DevCredentials | undefined {
  let creds: DevCredentials | undefined;
  try {
    creds = readDevCredentials(config.dataDir);
  } catch {
    // A damaged credentials file is the server's problem to report, not the UI's.
    return undefined;
  }
  if (!creds) return undefined;
  const onlyDevOrg = config.organizations.length === 1 && config.organizations[0]!.id === creds.orgId;
  const tokenConfigured = config.auth.staticTokens.some((t) => t.token === creds.token);
  return onlyDevOrg && tokenConfigured ? creds : undefined;
}

export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  if (address === "::1") return true;
  const v4 = address.startsWith("::ffff:") ? address.slice("::ffff:".length) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

export interface RequestFacts {
  remoteAddress: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

export function uiConfigFor(dev: DevCredentials | undefined, req: RequestFacts): UiConfig {
  const proxied = req.headers["forwarded"] !== undefined || req.headers["x-forwarded-for"] !== undefined;
  if (!dev || proxied || !isLoopbackAddress(req.remoteAddress)) return { devTenant: false };
  return { devTenant: true, credentials: { token: dev.token, apiKey: dev.apiKey, orgId: dev.orgId, sandboxName: dev.sandboxName } };
}
