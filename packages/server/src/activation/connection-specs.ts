/**
 * The destinations segmentd offers, as AEP's Flow Service describes destinations:
 * connection specs with their auth specs (base connection) and target spec (target
 * connection). The ids are segmentd's own (docs/aep-compatibility.md): AEP's catalog
 * ids name destinations segmentd does not have.
 */
import type { DestinationKind } from "./types.js";

export const CONNECTION_SPEC_IDS: Readonly<Record<DestinationKind, string>> = {
  webhook: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a61",
  nats: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a62",
  file: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a63",
};

/** AEP's flow spec for profile-based destinations; the default of a flow that names none. */
export const PROFILE_FLOW_SPEC_ID = "71471eba-b620-49e4-90fd-23f1fa0174d8";

export function kindOfSpec(id: string): DestinationKind | null {
  for (const [k, v] of Object.entries(CONNECTION_SPEC_IDS)) if (v === id) return k as DestinationKind;
  return null;
}

export const FILE_FREQUENCIES = ["DAILY", "EVERY_3_HOURS", "EVERY_6_HOURS", "EVERY_8_HOURS", "EVERY_12_HOURS"] as const;
export const FILE_EXPORT_MODES = ["DAILY_FULL_EXPORT", "FIRST_FULL_THEN_INCREMENTAL"] as const;

const noAuth = { name: "None", type: "None", spec: { $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: {} } };

const headerSpec = {
  type: "object",
  description: "Custom HTTP headers sent with every request (at most 20; values up to 1024 characters). Stored encrypted; responses show \"***\".",
  maxProperties: 20,
  additionalProperties: { type: "string", maxLength: 1024 },
};

/** What `GET /connectionSpecs` lists. */
export function connectionSpecs(): Record<string, unknown>[] {
  const common = { providerId: "segmentd", version: "1.0", attributes: { category: "destination", isDestination: true } };
  return [
    {
      id: CONNECTION_SPEC_IDS.webhook,
      name: "HTTP API",
      description: "Streams profile changes to an HTTP endpoint as AEP's HTTP API destination does, signed per the Standard Webhooks specification",
      ...common,
      authSpec: [
        noAuth,
        {
          name: "Bearer Token",
          type: "BearerToken",
          spec: { type: "object", properties: { token: { type: "string", description: "sent as Authorization: Bearer <token>", maxLength: 4096 } }, required: ["token"] },
        },
        {
          name: "OAuth2 Client Credentials",
          type: "OAuth2ClientCredentials",
          spec: {
            type: "object",
            properties: {
              accessTokenUrl: { type: "string", format: "uri", maxLength: 2048 },
              clientId: { type: "string", maxLength: 1024 },
              clientSecret: { type: "string", maxLength: 4096 },
              scope: { type: "string", maxLength: 1024 },
            },
            required: ["accessTokenUrl", "clientId", "clientSecret"],
          },
        },
      ],
      targetSpec: {
        name: "HTTP endpoint",
        type: "StreamingDestination",
        spec: {
          type: "object",
          properties: {
            httpEndpoint: { type: "string", format: "uri", maxLength: 2048, description: "http(s) URL; loopback, private, link-local and metadata addresses are refused unless activation.allowPrivateNetworks is set" },
            headers: headerSpec,
          },
          required: ["httpEndpoint"],
        },
      },
    },
    {
      id: CONNECTION_SPEC_IDS.nats,
      name: "NATS JetStream subject",
      description: "Publishes every membership transition as one JetStream message (its Nats-Msg-Id the idempotency key) to a subject of a NATS server, for internal consumers",
      ...common,
      authSpec: [noAuth],
      targetSpec: {
        name: "Subject",
        type: "StreamingDestination",
        spec: {
          type: "object",
          properties: {
            subject: { type: "string", maxLength: 200, pattern: "^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$", description: "where each transition is published; one JetStream stream per dataflow (SEGMENTD_FLOW_<flow id>) captures it. Not segmentd.* or _INBOX.*" },
            serverUrl: {
              type: "string", format: "uri", maxLength: 2048,
              description: "nats://host:port or tls://host:port; default: the server's own natsUrl. Loopback, private, link-local and metadata addresses are refused unless activation.allowPrivateNetworks is set",
            },
          },
          required: ["subject"],
        },
      },
    },
    {
      id: CONNECTION_SPEC_IDS.file,
      name: "File export",
      description: "Writes full or incremental member files (NDJSON or CSV, optionally gzip) with a manifest per run, readable through the API",
      ...common,
      authSpec: [noAuth],
      targetSpec: {
        name: "Files",
        type: "FileBased",
        spec: {
          type: "object",
          properties: {
            format: { type: "string", enum: ["ndjson", "csv"], default: "ndjson" },
            compression: { type: "string", enum: ["NONE", "GZIP"], default: "NONE" },
            exportMode: { type: "string", enum: [...FILE_EXPORT_MODES], default: "DAILY_FULL_EXPORT" },
            frequency: { type: "string", enum: [...FILE_FREQUENCIES], default: "DAILY" },
          },
        },
      },
    },
  ];
}
