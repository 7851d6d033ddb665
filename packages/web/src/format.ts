/** Numbers and times in the user's locale, with words for the edge cases. */

const number = new Intl.NumberFormat(undefined);

export function formatCount(n: number): string {
  return number.format(n);
}

/** Signed count for "new audience updated": +12, −3, 0. */
export function formatDelta(n: number): string {
  if (n > 0) return `+${number.format(n)}`;
  if (n < 0) return `−${number.format(-n)}`;
  return "0";
}

export function formatDateTime(ms: number | string | undefined): string {
  if (ms === undefined) return "—";
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return "—";
  return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export function formatBucketLabel(iso: string, bucketSizeMs: number): string {
  const d = new Date(iso);
  return bucketSizeMs < 86_400_000
    ? d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}
