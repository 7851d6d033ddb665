/**
 * The in-process event bus. Services publish facts ("definition.changed") and
 * engines subscribe. It sits behind an interface so that streaming workers and
 * edge locations can later run as their own processes over NATS JetStream
 * without the publishing services changing.
 */

import type { SandboxIdScope } from "./tenant.js";

/** The tenant an event belongs to: the metadata stores' scope (`stores/types.ts` `TenantScope`). */
export type BusTenant = SandboxIdScope;

export interface BusEvents {
  "definition.changed": {
    tenant: BusTenant;
    change: "created" | "updated" | "deleted";
    definitionId: string;
  };
  "mergePolicy.changed": {
    tenant: BusTenant;
    change: "created" | "updated" | "deleted";
    mergePolicyId: string;
    /** An update's previous content (what evaluation read until now): backfills follow a change of it. */
    previous?: { identityGraph: { type: string }; attributeMerge: { type: string; order?: string[] } };
  };
  "datastream.changed": {
    tenant: BusTenant;
    change: "created" | "updated" | "deleted";
    datastreamId: string;
  };
}

export type BusTopic = keyof BusEvents;
export type BusHandler<T extends BusTopic> = (event: BusEvents[T]) => void | Promise<void>;

export interface EventBus {
  publish<T extends BusTopic>(topic: T, event: BusEvents[T]): void;
  /** Returns a function that removes the subscription. */
  subscribe<T extends BusTopic>(topic: T, handler: BusHandler<T>): () => void;
}

type AnyHandler = (event: unknown) => void | Promise<void>;

export class InProcessBus implements EventBus {
  private readonly handlers = new Map<BusTopic, Set<AnyHandler>>();

  constructor(private readonly onHandlerError: (topic: BusTopic, err: unknown) => void = () => {}) {}

  publish<T extends BusTopic>(topic: T, event: BusEvents[T]): void {
    const set = this.handlers.get(topic);
    if (!set) return;
    for (const h of set) {
      // A failing subscriber must never fail the write that published the
      // event: the write is already durable. Errors are reported, not thrown.
      try {
        const r = h(event);
        if (r instanceof Promise) r.catch((err: unknown) => this.onHandlerError(topic, err));
      } catch (err) {
        this.onHandlerError(topic, err);
      }
    }
  }

  subscribe<T extends BusTopic>(topic: T, handler: BusHandler<T>): () => void {
    let set = this.handlers.get(topic);
    if (!set) {
      set = new Set();
      this.handlers.set(topic, set);
    }
    const h = handler as AnyHandler;
    set.add(h);
    return () => set.delete(h);
  }
}
