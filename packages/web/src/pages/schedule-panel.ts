/**
 * The sandbox's batch schedule on the audiences list (issue #39 item 1): when
 * batch audiences are evaluated, in words, with the next run time; turned on
 * or off and moved to another time of day with PATCH /config/schedules/{id}.
 * A sandbox without one (a server that creates none by default) is offered a
 * daily schedule. Collapsed to one line, so the list stays in view on a phone.
 */
import type { BatchSchedule } from "../api/client.js";
import { messageOf } from "../api/errors.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { formatDateTime } from "../format.js";
import { cronWords, dailyCron, dailyTime, nextRun } from "../schedule-words.js";

/** The time a new schedule starts at, UTC (changed in the panel afterwards). */
const NEW_SCHEDULE_CRON = "0 0 1 * * ?";

function nextRunText(s: BatchSchedule): string {
  const next = nextRun(s, Date.now());
  if (next === null) return "Off: batch audiences are evaluated only when a job is run.";
  if (next === undefined) return "Next run: as the cron expression says.";
  return `Next run: ${formatDateTime(next)} (your time).`;
}

function whatItEvaluates(s: BatchSchedule): string {
  const segs = s.properties?.segments ?? [];
  if (segs.includes("*")) return "Evaluates every batch audience of this sandbox.";
  return segs.length === 1 ? "Evaluates 1 audience." : `Evaluates ${segs.length} audiences.`;
}

export function createSchedulePanel(ctx: PageContext): HTMLElement {
  const summaryText = h("span", { class: "schedule-summary-text", "data-testid": "schedule-summary" }, "Batch schedule: loading…");
  const body = h("div", { class: "schedule-body" });
  const status = h("p", { class: "hint", "aria-live": "polite", "data-testid": "schedule-status" });
  const panel = h("details", { class: "schedule-panel", "data-testid": "schedule-panel" },
    h("summary", {}, summaryText),
    body,
    status);

  const load = async (): Promise<void> => {
    let list: BatchSchedule[];
    try {
      list = await ctx.api.schedules();
    } catch (err) {
      if (ctx.left()) return;
      summaryText.textContent = "Batch schedule: could not be read";
      body.replaceChildren(notice("error", "The batch schedule could not be loaded.", messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void load() }, "Try again")));
      return;
    }
    if (ctx.left()) return;
    const batch = list.filter((s) => s.type === "batch_segmentation");
    if (batch.length === 0) {
      summaryText.textContent = "Batch schedule: none — batch audiences are evaluated only on demand";
      const create = h("button", { type: "button", class: "button-secondary" }, "Evaluate every day at 01:00 UTC");
      create.addEventListener("click", () => {
        create.disabled = true;
        status.textContent = "Creating the schedule…";
        ctx.api.createDailySchedule(NEW_SCHEDULE_CRON).then(
          () => {
            status.textContent = "Batch audiences are now evaluated every day.";
            void load();
          },
          (err: unknown) => {
            create.disabled = false;
            status.textContent = `The schedule was not created: ${messageOf(err)}`;
          },
        );
      });
      body.replaceChildren(h("p", {}, "No scheduled job evaluates this sandbox's batch audiences; they change only when a segment job is run."), create);
      return;
    }
    const s = batch[0]!;
    summaryText.textContent = `Batch schedule: ${s.state === "active" ? cronWords(s.schedule) : "off"} · ${nextRunText(s)}`;
    body.replaceChildren(scheduleEditor(ctx, s, status, () => void load()));
  };
  void load();
  return panel;
}

function scheduleEditor(ctx: PageContext, s: BatchSchedule, status: HTMLElement, reload: () => void): HTMLElement {
  const enabled = h("input", { type: "checkbox", id: "schedule-enabled", checked: s.state === "active" });
  enabled.addEventListener("change", () => {
    const state = enabled.checked ? "active" : "inactive";
    enabled.disabled = true;
    status.textContent = "Saving…";
    ctx.api.patchSchedule(s.id, { state }).then(
      () => {
        status.textContent = state === "active" ? "The schedule is on." : "The schedule is off: batch audiences are evaluated only on demand.";
        ctx.announce(status.textContent);
        reload();
      },
      (err: unknown) => {
        enabled.disabled = false;
        enabled.checked = !enabled.checked;
        status.textContent = `Not saved: ${messageOf(err)}`;
      },
    );
  });
  const time = dailyTime(s.schedule);
  const timeInput = h("input", { type: "time", id: "schedule-time", value: time ?? "", required: true });
  const saveTime = h("button", { type: "submit", class: "button-secondary" }, "Save time");
  const timeForm = h("form", { class: "schedule-time", novalidate: true },
    h("label", { for: "schedule-time" }, "Time of day (UTC)"), timeInput, saveTime);
  timeForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const cron = dailyCron(timeInput.value);
    if (cron === undefined) {
      status.textContent = "Enter a time of day, such as 01:00.";
      timeInput.focus();
      return;
    }
    saveTime.disabled = true;
    status.textContent = "Saving…";
    ctx.api.patchSchedule(s.id, { schedule: cron }).then(
      () => {
        status.textContent = `Saved: ${cronWords(cron)}.`;
        ctx.announce(status.textContent);
        reload();
      },
      (err: unknown) => {
        saveTime.disabled = false;
        status.textContent = `Not saved: ${messageOf(err)}`;
      },
    );
  });
  return h("div", { class: "schedule-editor" },
    h("p", {}, h("strong", {}, s.name), " — ", cronWords(s.schedule), ". ", whatItEvaluates(s), " ",
      h("span", { "data-testid": "schedule-next" }, nextRunText(s))),
    h("div", { class: "schedule-controls" },
      h("span", { class: "schedule-toggle" }, enabled, h("label", { for: "schedule-enabled" }, "Run this schedule")),
      time === undefined
        ? h("p", { class: "hint" }, `Cron expression ${s.schedule} — change it through the API (PATCH /config/schedules/${s.id}).`)
        : timeForm));
}
