/**
 * Does a query read the profile's experience events? When none of the
 * definitions of a scan does, the scan skips reading events altogether, which
 * is most of the data (stack-notes: events outnumber profiles 10 to 1).
 */
import { walk, type Query } from "@segmentd/pql";

export function usesEvents(query: Query): boolean {
  let found = false;
  walk(query, (n) => {
    if (found) return false;
    if (n.type === "XEvent") found = true;
    return !found;
  });
  return found;
}
