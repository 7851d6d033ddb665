/**
 * One destination (a dataflow): its health figures and last errors, dead letters (replay),
 * runs (streaming delivery per hour, each "Activate now"), what it sends where, and its
 * actions — Activate now (resend every selected audience's members), pause / resume,
 * a new signing secret, delete (flow, then its target and base connection when nothing
 * else uses them). Health, runs and dead letters refresh every few seconds. A file export
 * shows its export runs instead, each successful one's files to download, and "Export now".
 */
import { destinationsApi, SPEC_IDS, type BaseConnection, type DeadLetter, type ExportRun, type Flow, type FlowRun, type TargetConnection } from "../api/destinations.js";
import { ApiFailure, messageOf } from "../api/errors.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { formatCount, formatDateTime } from "../format.js";
import { audiencePath } from "../router.js";
import { exportStatusWords, formatLag, formatPeriod, frequencyWords, lastErrors, natsStreamName, runKind, runStatusWords, selectedOf } from "./destinations-model.js";
import { healthBadge, refresher } from "./destinations.js";
import { secretCard } from "./destinations-create.js";
import { openConfirmDelete } from "./delete-dialog.js";

function figure(label: string, value: string, testid: string, tone = ""): HTMLElement {
  return h("div", { class: `figure${tone === "" ? "" : ` figure-${tone}`}` }, h("dt", {}, label), h("dd", { "data-testid": testid }, value));
}

function healthView(flow: Flow): HTMLElement {
  const s = flow.deliveryStats;
  if (!s) return notice("info", "This server runs no deliverer.", "Delivery statistics appear when segmentd delivers this sandbox's dataflows.");
  return h("div", {},
    h("dl", { class: "figures health-figures" },
      figure("Sent", formatCount(s.sent), "stat-sent", "ok"),
      figure("Failed attempts", formatCount(s.failed), "stat-failed", s.failed > 0 ? "bad" : ""),
      figure("Retrying", formatCount(s.retrying), "stat-retrying", s.retrying > 0 ? "warn" : ""),
      figure("Dead", formatCount(s.dead), "stat-dead", s.dead > 0 ? "bad" : ""),
      figure("Delivery lag", formatLag(s.lagSeconds), "stat-lag")),
    h("p", { class: "last-error-line", "data-testid": "stat-last-error" },
      h("strong", {}, "Last error: "),
      s.lastError ? `${s.lastError.message} (${formatDateTime(s.lastError.at)})` : h("span", { class: "muted" }, "none")));
}

function errorsView(flow: Flow, runs: FlowRun[]): HTMLElement {
  const list = lastErrors(flow.deliveryStats, runs);
  if (list.length === 0) return h("p", { class: "muted" }, "No delivery has failed.");
  return h("div", {}, h("p", { class: "hint" }, "The same error is listed once, with how often it happened among each run's last 10 errors."), h("ol", { class: "error-list plain-list", "data-testid": "error-list" },
    ...list.map((e) => h("li", {},
      h("span", { class: "error-time muted small" }, formatDateTime(e.at)),
      h("span", { class: "error-message" }, e.message, e.count > 1 ? h("span", { class: "error-count muted small" }, ` · ${formatCount(e.count)} times`) : null)))));
}

function runsView(runs: FlowRun[]): HTMLElement {
  if (runs.length === 0) return h("p", { class: "muted" }, "No runs yet: a run appears with the first delivery.");
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table runs-table" },
    h("thead", {}, h("tr", {}, ...["Run", "Started", "Last activity", "Status", "Sent", "Dead", "Failed attempts"].map((c, i) => h("th", { scope: "col", class: i >= 4 ? "num" : undefined }, c)))),
    h("tbody", {}, ...runs.map((r) => h("tr", {},
      h("th", { scope: "row", "data-label": "Run" }, runKind(r), h("span", { class: "muted small block" }, r.id)),
      h("td", { "data-label": "Started" }, formatDateTime(r.createdAt)),
      h("td", { "data-label": "Last activity" }, formatDateTime(r.updatedAt)),
      h("td", { "data-label": "Status" }, h("span", { class: `status status-run-${r.statusSummary.status.toLowerCase()}` }, runStatusWords(r.statusSummary.status))),
      h("td", { class: "num", "data-label": "Sent", "data-testid": "run-sent" }, formatCount(r.metrics.recordSummary.outputRecordCount)),
      h("td", { class: "num", "data-label": "Dead" }, formatCount(r.metrics.recordSummary.failedRecordCount)),
      h("td", { class: "num", "data-label": "Failed attempts" }, formatCount(r.metrics.segmentd?.failedAttempts ?? 0)))))));
}

function deadView(dead: DeadLetter[] | Error, onReplay: () => void, enabled: boolean, nats: boolean): HTMLElement {
  if (dead instanceof Error) return h("p", { class: "muted" }, `The dead letters could not be read: ${dead.message}`);
  if (dead.length === 0) return h("p", { class: "muted", "data-testid": "dead-empty" }, "None: every delivery got through or is still being retried.");
  const total = dead.reduce((n, d) => n + d.items, 0);
  return h("div", {},
    h("div", { class: "card-head" },
      h("p", { class: "dead-summary" }, `${formatCount(dead.length)} ${dead.length === 1 ? "delivery" : "deliveries"} (${formatCount(total)} ${total === 1 ? "change" : "changes"}) ran out of retries.`),
      h("button", { type: "button", class: "button-secondary", disabled: !enabled, title: enabled ? undefined : "Resume the destination to replay", onclick: onReplay }, "Replay dead letters")),
    h("div", { class: "table-wrap" }, h("table", { class: "data-table dead-table" },
      h("thead", {}, h("tr", {}, ...[nats ? "Unit" : "webhook-id", "Changes", "Attempts", "Last error"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ...dead.map((d) => h("tr", {},
        h("th", { scope: "row", "data-label": nats ? "Unit" : "webhook-id" }, h("code", {}, nats ? d.unitId : d.webhookId)),
        h("td", { "data-label": "Changes" }, formatCount(d.items)),
        h("td", { "data-label": "Attempts" }, formatCount(d.attempts)),
        h("td", { "data-label": "Last error" }, d.lastError?.message ?? "—")))))));
}

/** A file flow's export runs: status, when, rows, and each successful run's files to download. */
function exportsView(runs: ExportRun[] | Error, download: (run: ExportRun, name: string) => void): HTMLElement {
  if (runs instanceof Error) return h("p", { class: "muted" }, `The export runs could not be read: ${runs.message}`);
  if (runs.length === 0) return h("p", { class: "muted" }, "No export yet: the first runs at the flow's start.");
  const when = (r: ExportRun) => r.finishedAt ?? r.startedAt ?? r.createdAt;
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table exports-table", "data-testid": "exports-table" },
    h("thead", {}, h("tr", {}, ...["Run", "Status", "When", "Rows", "Files"].map((c, i) => h("th", { scope: "col", class: i === 3 ? "num" : undefined }, c)))),
    h("tbody", {}, ...runs.map((r) => h("tr", {},
      h("th", { scope: "row", "data-label": "Run" }, r.trigger === "manual" ? "Export now" : "Scheduled", h("span", { class: "muted small block" }, r.runId)),
      h("td", { "data-label": "Status" }, h("span", { class: `status status-export-${r.status}`, "data-testid": "export-status" }, exportStatusWords(r.status)), r.error ? h("span", { class: "muted small block" }, r.error) : null),
      h("td", { "data-label": "When" }, when(r) === undefined || when(r) === null ? "—" : formatDateTime(when(r)!)),
      h("td", { class: "num", "data-label": "Rows" }, formatCount(r.rows)),
      h("td", { "data-label": "Files" }, r.status === "success" && r.manifest !== null
        ? h("ul", { class: "plain-list file-list" }, ...r.manifest.files.map((f) => h("li", {},
          h("button", { type: "button", class: "link-button", "data-testid": "export-file", onclick: () => download(r, f.name) }, f.name),
          h("span", { class: "muted small" }, ` · ${formatCount(f.rows)} rows`))))
        : h("span", { class: "muted" }, "—")))))));
}

function fileSettingsView(flow: Flow, target: TargetConnection | Error): HTMLElement {
  const sel = selectedOf(flow);
  const p = target instanceof Error ? {} : (target.params as { format?: string; compression?: string; exportMode?: string; frequency?: string });
  const row = (label: string, ...value: Array<Node | string>) => [h("dt", {}, label), h("dd", {}, ...value)];
  return h("dl", { class: "props" },
    ...row("Format", h("span", { "data-testid": "file-format" }, (p.format ?? "ndjson").toUpperCase()), p.compression === "GZIP" ? ", gzip" : ""),
    ...row("Each run writes", p.exportMode === "FIRST_FULL_THEN_INCREMENTAL" ? "every member first, then the changes since the previous run" : "every member"),
    ...row("How often", frequencyWords(p.frequency)),
    ...row("Audiences", sel.audiences.length === 0 ? h("span", { class: "muted" }, "none") : h("ul", { class: "plain-list", "data-testid": "flow-audiences" },
      ...sel.audiences.map((a) => h("li", {}, h("a", { href: audiencePath(a.id) }, a.name ?? a.id))))),
    ...row("Attributes", sel.attributes.length === 0 ? h("span", { class: "muted" }, "none (identities and memberships only)") : h("span", { "data-testid": "flow-attributes" }, ...sel.attributes.flatMap((a, i) => [i > 0 ? ", " : "", h("code", {}, a)]))),
    ...row("Identity namespaces", sel.namespaces.length === 0 ? "all" : sel.namespaces.join(", ")),
    ...row("Created", formatDateTime(flow.createdAt)));
}

/** Where a NATS destination publishes: subject, server and the flow's stream. */
function natsWhere(flow: Flow, target: TargetConnection): Array<[string, ...Array<Node | string>]> {
  return [
    ["Subject", h("code", { "data-testid": "endpoint" }, target.params.subject ?? "")],
    ["NATS server", target.params.serverUrl !== undefined ? h("code", { "data-testid": "nats-server" }, target.params.serverUrl) : h("span", { "data-testid": "nats-server" }, "segmentd's own")],
    ["Stream", h("code", { "data-testid": "nats-stream" }, natsStreamName(flow.id)), h("span", { class: "muted small" }, " · one message per change, its Nats-Msg-Id the idempotency key")],
  ];
}

function settingsView(flow: Flow, target: TargetConnection | Error, base: BaseConnection | Error | undefined): HTMLElement {
  const sel = selectedOf(flow);
  const headers = target instanceof Error ? {} : target.params.headers ?? {};
  const row = (label: string, ...value: Array<Node | string>) => [h("dt", {}, label), h("dd", {}, ...value)];
  const nats = !(target instanceof Error) && target.connectionSpec.id === SPEC_IDS.nats;
  const where = target instanceof Error
    ? row("Endpoint", h("span", { class: "muted" }, `unknown (${target.message})`))
    : nats
      ? natsWhere(flow, target).flatMap(([label, ...value]) => row(label, ...value))
      : [...row("Endpoint", h("code", { "data-testid": "endpoint" }, target.params.httpEndpoint ?? "")),
        ...row("Authentication", base === undefined ? "…" : base instanceof Error ? h("span", { class: "muted" }, "unknown") : base.auth?.specName ?? "None"),
        ...row("Custom headers", Object.keys(headers).length === 0 ? h("span", { class: "muted" }, "none") : h("ul", { class: "plain-list" }, ...Object.keys(headers).map((k) => h("li", {}, h("code", {}, `${k}: ***`)))))];
  return h("dl", { class: "props" },
    ...where,
    ...row("Audiences", sel.audiences.length === 0 ? h("span", { class: "muted" }, "none") : h("ul", { class: "plain-list", "data-testid": "flow-audiences" },
      ...sel.audiences.map((a) => h("li", {}, h("a", { href: audiencePath(a.id) }, a.name ?? a.id), a.createTime ? h("span", { class: "muted small" }, ` · added ${formatDateTime(Number(a.createTime) * 1000)}`) : null)))),
    ...row("Attributes", sel.attributes.length === 0 ? h("span", { class: "muted" }, "none (identities and memberships only)") : h("span", { "data-testid": "flow-attributes" }, ...sel.attributes.flatMap((a, i) => [i > 0 ? ", " : "", h("code", {}, a)]))),
    ...row("Identity namespaces", sel.namespaces.length === 0 ? "all" : sel.namespaces.join(", ")),
    ...row("Retries", `for ${formatPeriod(flow.delivery.retryPeriodMs)}, then a dead letter`),
    ...row("Batching", `up to ${formatCount(flow.delivery.maxBatchSize)} profiles per ${nats ? "publish batch" : "request"}, ${formatCount(flow.delivery.concurrency)} in flight`),
    ...row("Created", formatDateTime(flow.createdAt)));
}

export async function renderDestinationDetail(ctx: PageContext, id: string): Promise<void> {
  ctx.title("Destination");
  ctx.main.append(h("p", { class: "muted" }, "Loading…"));
  let flow: Flow;
  try {
    flow = await destinationsApi.flow(ctx.api, id);
  } catch (err) {
    if (ctx.left()) return;
    ctx.main.replaceChildren(notice("error", "This destination could not be opened.", messageOf(err), h("a", { class: "button", href: "/destinations" }, "Back to destinations")));
    return;
  }
  if (ctx.left()) return;
  ctx.title(flow.name);
  const targetId = flow.targetConnectionIds[0] ?? "";
  const target = await destinationsApi.target(ctx.api, targetId).catch((err: unknown) => new Error(messageOf(err)));
  const base = target instanceof Error ? undefined : await destinationsApi.connection(ctx.api, target.baseConnectionId).catch((err: unknown) => new Error(messageOf(err)));
  if (ctx.left()) return;
  if (!(target instanceof Error) && target.connectionSpec.id === SPEC_IDS.file) return renderFileDestination(ctx, flow, target);

  const nats = !(target instanceof Error) && target.connectionSpec.id === SPEC_IDS.nats;
  const heading = h("h1", {}, flow.name);
  const badge = h("span", { class: "head-badge" });
  const actionStatus = h("div", { class: "form-status action-status", "aria-live": "polite" });
  const health = h("div", { "aria-live": "polite" });
  const errors = h("div");
  const dead = h("div");
  const runs = h("div");
  const settings = h("div");
  const secretBox = h("div");
  const resend = h("button", { type: "button", class: "button" }, "Activate now");
  const toggle = h("button", { type: "button", class: "button-secondary" });
  const rotate = h("button", { type: "button", class: "button-secondary button-small" }, "Replace signing secret");
  const remove = h("button", { type: "button", class: "button-secondary button-danger-outline" }, "Delete");

  const say = (kind: "info" | "error", title: string, detail?: string) => {
    actionStatus.replaceChildren(notice(kind, title, detail));
  };
  const paint = (runList: FlowRun[], deadList: DeadLetter[] | Error) => {
    heading.textContent = flow.name;
    badge.replaceChildren(healthBadge(flow));
    const on = flow.state === "enabled";
    toggle.textContent = on ? "Pause" : "Resume";
    resend.disabled = !on;
    resend.title = on ? "Send every selected audience's current members again" : "Resume the destination to send";
    health.replaceChildren(healthView(flow));
    errors.replaceChildren(errorsView(flow, runList));
    dead.replaceChildren(deadView(deadList, () => void replay(), on, nats));
    runs.replaceChildren(runsView(runList));
    settings.replaceChildren(settingsView(flow, target, base));
  };

  // Reads `load` only when pressed or due, after it is defined below.
  const refresh = refresher(ctx, () => load());
  const load = async () => {
    try {
      const [f, r, d] = await Promise.all([
        destinationsApi.flow(ctx.api, id),
        destinationsApi.runs(ctx.api, id).then((x) => x.items, () => [] as FlowRun[]),
        destinationsApi.deadLetters(ctx.api, id).catch((err: unknown) => new Error(messageOf(err))),
      ]);
      if (ctx.left()) return;
      flow = f;
      paint(r, d);
    } catch (err) {
      if (ctx.left() || gone(ctx, err)) return;
      say("error", "The destination's figures could not be refreshed.", messageOf(err));
    }
    refresh.loaded();
  };

  const act = actor(ctx, actionStatus, () => load());
  resend.addEventListener("click", () => void act(resend, "Activate now", async () => {
    const r = await destinationsApi.resend(ctx.api, id);
    return `Sending every selected audience's current members again (run ${r.runId}).`;
  }));
  toggle.addEventListener("click", () => {
    const on = flow.state === "enabled";
    void act(toggle, on ? "Pausing" : "Resuming", async () => {
      await destinationsApi.setState(ctx.api, id, on ? "disable" : "enable");
      return on ? "Paused: nothing is sent until you resume." : "Resumed: changes are sent again, starting with those made while paused.";
    });
  });
  const replay = () => act(dead.querySelector("button") ?? resend, "Replaying dead letters", async () => {
    const r = await destinationsApi.replayDead(ctx.api, id);
    return `${formatCount(r.replayed)} dead ${r.replayed === 1 ? "letter is" : "letters are"} being sent again.`;
  });
  rotate.addEventListener("click", () => {
    if (!window.confirm("Replace the signing secret? The current one stops signing at once: update the endpoint's verification first.")) return;
    void act(rotate, "Replacing the signing secret", async () => {
      const r = await destinationsApi.rotateSecret(ctx.api, id);
      secretBox.replaceChildren(secretCard(r.signingSecret, "A new signing secret signs every request from now on."));
      return "The signing secret was replaced.";
    });
  });
  remove.addEventListener("click", () => openDeleteDestination(ctx, flow, target instanceof Error ? undefined : target));

  ctx.main.replaceChildren(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "/destinations" }, "Destinations"), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, flow.name)),
    h("div", { class: "page-head" },
      h("div", {}, heading, badge),
      h("div", { class: "actions" }, resend, toggle, remove)),
    actionStatus,
    refresh.element,
    h("section", { class: "card", "aria-labelledby": "health-title" }, h("h2", { id: "health-title" }, "Delivery health"), health),
    h("section", { class: "card", "aria-labelledby": "errors-title" }, h("h2", { id: "errors-title" }, "Last errors"), errors),
    h("section", { class: "card", "aria-labelledby": "dead-title" }, h("h2", { id: "dead-title" }, "Dead letters"), dead),
    h("section", { class: "card", "aria-labelledby": "runs-title" }, h("h2", { id: "runs-title" }, "Runs"), runs),
    h("section", { class: "card", "aria-labelledby": "settings-title" },
      // A NATS destination signs nothing: its messages are its own server's to authenticate.
      h("div", { class: "card-head" }, h("h2", { id: "settings-title" }, "What is sent where"), nats ? null : rotate),
      secretBox, settings),
  );
  await load();
}

/** The page's actions: the button off while it runs, its outcome said, the figures read again. */
function actor(ctx: PageContext, status: HTMLElement, load: () => Promise<void>) {
  return async (button: HTMLButtonElement, what: string, run: () => Promise<string>): Promise<void> => {
    button.disabled = true;
    status.replaceChildren(h("p", { class: "muted" }, `${what}…`));
    try {
      const done = await run();
      if (ctx.left()) return;
      status.replaceChildren(notice("info", done));
      ctx.announce(done);
    } catch (err) {
      if (ctx.left()) return;
      status.replaceChildren(notice("error", `${what} failed.`, messageOf(err)));
    } finally {
      button.disabled = false;
      await load();
    }
  };
}

/** A 404 while refreshing: the destination was deleted (elsewhere); the page says so. */
function gone(ctx: PageContext, err: unknown): boolean {
  if (!(err instanceof ApiFailure && err.status === 404)) return false;
  ctx.main.replaceChildren(notice("error", "This destination no longer exists.", messageOf(err), h("a", { class: "button", href: "/destinations" }, "Back to destinations")));
  return true;
}

/** A file export: its runs with their files, Export now, pause / resume, delete. */
async function renderFileDestination(ctx: PageContext, initial: Flow, target: TargetConnection): Promise<void> {
  let flow = initial;
  const id = flow.id;
  const heading = h("h1", {}, flow.name);
  const badge = h("span", { class: "head-badge" });
  const actionStatus = h("div", { class: "form-status action-status", "aria-live": "polite" });
  const exports = h("div", { "aria-live": "polite" });
  const settings = h("div");
  const exportNow = h("button", { type: "button", class: "button" }, "Export now");
  const toggle = h("button", { type: "button", class: "button-secondary" });
  const remove = h("button", { type: "button", class: "button-secondary button-danger-outline" }, "Delete");
  const say = (kind: "info" | "error", title: string, detail?: string) => actionStatus.replaceChildren(notice(kind, title, detail));

  const download = (run: ExportRun, name: string) => {
    void destinationsApi.downloadFile(ctx.api, id, run.runId, name).then(
      (blob) => {
        // The browser undoes a stored .gz file's Content-Encoding: what it saves is the inner file.
        const a = h("a", { href: URL.createObjectURL(blob), download: name.replace(/\.gz$/, "") });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
        ctx.announce(`Downloaded ${name}`);
      },
      (err: unknown) => say("error", `${name} could not be downloaded.`, messageOf(err)),
    );
  };
  const paint = (runs: ExportRun[] | Error) => {
    heading.textContent = flow.name;
    badge.replaceChildren(healthBadge(flow));
    const on = flow.state === "enabled";
    toggle.textContent = on ? "Pause" : "Resume";
    exportNow.disabled = !on;
    exportNow.title = on ? "Write the audiences' files now, outside the schedule" : "Resume the destination to export";
    exports.replaceChildren(exportsView(runs, download));
    settings.replaceChildren(fileSettingsView(flow, target));
  };
  const refresh = refresher(ctx, () => load());
  const load = async () => {
    try {
      const [f, r] = await Promise.all([
        destinationsApi.flow(ctx.api, id),
        destinationsApi.exportRuns(ctx.api, id).then((x) => x.items, (err: unknown) => new Error(messageOf(err))),
      ]);
      if (ctx.left()) return;
      flow = f;
      paint(r);
    } catch (err) {
      if (ctx.left() || gone(ctx, err)) return;
      say("error", "The destination's exports could not be refreshed.", messageOf(err));
    }
    refresh.loaded();
  };
  const act = actor(ctx, actionStatus, () => load());
  exportNow.addEventListener("click", () => void act(exportNow, "Export now", async () => {
    const r = await destinationsApi.exportNow(ctx.api, id);
    return `Exporting the audiences' members now (run ${r.runId}); its files appear below when it succeeds.`;
  }));
  toggle.addEventListener("click", () => {
    const on = flow.state === "enabled";
    void act(toggle, on ? "Pausing" : "Resuming", async () => {
      await destinationsApi.setState(ctx.api, id, on ? "disable" : "enable");
      return on ? "Paused: no export runs until you resume." : "Resumed: exports run on the schedule again.";
    });
  });
  remove.addEventListener("click", () => openDeleteDestination(ctx, flow, target, "Its schedule stops and its files on the server are removed."));

  ctx.main.replaceChildren(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "/destinations" }, "Destinations"), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, flow.name)),
    h("div", { class: "page-head" }, h("div", {}, heading, badge), h("div", { class: "actions" }, exportNow, toggle, remove)),
    actionStatus,
    refresh.element,
    h("section", { class: "card", "aria-labelledby": "exports-title" }, h("h2", { id: "exports-title" }, "Exports"), exports),
    h("section", { class: "card", "aria-labelledby": "settings-title" }, h("h2", { id: "settings-title" }, "What is written"), settings),
  );
  await load();
}

/** Asks once; deletes the flow, then its target and base connection unless another flow still uses them. */
function openDeleteDestination(ctx: PageContext, flow: Flow, target: TargetConnection | undefined, consequence = "Its deliveries stop at once, including retries and dead letters. The endpoint keeps what it already received."): void {
  const inUse = (err: unknown) => err instanceof ApiFailure && err.status === 409;
  openConfirmDelete(ctx, {
    name: flow.name,
    consequence,
    run: async () => {
      await destinationsApi.deleteFlow(ctx.api, flow.id);
      // The connections go too when this destination was their only user (as the create made them).
      if (target) {
        const kept = await destinationsApi.deleteTarget(ctx.api, target.id).then(() => false, (err: unknown) => (inUse(err) ? true : Promise.reject(err)));
        if (!kept) await destinationsApi.deleteConnection(ctx.api, target.baseConnectionId).catch((err: unknown) => (inUse(err) ? undefined : Promise.reject(err)));
      }
    },
    failure: "The destination was not fully deleted.",
    then: "/destinations",
  });
}
