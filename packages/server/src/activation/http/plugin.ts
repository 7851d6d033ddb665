/**
 * Destinations and activation: the one entry point the app uses.
 *
 *   await app.register(activationPlugin, { ...auth, dataDir, databaseUrl, activation, clock, audiences, profiles, metrics });
 *   app.activation!.directory   // the dataflows, for the deliverer
 *
 * Opens the activation store and its secret key, serves the Flow Service routes under
 * /data/foundation/flowservice, starts the deliverer once the app is ready and stops it
 * (then closes the store) when the app closes.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { Registry } from "prom-client";
import type { AuthDeps } from "../../http/auth.js";
import type { Clock } from "../../platform/clock.js";
import type { TenantRef } from "../../platform/tenant.js";
import type { ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { FLOWSERVICE_PREFIX, activationRoutes } from "./routes.js";
import { fileExportRoutes } from "./file-routes.js";
import { loadSecretKey, SecretBox } from "../secrets.js";
import { ActivationService } from "../service.js";
import { SourceConnections } from "../source-connections.js";
import { sourceRoutes } from "./source-routes.js";
import { openActivationStore, type ActivationStore } from "../store.js";
import type { DataflowDirectory, DeliveryReports, StartDeliverer } from "../types.js";
export type { DelivererDeps, StartDeliverer } from "../types.js";
import type { Resolver } from "../url-safety.js";
import { startWebhookDeliverer } from "../delivery/index.js";
import { DeliveryCommands } from "../delivery-commands.js";
import { ExportFileAccess } from "../export-file-access.js";

export const ACTIVATION_PLUGIN = "segmentd-activation";

/** What the deliverer is started with. */
// ==== DELIVERY HOOK (h3): the deliverer this plugin starts. Set it here (one spot). ====
const startDeliverer: StartDeliverer | undefined = startWebhookDeliverer;
// ==== END DELIVERY HOOK ====

export interface ActivationPluginOptions extends AuthDeps {
  dataDir: string;
  databaseUrl?: string;
  activation?: { allowPrivateNetworks: boolean; secretKey?: string; reconcileMs?: number };
  clock: Clock;
  /** Which of these audience ids exist in the sandbox (id → name). */
  audiences(tenant: TenantRef, ids: string[]): Promise<Map<string, string>>;
  profiles?: ProfileStore;
  metrics?: Registry;
  natsUrl?: string;
  /** The sandbox's default profile merge policy, for payload attributes. */
  mergePolicy?: (scope: TenantScope) => Promise<MergePolicySpec>;
  onError?: (err: unknown, what: string) => void;
  /** Overrides the hook above (tests; `null`: no deliverer). */
  startDeliverer?: StartDeliverer | null;
  /** Unit tests only: resolve host names without DNS. */
  resolve?: Resolver;
}

export interface Activation {
  service: ActivationService;
  directory: DataflowDirectory;
  store: ActivationStore;
  /** The deliverer's reports, once it runs. */
  reports(): DeliveryReports | undefined;
  /** Resend, replay, export now: here, or on the hub that delivers the flow. */
  commands: DeliveryCommands;
  /** Export runs' files: on this disk, or on the hub that exported them. */
  exportFiles: ExportFileAccess;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Destinations and dataflows; present when the activation plugin is registered. */
    activation?: Activation;
  }
}

export const activationPlugin = fp(
  async (app: FastifyInstance, o: ActivationPluginOptions) => {
    const allowPrivateNetworks = o.activation?.allowPrivateNetworks ?? false;
    const box = new SecretBox(loadSecretKey({ secretKey: o.activation?.secretKey, dataDir: o.dataDir }));
    const store = await openActivationStore({ dataDir: o.dataDir, databaseUrl: o.databaseUrl });
    const sources = new SourceConnections(store, o.clock);
    const service = new ActivationService({
      checkSources: (t, ids) => sources.check(t, ids),
      store, box, clock: o.clock, allowPrivateNetworks, audiences: o.audiences,
      ...(o.resolve ? { resolve: o.resolve } : {}),
      ...(o.onError ? { onError: o.onError } : {}),
      ...(o.natsUrl === undefined ? {} : { natsUrl: o.natsUrl }),
    });
    let deliverer: { stop(): Promise<void>; reports: DeliveryReports } | undefined;
    const reports = () => deliverer?.reports;
    const activation: Activation = { service, directory: service, store, reports, commands: new DeliveryCommands(reports), exportFiles: new ExportFileAccess(reports) };
    app.decorate("activation", activation);
    app.addHook("onClose", async () => {
      try {
        await deliverer?.stop();
      } finally {
        await store.close();
      }
    });
    await app.register(sourceRoutes, { prefix: FLOWSERVICE_PREFIX, authenticator: o.authenticator, tenants: o.tenants, sources });
    await app.register(activationRoutes, { prefix: FLOWSERVICE_PREFIX, authenticator: o.authenticator, tenants: o.tenants, service, reports: activation.reports, commands: activation.commands });
    // File destinations: export runs, their files and "export now" (a segmentd extension).
    await app.register(fileExportRoutes, { prefix: FLOWSERVICE_PREFIX, authenticator: o.authenticator, tenants: o.tenants, service, reports: activation.reports, commands: activation.commands, exportFiles: activation.exportFiles });
    const start = o.startDeliverer === undefined ? startDeliverer : (o.startDeliverer ?? undefined);
    if (start) {
      const onError = o.onError ?? (() => {});
      app.addHook("onReady", async () => {
        deliverer = await start({
          directory: service,
          allowPrivateNetworks,
          clock: o.clock,
          dataDir: o.dataDir,
          ...(o.databaseUrl === undefined ? {} : { databaseUrl: o.databaseUrl }),
          ...(o.profiles === undefined ? {} : { profiles: o.profiles }),
          ...(o.metrics === undefined ? {} : { metrics: o.metrics }),
          ...(o.natsUrl === undefined ? {} : { natsUrl: o.natsUrl }),
          ...(o.mergePolicy === undefined ? {} : { mergePolicy: o.mergePolicy }),
          ...(o.activation?.reconcileMs === undefined ? {} : { reconcileMs: o.activation.reconcileMs }),
          onError,
        });
      });
    }
  },
  { name: ACTIVATION_PLUGIN, fastify: "5.x", dependencies: ["segmentd-profiles"] },
);
