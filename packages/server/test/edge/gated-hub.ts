/** A hub wrapper for the edge's acknowledgement tests (issue #37): writes held or refused on demand. */
import type { ProfileStore } from "../../src/profiles/store.js";

/**
 * A hub whose appends can be held (hold() until release()) or refused for chosen event ids (a
 * plain error, not transient: the forwarder dead-letters the event). `committed`: the event ids
 * of the appends the store has committed.
 */
export function gatedHub(hub: ProfileStore) {
  let gate: Promise<void> | null = null;
  let open = () => {};
  const refused = new Set<string>();
  const committed = new Set<string>();
  const state = { appendsWaiting: 0, appendSizes: [] as number[] };
  const store = new Proxy(hub, {
    get(target, prop, receiver) {
      if (prop === "append") {
        return async (...args: Parameters<ProfileStore["append"]>) => {
          const records = args[2];
          if (records.some((r) => r.eventId !== null && refused.has(r.eventId))) throw new Error("the hub refuses this event");
          while (gate !== null) {
            state.appendsWaiting++;
            await gate;
            state.appendsWaiting--;
          }
          state.appendSizes.push(records.length);
          const result = await target.append(...args);
          for (const r of records) if (r.eventId !== null) committed.add(r.eventId);
          return result;
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    store,
    state,
    refused,
    committed,
    hold() {
      gate ??= new Promise<void>((resolve) => (open = resolve));
    },
    release() {
      gate = null;
      open();
    },
  };
}
