/**
 * What the API asks of the server that delivers a flow — "Activate now" (resend), replaying dead
 * letters, "Export now" — run on this server's deliverer when it holds the flow's delivery lease.
 * With several hubs another hub may hold it: then the command goes to that hub (`forward`, set by
 * the hubs' NATS link), and only when no hub answers is it refused (503, retry shortly).
 */
import { ApiError, ErrorCodes } from "../services/errors.js";
import type { TenantScope } from "../profiles/types.js";
import type { DeliveryReports } from "./types.js";

export type DeliveryCommand = { op: "resend"; audienceIds?: string[] } | { op: "replayDead"; unitIds?: string[] } | { op: "exportNow" };

/** The error a deliverer answers for a flow another server delivers. */
export const DELIVERY_ELSEWHERE = "SEGMENTD-DELIVERY-ELSEWHERE-503";

type Reports = DeliveryReports & { files?: { exportNow(scope: TenantScope, flowId: string): Promise<{ runId: string }> } };

export class DeliveryCommands {
  /** Sends a command to the hub that delivers the flow (several hubs; `answered: false` when none did); unset: this server only. */
  forward: ((scope: TenantScope, flowId: string, cmd: DeliveryCommand) => Promise<{ answered: true; result: unknown } | { answered: false }>) | undefined;

  constructor(private readonly reports: () => Reports | undefined) {}

  /** Runs the command here, or on the hub that delivers the flow. */
  async run(scope: TenantScope, flowId: string, cmd: DeliveryCommand): Promise<unknown> {
    try {
      return await this.here(scope, flowId, cmd);
    } catch (err) {
      if (this.forward === undefined || !this.elsewhere(err)) throw err;
      const out = await this.forward(scope, flowId, cmd);
      if (out.answered) return out.result;
      throw new ApiError(503, DELIVERY_ELSEWHERE, `Dataflow '${flowId}' is not delivered by any server that answered (its delivery lease is being taken over); retry shortly`);
    }
  }

  /** Runs the command on this server's deliverer; ApiError DELIVERY_ELSEWHERE when another server delivers the flow. */
  async here(scope: TenantScope, flowId: string, cmd: DeliveryCommand): Promise<unknown> {
    const reports = this.reports();
    if (reports === undefined) throw new ApiError(503, ErrorCodes.unavailable, "Delivery is not running in this server");
    switch (cmd.op) {
      case "resend":
        return reports.resend(scope, flowId, cmd.audienceIds);
      case "replayDead":
        return { replayed: await reports.replayDead(scope, flowId, cmd.unitIds) };
      case "exportNow":
        if (reports.files === undefined) throw new ApiError(503, ErrorCodes.unavailable, "File export is not running in this server");
        return reports.files.exportNow(scope, flowId);
    }
  }

  elsewhere(err: unknown): boolean {
    return err instanceof ApiError && err.code === DELIVERY_ELSEWHERE;
  }
}
