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

  /** Locations served by edge nodes of their own (the hub's view of them: projection targets only). */
  private readonly remote = new Map<string, LocationStore>();

  /** A location served by this process (interact). */
  get(name: string): LocationStore | undefined {
    return this.stores.get(name);
  }

  /** Adds an edge node's location, served elsewhere, as a projection target (the hub, when its sites report). */
  attachRemote(store: LocationStore): void {
    if (this.stores.has(store.location)) throw new Error(`edge: location '${store.location}' is served by this process and by an edge node`);
    this.remote.set(store.location, store);
  }

  remoteStore(name: string): LocationStore | undefined {
    return this.remote.get(name);
  }

  /** Every location: this process's, then the edge nodes' (projection, forget, the 24-hourly pass). */
  all(): LocationStore[] {
    return this.remote.size === 0 ? [...this.stores.values()] : [...this.stores.values(), ...this.remote.values()];
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
