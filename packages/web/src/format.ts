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

/** "1 profile", "2 profiles", "≈ 1 profile" with `prefix`. */
export function profilesText(n: number, prefix = ""): string {
  return `${prefix}${number.format(n)} ${n === 1 ? "profile" : "profiles"}`;
}

const DAY_MS = 86_400_000;

function sameLocalDay(a: Date, b: Date): boolean {
  return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
}

/**
 * A metrics bucket's label. Hour buckets read by their start ("14:27").
 * Day buckets are 24 hours ending at the same time of day as the window's end
 * (the server splits the window from `now − 7 days`), so a day bucket is named
 * by the local day it ends on: the newest bucket ends now and is "Today", the
 * one before "Yesterday"; labelling by the start would call today's bar
 * yesterday. `now` is for tests.
 */
export function formatBucketLabel(start: string, bucketSizeMs: number, now: number = Date.now()): string {
  const s = new Date(start);
  if (bucketSizeMs < DAY_MS) return s.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  // The instant just before the bucket's end: a bucket [Mon 00:00, Tue 00:00) is Monday's.
  const last = new Date(s.getTime() + bucketSizeMs - 1);
  const today = new Date(now);
  if (sameLocalDay(last, today)) return "Today";
  if (sameLocalDay(last, new Date(now - DAY_MS))) return "Yesterday";
  return last.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}

/** `text` ending as a sentence does (a period added when it has no final punctuation). */
export function sentence(text: string): string {
  const t = text.trim();
  return t === "" || /[.!?…]$/.test(t) ? t : `${t}.`;
}
