/**
 * PQL's boolean reading of a query result (pql.md §6.4): a segment
 * definition qualifies a profile when its value is true, a non-empty array or
 * any other non-null value; false, null and empty arrays do not qualify.
 * (@segmentd/pql keeps its own `toBoolean` internal; definitions produce
 * booleans in practice, so only these cases matter.)
 */
export function truthy(v: unknown): boolean {
  if (v === true) return true;
  if (v === false || v === null || v === undefined) return false;
  if (typeof v === "number" && Number.isNaN(v)) return false;
  if (Array.isArray(v)) return v.length > 0;
  return true;
}
