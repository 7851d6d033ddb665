/**
 * An audience's page, in three tabs. Overview: the expression, the method,
 * total qualified and "new audience updated" with its chart over the last 24
 * hours, week or 30 days, and an on-demand batch job with its progress
 * (polled every second until it ends or the user leaves). Members: who is in
 * or has exited (members.ts). Check a profile: why one profile is in or out
 * (check-profile.ts). ?tab=members|check (with &ns=…&id=… to check an
 * identity at once) opens a tab directly.
 */
import { messageOf } from "../api/errors.js";
import type { AudienceMetrics, MetricWindow, SegmentDefinition, SegmentJob } from "../api/types.js";
import { renderChart } from "../chart.js";
import type { PageContext } from "../context.js";
import { append, h, notice } from "../dom.js";
import { segmentsOf } from "../editor/segments.js";
import { formatCount, formatDateTime, formatDelta } from "../format.js";
import { METHOD_HINTS, METHOD_LABELS, methodOf } from "../methods.js";
import { cronWords, nextRun, scheduleOf } from "../schedule-words.js";
import { audiencePath } from "../router.js";
import { methodBadge } from "./audiences.js";
import { createTabs } from "../tabs.js";
import { createBackfillPanel } from "./backfill-panel.js";
import { createCheckProfile } from "./check-profile.js";
import { openDeleteDialog } from "./delete-dialog.js";
import { createMembers } from "./members.js";

export const WINDOWS: ReadonlyArray<{ value: MetricWindow; label: string }> = [
  { value: "24h", label: "Last 24 hours" },
  { value: "7d", label: "Last week" },
  { value: "30d", label: "Last 30 days" },
];

const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const POLL_MS = 1000;

function highlighted(text: string): HTMLElement {
  return h("pre", { class: "pql-view" }, ...segmentsOf(text, []).map((s) => h("span", { class: `tok-${s.kind}` }, s.text)));
}

export async function renderDetails(ctx: PageContext, id: string): Promise<void> {
  ctx.title("Audience");
  ctx.main.append(h("p", { class: "muted" }, "Loading…"));
  let def: SegmentDefinition;
  try {
    def = await ctx.api.getDefinition(id);
  } catch (err) {
    if (ctx.left()) return;
    ctx.main.replaceChildren(notice("error", "This audience could not be opened.", messageOf(err), h("a", { class: "button", href: "/audiences" }, "Back to audiences")));
    return;
  }
  if (ctx.left()) return;
  ctx.title(def.name);
  const method = methodOf(def);
  // The policy's name reads better than its id; the id stays when the list cannot be read.
  const policyCell = h("dd", {}, h("code", {}, def.mergePolicyId));
  ctx.api.mergePolicies().then((list) => {
    const p = list.find((x) => x.id === def.mergePolicyId);
    if (p && !ctx.left()) policyCell.replaceChildren(`${p.name}${p.isActiveOnEdge ? " · active on edge" : ""}`);
  }, () => {});
  // A batch audience: when the scheduled job evaluates it next (or that none will).
  const nextCell = h("dd", { "data-testid": "next-evaluation" }, h("span", { class: "muted" }, "…"));
  if (method === "batch") {
    ctx.api.schedules().then((list) => {
      if (ctx.left()) return;
      const s = scheduleOf(def.id, list.filter((x) => x.type === "batch_segmentation"));
      const next = s ? nextRun(s, Date.now()) : null;
      if (!s || next === null) {
        nextCell.replaceChildren(`Not scheduled: ${s ? "the batch schedule is off" : "no batch schedule evaluates it"}. Run a batch job below, or turn the schedule on in the `, h("a", { href: "/audiences" }, "audiences list"), ".");
      } else {
        nextCell.replaceChildren(next === undefined ? cronWords(s.schedule) : `${formatDateTime(next)} (${cronWords(s.schedule)})`);
      }
    }, (err: unknown) => nextCell.replaceChildren(h("span", { class: "muted" }, `unknown (${messageOf(err)})`)));
  }
  const metricsBox = h("div", { class: "metrics-body", "aria-live": "polite" });
  const jobBox = h("div", { class: "job-box", "aria-live": "polite" });
  let windowChoice: MetricWindow = "24h";

  const windowPicker = h("fieldset", { class: "segmented" },
    h("legend", { class: "visually-hidden" }, "Time range"),
    ...WINDOWS.map((w) => {
      const input = h("input", { type: "radio", name: "metrics-window", id: `window-${w.value}`, value: w.value, checked: w.value === windowChoice });
      input.addEventListener("change", () => {
        if (!input.checked) return;
        windowChoice = w.value;
        void loadMetrics();
      });
      return h("span", { class: "segment" }, input, h("label", { for: `window-${w.value}` }, w.label));
    }));

  let metricsSeq = 0;
  const loadMetrics = async () => {
    const seq = ++metricsSeq;
    metricsBox.setAttribute("aria-busy", "true");
    let m: AudienceMetrics;
    try {
      m = await ctx.api.metrics(def.id, windowChoice);
    } catch (err) {
      if (seq !== metricsSeq || ctx.left()) return;
      metricsBox.setAttribute("aria-busy", "false");
      metricsBox.replaceChildren(notice("error", "The audience's figures could not be loaded.", messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void loadMetrics() }, "Try again")));
      return;
    }
    if (seq !== metricsSeq || ctx.left()) return;
    metricsBox.setAttribute("aria-busy", "false");
    const label = WINDOWS.find((w) => w.value === m.window)!.label.toLowerCase();
    metricsBox.replaceChildren(
      h("dl", { class: "figures" },
        h("div", { class: "figure" }, h("dt", {}, "Total qualified"), h("dd", { "data-testid": "total-qualified" }, formatCount(m.totalQualified))),
        h("div", { class: "figure" }, h("dt", {}, `New audience updated (${label})`), h("dd", { "data-testid": "new-audience-updated" }, formatDelta(m.newAudienceUpdated))),
        h("div", { class: "figure figure-small" }, h("dt", {}, "Qualified / disqualified"), h("dd", {}, `+${formatCount(m.qualified)} / −${formatCount(m.disqualified)}`))),
      m.qualified + m.disqualified === 0
        ? notice("empty", `No streaming or edge changes in the ${label}.`, method === "batch" ? "Batch audiences change only when a segment job runs; new audience updated counts streaming and edge evaluation." : "Profiles appear here as they qualify.")
        : renderChart(m),
      h("p", { class: "muted small" }, `From ${formatDateTime(m.from)} to ${formatDateTime(m.to)}.`));
  };

  let pollTimer: number | undefined;
  ctx.onLeave(() => window.clearTimeout(pollTimer));
  const showJob = (job: SegmentJob) => {
    const processed = job.metrics?.profilesProcessed;
    const total = job.metrics?.totalProfiles;
    const segmented = job.metrics?.segmentedProfileCounter?.[def.id];
    const done = TERMINAL.has(job.status);
    const progress = h("progress", { class: "job-progress", "aria-label": "Job progress", max: 100 });
    if (done) progress.value = 100;
    else if (processed !== undefined && total !== undefined && total > 0) progress.value = Math.min(100, (100 * processed) / total);
    else progress.removeAttribute("value"); // indeterminate until the job reports counts
    jobBox.replaceChildren();
    append(jobBox, [
      h("p", { class: "job-status" }, "Job ", h("code", {}, job.id), " — ", h("strong", { "data-testid": "job-status" }, job.status)),
      progress,
      h("p", { class: "muted small" },
        processed !== undefined ? `${formatCount(processed)}${total !== undefined ? ` of ${formatCount(total)}` : ""} profiles evaluated. ` : "",
        segmented !== undefined ? `${formatCount(segmented)} profiles qualified. ` : "",
        `Updated ${formatDateTime(job.updateTime)}.`),
      job.status === "FAILED" ? notice("error", "The job failed.", (job.errors ?? []).map((e) => e.msg).join("; ") || "The server gave no reason.") : null]);
    if (done) {
      runButton.disabled = false;
      if (job.status === "SUCCEEDED") void loadMetrics();
    }
  };
  const poll = (jobId: string) => {
    pollTimer = window.setTimeout(() => {
      ctx.api.getJob(jobId).then(
        (job) => {
          if (ctx.left()) return;
          showJob(job);
          if (!TERMINAL.has(job.status)) poll(jobId);
        },
        (err: unknown) => {
          if (ctx.left()) return;
          runButton.disabled = false;
          jobBox.append(notice("error", "The job's progress could not be read.", messageOf(err)));
        },
      );
    }, POLL_MS);
  };
  const runButton = h("button", { type: "button", class: "button-secondary" }, "Run batch job now");
  runButton.addEventListener("click", () => {
    runButton.disabled = true;
    jobBox.replaceChildren(h("p", { class: "muted" }, "Starting a segment job…"));
    ctx.api.createJob(def.id).then(
      (job) => {
        if (ctx.left()) return;
        showJob(job);
        if (!TERMINAL.has(job.status)) poll(job.id);
      },
      (err: unknown) => {
        runButton.disabled = false;
        jobBox.replaceChildren(notice("error", "The batch job could not be started.", messageOf(err)));
      },
    );
  });

  const overview = h("div", { class: "details-grid" },
      h("section", { class: "card", "aria-labelledby": "def-title" },
        h("h2", { id: "def-title" }, "Definition"),
        h("dl", { class: "props" },
          h("dt", {}, "Evaluation method"), h("dd", { "data-testid": "method" }, methodBadge(method), " ", h("span", { class: "muted" }, METHOD_HINTS[method])),
          // Only streaming and edge audiences have a query type; a batch one is just evaluated in batch.
          h("dt", {}, "Query type"), h("dd", { "data-testid": "query-type" }, method === "batch" ? "Batch" : def.classification?.queryType ?? "—"),
          method === "batch" ? h("dt", {}, "Next evaluation") : null, method === "batch" ? nextCell : null,
          h("dt", {}, "Merge policy"), policyCell,
          h("dt", {}, "Last changed"), h("dd", {}, formatDateTime(def.updateTime))),
        h("h3", {}, "Expression"),
        def.expression.format === "pql/text" ? highlighted(def.expression.value) : h("pre", { class: "pql-view" }, JSON.stringify(def.expression.value, null, 2))),
      // A streaming or edge audience is filled when saved (issue #40): its backfill's state and progress.
      method === "batch" ? null : createBackfillPanel(ctx, def),
      h("section", { class: "card", "aria-labelledby": "metrics-title" },
        h("div", { class: "card-head" }, h("h2", { id: "metrics-title" }, "Profiles over time"), windowPicker),
        metricsBox),
      h("section", { class: "card", "aria-labelledby": "job-title" },
        h("h2", { id: "job-title" }, "On-demand evaluation"),
        h("p", { class: "muted" }, `Evaluate this audience over every profile now with a segment job${method === "batch" ? "" : ` (it is also evaluated ${METHOD_LABELS[method] === "Edge" ? "on the edge" : "as data streams in"})`}.`),
        runButton,
        jobBox));

  const setAddress = (params: Record<string, string | null>) => {
    const url = new URL(location.href);
    for (const [k, v] of Object.entries(params)) {
      if (v === null) url.searchParams.delete(k);
      else url.searchParams.set(k, v);
    }
    history.replaceState(null, "", url.pathname + url.search);
  };
  const checker = createCheckProfile(ctx, def, (ns, entityId) => setAddress({ tab: "check", ns, id: entityId }));
  const members = createMembers(ctx, def, (ns, entityId) => {
    tabs.select("check", "panel");
    checker.check(ns, entityId);
  });
  const tabs = createTabs("Audience views", [
    { id: "overview", label: "Overview", panel: overview },
    { id: "members", label: "Members", panel: members.element },
    { id: "check", label: "Check a profile", panel: checker.element },
  ], (tab) => {
    if (tab === "members") members.show();
    if (tab !== "check") setAddress({ ns: null, id: null });
  });

  ctx.main.replaceChildren(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "/audiences" }, "Audiences"), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, def.name)),
    h("div", { class: "page-head" },
      h("div", {},
        h("h1", {}, def.name),
        def.description ? h("p", { class: "lead" }, def.description) : null),
      h("div", { class: "actions" },
        h("a", { class: "button-secondary", href: audiencePath(def.id, true) }, "Edit"),
        h("button", { type: "button", class: "button-secondary button-danger-outline", onclick: () => openDeleteDialog(ctx, def) }, "Delete"))),
    tabs.element,
  );
  const query = new URLSearchParams(location.search);
  const tab = query.get("tab");
  tabs.select(tab === "members" || tab === "check" ? tab : "overview");
  const ns = query.get("ns");
  const entityId = query.get("id");
  if (tab === "check" && ns !== null && entityId !== null) checker.check(ns, entityId);
  await loadMetrics();
}
