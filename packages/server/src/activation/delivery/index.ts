// The activation plugin's delivery hook (plugin.ts): the webhook deliverer over the profile
// store's transition log. Scheduling uses the wall clock (timeouts and retries are real time,
// whatever clock the tests move for evaluation).
import type { DelivererDeps as PluginDeps } from "../types.js";
import type { DeliveryReports } from "../types.js";
import { startDeliverer } from "./deliverer.js";

export function startWebhookDeliverer(deps: PluginDeps): { stop(): Promise<void>; reports: DeliveryReports } {
  if (deps.profiles === undefined) throw new Error("the deliverer needs the profile store (its transitions are the outbox)");
  return startDeliverer({
    directory: deps.directory,
    profiles: deps.profiles,
    storage: { dataDir: deps.dataDir, ...(deps.databaseUrl === undefined ? {} : { databaseUrl: deps.databaseUrl }) },
    allowPrivateNetworks: deps.allowPrivateNetworks,
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(deps.mergePolicy === undefined ? {} : { mergePolicy: deps.mergePolicy }),
    ...(deps.reconcileMs === undefined ? {} : { reconcileMs: deps.reconcileMs }),
    onError: deps.onError,
  });
}

export { startDeliverer, type Deliverer, type DelivererDeps } from "./deliverer.js";
export { sign, verify } from "./signing.js";
