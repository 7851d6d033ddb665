/**
 * Does a query read stored memberships in a way the columnar back end cannot
 * supply? The resident snapshot holds no `segmentMembership`: the columnar
 * engine feeds `inSegment("literal id")` from the store's current statuses (or
 * this job's results) one id at a time. A query that reads
 * `segmentMembership` as a field, or calls `inSegment` with an id computed from
 * data, would silently see no memberships there, so such a job runs on the
 * in-memory back end over a full scan, where the merged profile carries them.
 */
import { walk, type Query } from "@segmentd/pql";

export function readsStoredMemberships(query: Query): boolean {
  let found = false;
  walk(query, (n) => {
    if (found) return false;
    if (n.type === "Field" && n.name === "segmentMembership") found = true;
    else if (n.type === "Call" && n.name === "inSegment") {
      const id = n.args[0];
      if (id === undefined || id.type !== "Literal" || id.kind !== "string") found = true;
    }
    return !found;
  });
  return found;
}
