// A location store offering only the asynchronous LocationStore interface, as a location in
// its own process would: interact takes its awaited path instead of the in-process one.
import type { InMemoryLocationStore, LocationStore } from "../../src/edge/location-store.js";

export function asyncOnly(local: InMemoryLocationStore, location: string = local.location): LocationStore {
  return {
    location,
    lookup: (tk, i) => local.lookup(tk, i),
    collect: (tk, i, e, now) => local.collect(tk, i, e, now),
    setEdgeMemberships: (tk, i, c) => local.setEdgeMemberships(tk, i, c),
    holds: (tk, ids) => local.holds(tk, ids),
    project: (tk, pr, o) => local.project(tk, pr, o),
    forget: (tk, ids) => local.forget(tk, ids),
    profiles: (tk) => local.profiles(tk),
    tenantKeys: () => local.tenantKeys(),
  };
}
