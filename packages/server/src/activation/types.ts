// Contract between the destinations/dataflows API (activation/*) and the delivery
// engine (activation/delivery/*). Kept free of storage and HTTP concerns so both
// sides, and both stores, can import it without cycles.

import type { MergePolicySpec, TenantScope } from "../profiles/types.js";
import type { Clock } from "../platform/clock.js";
import type { ProfileStore } from "../profiles/store.js";
import type { Registry } from "prom-client";

export type { TenantScope };

export type DestinationKind = "webhook" | "nats" | "file";

export type WebhookAuth =
  | { type: "none" }
  | { type: "bearer"; token: string }
  | { type: "oauth2"; tokenUrl: string; clientId: string; clientSecret: string; scope?: string };

export interface WebhookTarget {
  kind: "webhook";
  url: string;
  auth: WebhookAuth;
  headers: Record<string, string>;
  /** Standard Webhooks secret "whsec_<base64>" (decrypted). */
  signingSecret: string;
}

export interface NatsTarget {
  kind: "nats";
  subject: string;
  /** The target connection's `params.serverUrl` (nats:// or tls://): checked like a webhook URL, when saved and at send time. */
  serverUrl?: string;
  /** Without one: the server's own `natsUrl` (the operator's, not checked). */
  fallbackUrl?: string;
}

export type FileFrequency = "DAILY" | "EVERY_3_HOURS" | "EVERY_6_HOURS" | "EVERY_8_HOURS" | "EVERY_12_HOURS";

export interface FileTarget {
  kind: "file";
  format: "ndjson" | "csv";
  gzip: boolean;
  mode: "full" | "incremental";
  frequency: FileFrequency;
}

export type DestinationTarget = WebhookTarget | NatsTarget | FileTarget;

export interface DeliveryPolicy {
  /** Most profiles per request. */
  maxBatchSize: number;
  /** Longest wait before a partial batch is sent. */
  maxWaitMs: number;
  /** Requests in flight at once for this dataflow. */
  concurrency: number;
  /** Requests per second for this dataflow (0 = unlimited). */
  ratePerSecond: number;
  /** How long a failing transition is retried before it becomes a dead letter. */
  retryPeriodMs: number;
  /** Per-request timeout. */
  timeoutMs: number;
}

export interface SegmentSelector {
  audienceId: string;
  /** epoch ms */
  startTime: number;
  /** when it was added (epoch ms) */
  addedAt: number;
}

export interface ProfileSelectors {
  /** XDM paths as AEP spells them without the "xdm:" prefix, e.g. "person.name.firstName". */
  attributes: string[];
  /** Identity namespace codes, lower-cased. */
  identityNamespaces: string[];
}

export interface Dataflow {
  scope: TenantScope;
  flowId: string;
  name: string;
  state: "enabled" | "disabled";
  target: DestinationTarget;
  delivery: DeliveryPolicy;
  segmentSelectors: SegmentSelector[];
  profileSelectors: ProfileSelectors;
  createdAt: number;
  updatedAt: number;
  /** bumps on every change */
  version: number;
}

export interface DataflowDirectory {
  /** Every enabled dataflow of every tenant (the deliverer's work list), secrets decrypted. */
  listEnabled(): Promise<Dataflow[]>;
  get(scope: TenantScope, flowId: string): Promise<Dataflow | null>;
  /** Called after any create/update/delete (in this process). */
  onChange(listener: (scope: TenantScope, flowId: string) => void): () => void;
}

export interface DeliveryStats {
  sent: number;
  failed: number;
  retrying: number;
  dead: number;
  lagSeconds: number;
  lastError: { at: string; message: string; status?: number } | null;
}

/** Served by the deliverer; the flow-run and flow routes read it. */
export interface DeliveryReports {
  stats(scope: TenantScope, flowId: string): Promise<DeliveryStats>;
  /**
   * Flow runs, newest first. Items are served as they are by `GET /data/foundation/flowservice/runs`, so give them
   * AEP's flow-run shape: `{ id, flowId, createdAt, updatedAt, metrics: { recordSummary: {...}, durationSummary },
   * activities, statusSummary: { status, errors? } }`.
   */
  runs(scope: TenantScope, flowId: string, q: { offset: number; limit: number }): Promise<{ items: unknown[]; total: number }>;
  /** One run by id (`GET /runs/{id}`), null when this tenant has no such run. Optional: without it the route scans runs(). */
  run?(scope: TenantScope, runId: string): Promise<unknown | null>;
  /** AEP "Activate now": send every selected audience's current members again. */
  resend(scope: TenantScope, flowId: string, audienceIds?: string[]): Promise<{ runId: string }>;
  /** Deliveries that ran out of retries, oldest first. */
  deadLetters(scope: TenantScope, flowId: string): Promise<DeadLetter[]>;
  /** Resolves once this server delivers the flow from a fixed log position (false: it does not deliver it). */
  delivering?(scope: TenantScope, flowId: string): Promise<boolean>;
  /** Dead letters back to the flow's queue (all, or these unit ids); how many went back. */
  replayDead(scope: TenantScope, flowId: string, unitIds?: string[]): Promise<number>;
}

export interface DeadLetter {
  unitId: string;
  /** The Standard Webhooks message id every attempt carried. */
  webhookId: string;
  /** Transitions in the delivery. */
  items: number;
  attempts: number;
  lastError: unknown;
}

/** What the activation plugin gives the deliverer it starts. */
export interface DelivererDeps {
  directory: DataflowDirectory;
  /** For `assertPublicTarget` / `safeLookup` at send time. */
  allowPrivateNetworks: boolean;
  clock: Clock;
  dataDir: string;
  databaseUrl?: string;
  profiles?: ProfileStore;
  metrics?: Registry;
  natsUrl?: string;
  /** The sandbox's default profile merge policy: how a payload's attributes and identities are merged (AEP exports with it). */
  mergePolicy?: (scope: TenantScope) => Promise<MergePolicySpec>;
  /** How often the running flows are compared with the stored ones (ms; default 5000). */
  reconcileMs?: number;
  onError: (err: unknown, what: string) => void;
}

export type StartDeliverer = (deps: DelivererDeps) => { stop(): Promise<void>; reports: DeliveryReports } | Promise<{ stop(): Promise<void>; reports: DeliveryReports }>;
