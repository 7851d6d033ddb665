/**
 * With no organization configured, `segmentd serve` runs a local development
 * tenant: an org, sandbox `prod` (production, default), an API key, an org
 * token and an operator token. They are created once and persisted in
 * `<dataDir>/dev-credentials.json` (mode 0600), so restarts keep them.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Config } from "../platform/config.js";
import { derivedSandboxId } from "./tenancy.js";

export interface DevCredentials {
  orgId: string;
  sandboxName: string;
  sandboxId: string;
  apiKey: string;
  token: string;
  operatorToken: string;
}

export const DEV_CREDENTIALS_FILE = "dev-credentials.json";

function isCredentials(v: unknown): v is DevCredentials {
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  return ["orgId", "sandboxName", "sandboxId", "apiKey", "token", "operatorToken"].every((k) => typeof o[k] === "string" && o[k] !== "");
}

export function readDevCredentials(dataDir: string): DevCredentials | undefined {
  const file = path.join(dataDir, DEV_CREDENTIALS_FILE);
  if (!existsSync(file)) return undefined;
  const v: unknown = JSON.parse(readFileSync(file, "utf8"));
  if (!isCredentials(v)) throw new Error(`${file} is not a valid dev credentials file; delete it to create new credentials`);
  return v;
}

export function loadOrCreateDevCredentials(dataDir: string): { credentials: DevCredentials; created: boolean } {
  const existing = readDevCredentials(dataDir);
  if (existing) return { credentials: existing, created: false };
  const orgId = `${randomBytes(12).toString("hex").toUpperCase()}@AdobeOrg`;
  const credentials: DevCredentials = {
    orgId,
    sandboxName: "prod",
    sandboxId: derivedSandboxId(orgId, "prod"),
    apiKey: `segmentd-dev-${randomBytes(8).toString("hex")}`,
    token: `dev-${randomBytes(24).toString("base64url")}`,
    operatorToken: `op-${randomBytes(24).toString("base64url")}`,
  };
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, DEV_CREDENTIALS_FILE);
  // Write then rename: a crash never leaves a half-written credentials file.
  writeFileSync(`${file}.tmp`, JSON.stringify(credentials, null, 2) + "\n", { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return { credentials, created: true };
}

/** The config with the dev tenant and its credentials added. */
export function withDevTenant(config: Config, c: DevCredentials): Config {
  return {
    ...config,
    organizations: [{ id: c.orgId, sandboxes: [{ name: c.sandboxName, id: c.sandboxId, type: "production", default: true }] }],
    auth: {
      ...config.auth,
      staticTokens: [...config.auth.staticTokens, { token: c.token, orgs: [c.orgId] }],
      apiKeys: [...config.auth.apiKeys, c.apiKey],
      operatorTokens: [...config.auth.operatorTokens, c.operatorToken],
    },
  };
}

/** Copy-pasteable curl lines for the dev tenant. */
export function curlExamples(baseUrl: string, c: DevCredentials): string[] {
  const h = `-H 'Authorization: Bearer ${c.token}' -H 'x-api-key: ${c.apiKey}' -H 'x-gw-ims-org-id: ${c.orgId}' -H 'x-sandbox-name: ${c.sandboxName}'`;
  const body = JSON.stringify({
    name: "US customers",
    schema: { name: "_xdm.context.profile" },
    expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' },
    evaluationInfo: { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } },
  });
  return [
    `curl -s -X POST ${baseUrl}/data/core/ups/segment/definitions ${h} -H 'Content-Type: application/json' -d '${body}'`,
    `curl -s ${baseUrl}/data/core/ups/segment/definitions ${h}`,
    `curl -s ${baseUrl}/data/core/ups/config/mergePolicies ${h}`,
  ];
}
