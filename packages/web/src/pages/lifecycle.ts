/**
 * Data lifecycle: each quota's consumption against its allowance as a bar,
 * then the work orders and dataset expirations with their statuses. The three
 * parts load independently, so one failing endpoint leaves the others usable
 * and says what failed.
 */
import { messageOf } from "../api/errors.js";
import type { DatasetExpiration, QuotaEntry, WorkOrder } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { formatCount, formatDateTime } from "../format.js";

const QUOTA_TITLES: Readonly<Record<string, string>> = {
  datasetExpirationQuota: "Dataset expirations",
  dailyConsumerDeleteIdentitiesQuota: "Identities deleted today",
  monthlyConsumerDeleteIdentitiesQuota: "Identities deleted this month",
  monthlyUpdatedFieldIdentitiesQuota: "Identities updated this month",
};

/** Share of the allowance used, 0–100; an allowance of 0 is full as soon as anything is used. */
export function usedPercent(q: Pick<QuotaEntry, "consumed" | "quota">): number {
  if (q.quota <= 0) return q.consumed > 0 ? 100 : 0;
  return Math.min(100, (100 * q.consumed) / q.quota);
}

function statusBadge(status: string): HTMLElement {
  return h("span", { class: `status status-${status.toLowerCase().replace(/[^a-z]/g, "")}` }, status);
}

function section(title: string, id: string, body: HTMLElement): HTMLElement {
  return h("section", { class: "card", "aria-labelledby": id }, h("h2", { id }, title), body);
}

async function fill<T>(box: HTMLElement, load: () => Promise<T>, render: (v: T) => HTMLElement, what: string, ctx: PageContext): Promise<void> {
  box.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const v = await load();
    if (!ctx.left()) box.replaceChildren(render(v));
  } catch (err) {
    if (!ctx.left()) box.replaceChildren(notice("error", `${what} could not be loaded.`, messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void fill(box, load, render, what, ctx) }, "Try again")));
  }
}

function quotasView(list: QuotaEntry[]): HTMLElement {
  if (list.length === 0) return notice("empty", "No quotas reported.");
  return h("ul", { class: "quotas" }, ...list.map((q) => {
    const pct = usedPercent(q);
    const fillBar = h("span", { class: `quota-fill${pct >= 90 ? " is-high" : ""}` });
    fillBar.style.width = `${pct}%`;
    const title = QUOTA_TITLES[q.name] ?? q.name;
    return h("li", { class: "quota" },
      h("div", { class: "quota-head" }, h("span", { class: "quota-name" }, title), h("span", { class: "quota-figures" }, `${formatCount(q.consumed)} of ${formatCount(q.quota)} used`)),
      h("div", { class: "quota-bar", role: "meter", "aria-label": title, "aria-valuemin": 0, "aria-valuemax": q.quota, "aria-valuenow": q.consumed, "aria-valuetext": `${formatCount(q.consumed)} of ${formatCount(q.quota)}` }, fillBar),
      h("p", { class: "muted small" }, q.description));
  }));
}

function workOrdersView(list: WorkOrder[]): HTMLElement {
  if (list.length === 0) return notice("empty", "No work orders.", "Record deletes and updates requested through the data lifecycle API appear here.");
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table" },
    h("thead", {}, h("tr", {}, ...["Work order", "Action", "Dataset", "Status", "Created", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...list.map((o) => h("tr", {},
      h("th", { scope: "row", "data-label": "Work order" }, o.displayName || o.workorderId, o.displayName ? h("span", { class: "muted small block" }, o.workorderId) : null),
      h("td", { "data-label": "Action" }, o.action),
      h("td", { "data-label": "Dataset" }, o.datasetName || o.datasetId || "All datasets"),
      h("td", { "data-label": "Status" }, statusBadge(o.status)),
      h("td", { "data-label": "Created" }, formatDateTime(o.createdAt)),
      h("td", { "data-label": "Updated" }, formatDateTime(o.updatedAt)))))));
}

function expirationsView(list: DatasetExpiration[]): HTMLElement {
  if (list.length === 0) return notice("empty", "No dataset expirations.", "Datasets scheduled to expire appear here.");
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table" },
    h("thead", {}, h("tr", {}, ...["Dataset", "Expires", "Status", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...list.map((e) => h("tr", {},
      h("th", { scope: "row", "data-label": "Dataset" }, e.datasetName || e.datasetId, e.displayName ? h("span", { class: "muted small block" }, e.displayName) : null),
      h("td", { "data-label": "Expires" }, formatDateTime(e.expiry)),
      h("td", { "data-label": "Status" }, statusBadge(e.status)),
      h("td", { "data-label": "Updated" }, formatDateTime(e.updatedAt)))))));
}

export async function renderLifecycle(ctx: PageContext): Promise<void> {
  ctx.title("Data lifecycle");
  const quotas = h("div");
  const orders = h("div");
  const ttl = h("div");
  ctx.main.append(
    h("div", { class: "page-head" }, h("h1", {}, "Data lifecycle")),
    h("p", { class: "lead" }, `Organization ${ctx.session.orgId}. Quotas are organization-wide.`),
    section("Quotas", "quotas-title", quotas),
    section("Work orders", "orders-title", orders),
    section("Dataset expirations", "ttl-title", ttl),
  );
  await Promise.all([
    fill(quotas, () => ctx.api.quotas(), quotasView, "The quotas", ctx),
    fill(orders, () => ctx.api.workOrders(), workOrdersView, "The work orders", ctx),
    fill(ttl, () => ctx.api.expirations(), expirationsView, "The dataset expirations", ctx),
  ]);
}
