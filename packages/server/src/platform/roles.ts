/**
 * Once-per-deployment roles (issue #43): with several hubs, each such task runs on the hub holding
 * its lease (cluster/hub-leases.ts decorates the app with `hubLeases`); the all-in-one hub holds
 * every role (`ALL_ROLES`). Here so that the areas gating their work (batch schedules, lifecycle,
 * the partition tick) need not import the cluster module.
 */

/** Roles, in lease order (the lease of role i is partition i of the hubs' lease bucket). */
export const HUB_ROLES = ["schedules", "lifecycle", "partition-tick"] as const;
export type HubRole = (typeof HUB_ROLES)[number];

/** What once-only work asks before it runs: does this hub hold the role now? */
export interface RoleGate {
  holds(role: HubRole): boolean;
  /** `f` runs each time this hub gains the role (absent: the role never moves). */
  onGained?(role: HubRole, f: () => void | Promise<void>): void;
}

/** A hub among several: its id, and the hubs alive (whose running work is not to be recovered). */
export interface HubRoleLeases extends RoleGate {
  readonly hubId: string;
  liveHubs(): Set<string>;
}

/** One hub alone: every role, always. */
export const ALL_ROLES: RoleGate = { holds: () => true };

/** Work claimed this recently is left to its claimant: its hub may have started after the live hubs were read. */
export const RECENT_CLAIM_MS = 10_000;

/**
 * Several hubs: whether work recorded as claimed `by` a hub (at `at`, ms) belongs to another hub
 * still — one alive, or one that claimed it moments ago (or a claim naming no hub, moments ago).
 * `self`'s own claims are not another's (pass none to count this hub among the others).
 */
export function claimedElsewhere(c: { by: string | undefined; self?: string | undefined; live: ReadonlySet<string>; at: number; now: number }): boolean {
  if (c.by !== undefined && c.by === c.self) return false;
  if (c.by !== undefined && c.live.has(c.by)) return true;
  return c.now - c.at < RECENT_CLAIM_MS;
}
