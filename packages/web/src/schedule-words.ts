/**
 * Batch schedules in words: a Quartz cron expression (seconds first, UTC, as
 * /config/schedules stores it) read as "Every day at 01:00 UTC", the next run
 * time, and the cron a daily time of day writes. Only the shapes the tool
 * offers are read (every day at a time, every hour at a minute); any other
 * expression is shown as written, and its next run is the server's
 * `nextRunTime` when it sends one. Pure (no DOM), unit-tested.
 */

export interface ScheduleLike {
  schedule: string;
  state: "active" | "inactive";
  /** segmentd's next firing (ISO text, epoch seconds or ms), when the server sends it. */
  nextRunTime?: string | number | null;
}

export type CronShape = { kind: "daily"; second: number; minute: number; hour: number } | { kind: "hourly"; second: number; minute: number } | { kind: "other" };

const ANY = new Set(["*", "?"]);

function whole(text: string, max: number): number | undefined {
  if (!/^\d{1,2}$/.test(text)) return undefined;
  const n = Number(text);
  return n <= max ? n : undefined;
}

/** The shape of a Quartz cron expression: "s m h * * ?" is daily, "s m * * * ?" hourly. */
export function cronShape(cron: string): CronShape {
  const f = cron.trim().split(/\s+/);
  if (f.length < 6 || f.length > 7) return { kind: "other" };
  const [s, m, hr, dom, mon, dow, year] = f as [string, string, string, string, string, string, string | undefined];
  if (!ANY.has(dom) || mon !== "*" || !ANY.has(dow) || (year !== undefined && year !== "*")) return { kind: "other" };
  const second = whole(s, 59);
  const minute = whole(m, 59);
  if (second === undefined || minute === undefined) return { kind: "other" };
  if (hr === "*") return { kind: "hourly", second, minute };
  const hour = whole(hr, 23);
  return hour === undefined ? { kind: "other" } : { kind: "daily", second, minute, hour };
}

function two(n: number): string {
  return String(n).padStart(2, "0");
}

/** "HH:MM" in UTC of a daily schedule, for a time input; undefined for other shapes. */
export function dailyTime(cron: string): string | undefined {
  const c = cronShape(cron);
  return c.kind === "daily" ? `${two(c.hour)}:${two(c.minute)}` : undefined;
}

/** The cron of "every day at HH:MM UTC" (the time input's value); undefined when the text is not a time. */
export function dailyCron(hhmm: string): string | undefined {
  const m = /^(\d{2}):(\d{2})(?::\d{2})?$/.exec(hhmm.trim());
  if (!m) return undefined;
  const hour = Number(m[1]);
  const minute = Number(m[2]);
  if (hour > 23 || minute > 59) return undefined;
  return `0 ${minute} ${hour} * * ?`;
}

/** The cron expression in words. */
export function cronWords(cron: string): string {
  const c = cronShape(cron);
  const sec = (s: number) => (s === 0 ? "" : `:${two(s)}`);
  if (c.kind === "daily") return `Every day at ${two(c.hour)}:${two(c.minute)}${sec(c.second)} UTC`;
  if (c.kind === "hourly") return c.minute === 0 && c.second === 0 ? "Every hour, on the hour" : `Every hour at ${two(c.minute)}${sec(c.second)} minutes past`;
  return `Cron “${cron.trim()}” (Quartz, UTC)`;
}

/** The next firing strictly after `now` (epoch ms) of a daily or hourly cron; undefined for other shapes. */
export function nextFiring(cron: string, now: number): number | undefined {
  const c = cronShape(cron);
  if (c.kind === "other") return undefined;
  const d = new Date(now);
  if (c.kind === "daily") {
    let t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), c.hour, c.minute, c.second);
    if (t <= now) t += 86_400_000;
    return t;
  }
  let t = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), c.minute, c.second);
  if (t <= now) t += 3_600_000;
  return t;
}

/** When the schedule runs next: the server's figure when it gives one, else computed here; null when inactive. */
export function nextRun(s: ScheduleLike, now: number): number | null | undefined {
  if (s.state !== "active") return null;
  if (s.nextRunTime !== undefined && s.nextRunTime !== null) {
    // Epoch seconds (AEP's createEpoch style) or milliseconds, or ISO text.
    const t = typeof s.nextRunTime === "number" ? (s.nextRunTime < 1e12 ? s.nextRunTime * 1000 : s.nextRunTime) : Date.parse(s.nextRunTime);
    if (Number.isFinite(t)) return t;
  }
  return nextFiring(s.schedule, now);
}

/** The schedule that evaluates batch audience `id`: one naming it or "*" (every batch audience); active ones first. */
export function scheduleOf<T extends ScheduleLike & { properties?: { segments?: string[] } }>(id: string, schedules: readonly T[]): T | undefined {
  const covering = schedules.filter((s) => (s.properties?.segments ?? []).some((x) => x === "*" || x === id));
  return covering.find((s) => s.state === "active") ?? covering[0];
}
