/**
 * The configured edge locations (e.g. "va6", "irl1"), each with its own store.
 * `/ee/v2/interact` is served by the default location; `/ee/{location}/v2/interact`
 * by the named one. In the embedded default every location is an
 * InMemoryLocationStore in this process.
 */
import { InMemoryLocationStore, type LocationMemoryOptions, type LocationStore } from "./location-store.js";

export interface EdgeLocationsConfig {
  /** Location names; at least one. */
  names: string[];
  /** The location of `/ee/v2/interact`; default the first name. */
  defaultLocation?: string;
  /** Profiles each location keeps in memory; the least recently requested go first (default 100,000). */
  maxProfiles?: number;
  /** A profile no request touched at a location for this long (ms) is dropped there (default 25 h; 0 = never). */
  profileIdleMs?: number;
  /** Profile states the streaming engine keeps in memory, least recently used dropped (default 200,000). */
  streamingMaxProfiles?: number;
}

export const DEFAULT_EDGE_LOCATIONS: EdgeLocationsConfig = { names: ["edge"] };

const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

export class EdgeLocations {
  readonly defaultLocation: string;
  private readonly stores = new Map<string, LocationStore>();

  constructor(config: EdgeLocationsConfig = DEFAULT_EDGE_LOCATIONS, makeStore: (name: string) => LocationStore = (n) => new InMemoryLocationStore(n, memoryOptionsOf(config))) {
    if (config.names.length === 0) throw new Error("edge: at least one location must be configured");
    for (const n of config.names) {
      if (!NAME.test(n)) throw new Error(`edge: location name '${n}' must be 1-32 lower-case letters, digits or '-'`);
      if (this.stores.has(n)) throw new Error(`edge: location '${n}' is configured twice`);
      this.stores.set(n, makeStore(n));
    }
    this.defaultLocation = config.defaultLocation ?? config.names[0]!;
    if (!this.stores.has(this.defaultLocation)) throw new Error(`edge: default location '${this.defaultLocation}' is not among the configured locations`);
  }

  get(name: string): LocationStore | undefined {
    return this.stores.get(name);
  }

  all(): LocationStore[] {
    return [...this.stores.values()];
  }

  names(): string[] {
    return [...this.stores.keys()];
  }
}

function memoryOptionsOf(config: EdgeLocationsConfig): LocationMemoryOptions {
  const o: LocationMemoryOptions = {};
  if (config.maxProfiles !== undefined) o.maxProfiles = config.maxProfiles;
  if (config.profileIdleMs !== undefined) o.idleMs = config.profileIdleMs;
  return o;
}

/** The tenant key of the location stores: the one `tenantKey` (kept under this name for existing callers). */
export { tenantKey as tenantKeyOf } from "../platform/tenant.js";
