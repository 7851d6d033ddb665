// The edge's figures: what requests grow (the soak's memory samples) and the Prometheus metrics
// of the hub forwarder, the locations and the streaming engine's states.
import { Counter, Gauge, type Registry } from "prom-client";
import type { StreamingFeed } from "../streaming/engine.js";
import type { HubForwarder } from "./hub-forwarder.js";
import { InMemoryLocationStore } from "./location-store.js";
import type { EdgeLocations } from "./locations.js";

/** Sizes of what requests grow (locations, forwarder queue, streaming caches). */
export function memoryStatsOf(locations: EdgeLocations, forwarder: HubForwarder, streaming: StreamingFeed): Record<string, number> {
  const out: Record<string, number> = {};
  for (const loc of locations.all()) {
    if (!(loc instanceof InMemoryLocationStore)) continue;
    const s = loc.sizes();
    out[`location ${loc.location} profiles`] = s.profiles;
    out[`location ${loc.location} events`] = s.events;
    out[`location ${loc.location} evicted`] = s.evicted;
  }
  out["forwarder pending"] = forwarder.pending;
  out["forwarder dead letters"] = forwarder.stats.deadLettered;
  out["forwarder dropped"] = forwarder.stats.dropped;
  out["streaming states"] = streaming.cachedStates;
  out["streaming scheduled"] = streaming.scheduled;
  return out;
}

/**
 * The edge's figures on a Prometheus registry (the app's): dead letters and drops of the hub
 * forwarder, its queue, each location's profiles and evictions, the streaming engine's states.
 * Read when scraped; registered once per registry.
 */
export function registerEdgeMetrics(registry: Registry, rt: { forwarder: HubForwarder; locations: EdgeLocations; streaming: Pick<StreamingFeed, "cachedStates"> }): void {
  if (registry.getSingleMetric("segmentd_edge_dead_letters_total") !== undefined) return;
  const { forwarder, locations, streaming } = rt;
  const counterOf = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  counterOf("segmentd_edge_dead_letters_total", "Edge events the hub refused when written alone: dead-lettered, the rest of their batch delivered", () => forwarder.stats.deadLettered);
  counterOf("segmentd_edge_forward_dropped_total", "Edge events dropped after the hub failed every attempt to write them (transient failures)", () => forwarder.stats.dropped);
  counterOf("segmentd_edge_forwarded_total", "Edge events written to the hub", () => forwarder.stats.forwarded);
  new Gauge({
    name: "segmentd_edge_forward_pending",
    help: "Edge events waiting to be written to the hub (queued + in flight)",
    registers: [registry],
    collect() {
      this.set(forwarder.pending);
    },
  });
  const stores = () => locations.all().filter((l): l is InMemoryLocationStore => l instanceof InMemoryLocationStore);
  new Gauge({
    name: "segmentd_edge_location_profiles",
    help: "Profiles an edge location holds in memory",
    labelNames: ["location"] as const,
    registers: [registry],
    collect() {
      for (const l of stores()) this.set({ location: l.location }, l.size);
    },
  });
  counterOf("segmentd_edge_location_evictions_total", "Profiles edge locations dropped (memory bound or idle), over every location", () => stores().reduce((n, l) => n + l.evicted, 0));
  new Gauge({
    name: "segmentd_streaming_cached_profiles",
    help: "Profile states the streaming engine holds in memory",
    registers: [registry],
    collect() {
      this.set(streaming.cachedStates);
    },
  });
}
