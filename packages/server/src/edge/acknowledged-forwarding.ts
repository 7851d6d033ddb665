/**
 * The all-in-one's interact forwarding (issue #37): a request is answered 200 only once the hub
 * forwarder has committed its event (and the edge transitions it decided) to the hub's store,
 * so kill -9 loses no acknowledged event. Every other outcome is an error answer, never a 200:
 *
 *  - the hub refused the event (dead-lettered, hub-forwarder.ts): 422 SEGMENTD-EDGE-EVENT-REFUSED-422
 *    (sent again unchanged it would be refused again);
 *  - the hub did not commit it within `ackTimeoutMs` (away, or far behind), or it was dropped on
 *    shutdown: 503 SEGMENTD-EDGE-BUSY-503 with Retry-After. The event may still reach the hub
 *    later; a retry with the same `_id` is not stored twice (the hub keeps one copy of an event id).
 */
import { ApiError } from "../services/errors.js";
import { EdgeErrorCodes } from "./errors.js";
import type { ForwardItem, HubForwarder } from "./hub-forwarder.js";
import { DeadLetteredError } from "./hub-write-errors.js";
import type { EdgeForwarding } from "./interact.js";

/** Default of HubForwarderOptions.ackTimeoutMs: long against a group commit, short against a client's patience. */
export const DEFAULT_ACK_TIMEOUT_MS = 10_000;

/** Interact's forwarding over the in-process hub forwarder: answered once the hub committed the event. */
export function durableForwarding(forwarder: HubForwarder, ackTimeoutMs = DEFAULT_ACK_TIMEOUT_MS): EdgeForwarding {
  return {
    admit: () => forwarder.admit(),
    enqueue: (item) => acknowledged(forwarder, item, ackTimeoutMs),
  };
}

function acknowledged(forwarder: HubForwarder, item: ForwardItem, ackTimeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // One timer per waiting request: Node keeps timers of one duration in one list (O(1) each).
    const timer = setTimeout(() => {
      reject(new ApiError(503, EdgeErrorCodes.busy, `The hub has not stored the event within ${ackTimeoutMs / 1000} s; retry shortly with the same _id (the hub keeps one copy of an event id)`));
    }, ackTimeoutMs);
    forwarder.forward(item).then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof DeadLetteredError
          ? new ApiError(422, EdgeErrorCodes.eventRefused, "The hub refused to store the event; it is kept as a dead letter for an operator (GET /admin/edge/dead-letters) and would be refused again if sent unchanged")
          : new ApiError(503, EdgeErrorCodes.busy, "The edge could not write the event to the hub; retry shortly with the same _id"));
      },
    );
  });
}
