/**
 * The backfill card of a continuous or edge audience's page (issue #40): when the audience is
 * saved, its members over the profiles already stored are computed at once; the card shows that
 * run's state and progress (polled every second while it is queued or running), why it ran, what
 * it wrote, and runs it again on request.
 */
import { ApiFailure, messageOf } from "../api/errors.js";
import type { Backfill, SegmentDefinition } from "../api/types.js";
import { backfillCounts, backfillHeadline, backfillPercent, isBackfillRunning, reasonWords } from "../backfill-words.js";
import type { PageContext } from "../context.js";
import { append, h, notice } from "../dom.js";
import { formatDateTime } from "../format.js";

const POLL_MS = 1000;

export function createBackfillPanel(ctx: PageContext, def: SegmentDefinition): HTMLElement {
  const body = h("div", { class: "backfill-body", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  const again = h("button", { type: "button", class: "button-secondary" }, "Run the backfill again");
  let timer: number | undefined;
  ctx.onLeave(() => window.clearTimeout(timer));

  const show = (b: Backfill) => {
    const percent = backfillPercent(b);
    const progress = h("progress", { class: "job-progress", "aria-label": "Backfill progress", max: 100 });
    if (percent === null) progress.removeAttribute("value");
    else progress.value = percent;
    const running = isBackfillRunning(b);
    again.disabled = running;
    body.replaceChildren();
    append(body, [
      h("p", { class: "job-status" }, h("strong", { "data-testid": "backfill-state" }, backfillHeadline(b)), percent === null ? "" : ` — ${percent}%`),
      progress,
      h("p", { class: "muted small", "data-testid": "backfill-counts" }, backfillCounts(b)),
      h("p", { class: "muted small" }, `Ran because ${reasonWords(b.reason)}. `,
        b.finishedAt !== null ? `Finished ${formatDateTime(b.finishedAt)}.` : b.startedAt !== null ? `Started ${formatDateTime(b.startedAt)}.` : `Queued ${formatDateTime(b.queuedAt)}.`),
      b.state === "failed" ? notice("error", "The backfill failed.", b.error ?? "The server gave no reason.") : null]);
    if (running) poll();
  };
  const load = async () => {
    try {
      const b = await ctx.api.backfill(def.id);
      if (!ctx.left()) show(b);
    } catch (err) {
      if (ctx.left()) return;
      if (err instanceof ApiFailure && err.status === 404) {
        body.replaceChildren(h("p", { class: "muted", "data-testid": "backfill-state" }, "No backfill has run for this audience yet."));
        return;
      }
      body.replaceChildren(notice("error", "The backfill's progress could not be read.", messageOf(err)));
    }
  };
  const poll = () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => void load(), POLL_MS);
  };
  again.addEventListener("click", () => {
    again.disabled = true;
    ctx.api.rerunBackfill(def.id).then((b) => {
      if (!ctx.left()) show(b);
    }, (err: unknown) => {
      again.disabled = false;
      body.replaceChildren(notice("error", "The backfill could not be started.", messageOf(err)));
    });
  });
  void load();
  return h("section", { class: "card", "aria-labelledby": "backfill-title" },
    h("h2", { id: "backfill-title" }, "Backfill"),
    h("p", { class: "muted" }, "When this audience is saved, its members among the profiles already stored are computed at once; only the net change is written, as transitions by backfill."),
    body,
    again);
}
