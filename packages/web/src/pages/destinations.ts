/**
 * Destinations: the sandbox's dataflows with their delivery health — sent, failed,
 * retrying, dead, lag and the last error, as GET /flows reports them (deliveryStats) —
 * refreshed on demand and every few seconds while the page is open. The create form
 * and a dataflow's own view are destinations-create.ts and destinations-detail.ts.
 */
import { destinationsApi, SPEC_IDS, type Flow, type TargetConnection } from "../api/destinations.js";
import { messageOf } from "../api/errors.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { formatCount, formatDateTime } from "../format.js";
import { destinationPath } from "../router.js";
import { formatLag, healthOf } from "./destinations-model.js";

export const REFRESH_MS = 5000;
/** The API's cap on flows per sandbox: every page is read. */
const MAX_FLOWS = 200;

export function healthBadge(flow: Pick<Flow, "state" | "deliveryStats">): HTMLElement {
  const hl = healthOf(flow);
  return h("span", { class: `health health-${hl.kind}`, "data-testid": "health" }, hl.label);
}

export async function allFlows(ctx: PageContext): Promise<Flow[]> {
  const out: Flow[] = [];
  while (out.length < MAX_FLOWS) {
    const page = await destinationsApi.flows(ctx.api, out.length);
    out.push(...page.items);
    if (page.items.length === 0 || out.length >= (page._page?.total ?? 0)) break;
  }
  return out;
}

async function endpoints(ctx: PageContext): Promise<Map<string, TargetConnection>> {
  const out = new Map<string, TargetConnection>();
  while (out.size < MAX_FLOWS) {
    const page = await destinationsApi.targets(ctx.api, out.size);
    for (const t of page.items) out.set(t.id, t);
    if (page.items.length === 0 || out.size >= (page._page?.total ?? 0)) break;
  }
  return out;
}

/** A refresh control: the time of the last read, a button, and an every-few-seconds switch (on). */
export function refresher(ctx: PageContext, load: () => Promise<void>): { element: HTMLElement; loaded(): void } {
  const stamp = h("span", { class: "muted small", "data-testid": "updated-at" });
  const auto = h("input", { type: "checkbox", id: "auto-refresh", checked: true });
  let timer: number | undefined;
  let busy = false;
  const run = async () => {
    if (busy) return;
    busy = true;
    try {
      await load();
    } finally {
      busy = false;
    }
  };
  const schedule = () => {
    window.clearTimeout(timer);
    if (auto.checked && !ctx.left()) timer = window.setTimeout(() => void run().then(schedule), REFRESH_MS);
  };
  auto.addEventListener("change", schedule);
  ctx.onLeave(() => window.clearTimeout(timer));
  const button = h("button", { type: "button", class: "button-secondary button-small", onclick: () => void run().then(schedule) }, "Refresh");
  return {
    element: h("div", { class: "refresher" },
      stamp, button,
      h("label", { class: "refresher-auto", for: "auto-refresh" }, auto, `Every ${REFRESH_MS / 1000} s`)),
    loaded() {
      stamp.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      schedule();
    },
  };
}

function table(flows: Flow[], targets: Map<string, TargetConnection>): HTMLElement {
  const num = (label: string, n: number | undefined, testid: string) =>
    h("td", { class: "num", "data-label": label, "data-testid": testid }, n === undefined ? h("span", { class: "muted" }, "—") : formatCount(n));
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table destinations-table" },
    h("caption", { class: "visually-hidden" }, "Destinations of this sandbox"),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Destination"), h("th", { scope: "col" }, "Health"),
      ...["Sent", "Failed", "Retrying", "Dead"].map((c) => h("th", { scope: "col", class: "num" }, c)),
      h("th", { scope: "col", class: "num" }, "Lag"), h("th", { scope: "col" }, "Last error"))),
    h("tbody", {}, ...flows.map((f) => {
      const s = f.deliveryStats;
      const target = targets.get(f.targetConnectionIds[0] ?? "");
      const kind = f.inheritedAttributes?.targetConnections[0]?.connectionSpec.id;
      const where = target?.params.httpEndpoint ?? target?.params.subject ?? (kind === SPEC_IDS.file ? "File export" : "");
      return h("tr", { "data-flow-id": f.id },
        h("th", { scope: "row", "data-label": "Destination" },
          h("a", { class: "row-link", href: destinationPath(f.id) }, f.name),
          where !== "" ? h("span", { class: "muted small block endpoint" }, where) : null),
        h("td", { "data-label": "Health" }, healthBadge(f)),
        num("Sent", s?.sent, "sent"), num("Failed", s?.failed, "failed"), num("Retrying", s?.retrying, "retrying"), num("Dead", s?.dead, "dead"),
        h("td", { class: "num", "data-label": "Lag" }, s ? formatLag(s.lagSeconds) : "—"),
        h("td", { class: "last-error", "data-label": "Last error", "data-testid": "last-error" },
          s?.lastError
            ? h("span", {}, h("span", { class: "block" }, s.lastError.message), h("span", { class: "muted small" }, formatDateTime(s.lastError.at)))
            : h("span", { class: "muted" }, "None")));
    }))));
}

export async function renderDestinations(ctx: PageContext): Promise<void> {
  ctx.title("Destinations");
  const results = h("section", { class: "results", "aria-busy": "true", "aria-label": "Destinations" }, h("p", { class: "muted" }, "Loading destinations…"));
  // Reads `load` only when pressed or due, after it is defined below.
  const refresh = refresher(ctx, () => load());
  const load = async () => {
    let flows: Flow[];
    let targets: Map<string, TargetConnection>;
    try {
      [flows, targets] = await Promise.all([allFlows(ctx), endpoints(ctx).catch(() => new Map<string, TargetConnection>())]);
    } catch (err) {
      if (ctx.left()) return;
      results.setAttribute("aria-busy", "false");
      results.replaceChildren(notice("error", "The destinations could not be loaded.", messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void load() }, "Try again")));
      return;
    }
    if (ctx.left()) return;
    results.setAttribute("aria-busy", "false");
    // Keep keyboard focus on the same row's link across a refresh.
    const focused = (document.activeElement as HTMLElement | null)?.closest?.("tr[data-flow-id]")?.getAttribute("data-flow-id");
    results.replaceChildren(flows.length === 0
      ? notice("empty", "No destinations yet.", `Sandbox ${ctx.session.sandboxName} sends its audiences nowhere. Create a webhook destination to send members, and every change to them, to an HTTP endpoint.`, h("a", { class: "button", href: "/destinations/new" }, "Create destination"))
      : table(flows, targets));
    if (focused) results.querySelector<HTMLElement>(`tr[data-flow-id="${CSS.escape(focused)}"] a`)?.focus();
    refresh.loaded();
  };
  ctx.main.append(
    h("div", { class: "page-head" },
      h("div", {}, h("h1", {}, "Destinations"), h("p", { class: "lead" }, "Where this sandbox's audiences are sent, and how delivery is going.")),
      h("a", { class: "button", href: "/destinations/new" }, "Create destination")),
    refresh.element,
    results,
  );
  await load();
}
