/**
 * The audiences list: name, description, evaluation method, total qualified,
 * last evaluated; search, filter by method, paging.
 *
 * Paging is the server's (start/limit) while no search text is given. The
 * definitions API cannot search by name, so with search text the list of the
 * chosen method is read whole (pages of 100, at most the sandbox guardrail of
 * 4,000) and searched and paged here.
 * Keyboard: ↑/↓ move between the audience links of the table.
 */
import { messageOf } from "../api/errors.js";
import type { Method, SegmentDefinition, SegmentJob } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { formatCount, formatDateTime } from "../format.js";
import { lastEvaluated } from "../last-evaluated.js";
import { METHOD_LABELS, METHODS, methodOf, parseMethod } from "../methods.js";
import { audiencePath } from "../router.js";
import { createSchedulePanel } from "./schedule-panel.js";

const PAGE_SIZE = 20;
const SEARCH_CAP = 4000;

interface ListState {
  q: string;
  method: Method | undefined;
  page: number;
}

function stateFrom(query: URLSearchParams): ListState {
  const page = Number(query.get("page") ?? "0");
  return { q: query.get("q") ?? "", method: parseMethod(query.get("method")), page: Number.isInteger(page) && page >= 0 ? page : 0 };
}

function urlOf(s: ListState): string {
  const p = new URLSearchParams();
  if (s.q !== "") p.set("q", s.q);
  if (s.method) p.set("method", s.method);
  if (s.page > 0) p.set("page", String(s.page));
  const qs = p.toString();
  return `/audiences${qs === "" ? "" : `?${qs}`}`;
}

export function matchesSearch(d: Pick<SegmentDefinition, "name" | "description">, q: string): boolean {
  const needle = q.trim().toLowerCase();
  return needle === "" || d.name.toLowerCase().includes(needle) || (d.description ?? "").toLowerCase().includes(needle);
}

export function methodBadge(m: Method): HTMLElement {
  return h("span", { class: `badge badge-${m}` }, METHOD_LABELS[m]);
}

export async function renderAudiences(ctx: PageContext, query: URLSearchParams): Promise<void> {
  ctx.title("Audiences");
  const state = stateFrom(query);
  const search = h("input", { id: "audience-search", type: "search", value: state.q, placeholder: "Name or description", autocomplete: "off" });
  const methodSelect = h("select", { id: "audience-method" },
    h("option", { value: "" }, "All methods"),
    ...METHODS.map((m) => h("option", { value: m, selected: state.method === m }, METHOD_LABELS[m])));
  const results = h("section", { class: "results", "aria-live": "polite", "aria-busy": "true" });
  ctx.main.append(
    h("div", { class: "page-head" },
      h("h1", {}, "Audiences"),
      h("a", { class: "button", href: "/audiences/new" }, "Create audience")),
    createSchedulePanel(ctx),
    h("form", { class: "toolbar", role: "search", onsubmit: (e: Event) => e.preventDefault() },
      h("div", { class: "field-inline" }, h("label", { for: "audience-search" }, "Search"), search),
      h("div", { class: "field-inline" }, h("label", { for: "audience-method" }, "Evaluation method"), methodSelect)),
    results,
  );

  let jobs: Promise<SegmentJob[] | Error> | undefined;
  const jobsOnce = () => (jobs ??= ctx.api.recentSucceededJobs().catch((err: unknown) => new Error(messageOf(err))));
  let generation = 0;

  const load = async () => {
    const mine = ++generation;
    history.replaceState(null, "", urlOf(state));
    results.setAttribute("aria-busy", "true");
    results.replaceChildren(h("p", { class: "muted" }, "Loading audiences…"));
    let rows: SegmentDefinition[];
    let total: number;
    let capped = false;
    try {
      if (state.q.trim() === "") {
        const page = await ctx.api.listDefinitions({ start: state.page * PAGE_SIZE, limit: PAGE_SIZE, method: state.method });
        rows = page.segments;
        total = page.page.totalCount;
      } else {
        const all: SegmentDefinition[] = [];
        for (let start = 0; start < SEARCH_CAP; start += 100) {
          const page = await ctx.api.listDefinitions({ start, limit: 100, method: state.method });
          all.push(...page.segments);
          if (page.segments.length < 100 || all.length >= page.page.totalCount) break;
          capped = start + 100 >= SEARCH_CAP;
        }
        const found = all.filter((d) => matchesSearch(d, state.q));
        total = found.length;
        rows = found.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
      }
    } catch (err) {
      if (mine !== generation || ctx.left()) return;
      results.setAttribute("aria-busy", "false");
      results.replaceChildren(notice("error", "The audiences could not be loaded.", messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void load() }, "Try again")));
      return;
    }
    if (mine !== generation || ctx.left()) return;
    results.setAttribute("aria-busy", "false");
    if (total === 0) {
      const filtered = state.q !== "" || state.method !== undefined;
      results.replaceChildren(filtered
        ? notice("empty", "No audience matches.", `Nothing ${state.method ? `evaluated by ${METHOD_LABELS[state.method]} ` : ""}${state.q ? `matching “${state.q}” ` : ""}in sandbox ${ctx.session.sandboxName}.`)
        : notice("empty", "No audiences yet.", `Sandbox ${ctx.session.sandboxName} has no audience. Create one to start qualifying profiles.`, h("a", { class: "button", href: "/audiences/new" }, "Create audience")));
      return;
    }
    if (rows.length === 0 && state.page > 0) {
      // A page past the end (e.g. after deletions): go to the first page.
      state.page = 0;
      void load();
      return;
    }
    results.replaceChildren(renderTable(ctx, rows, jobsOnce), renderPager(state, total, () => void load()));
    if (capped) results.append(h("p", { class: "muted" }, `Searched the first ${formatCount(SEARCH_CAP)} audiences.`));
  };

  let debounce: number | undefined;
  search.addEventListener("input", () => {
    window.clearTimeout(debounce);
    debounce = window.setTimeout(() => {
      state.q = search.value;
      state.page = 0;
      void load();
    }, 250);
  });
  ctx.onLeave(() => window.clearTimeout(debounce));
  methodSelect.addEventListener("change", () => {
    state.method = parseMethod(methodSelect.value);
    state.page = 0;
    void load();
  });
  await load();
}

function renderTable(ctx: PageContext, rows: SegmentDefinition[], jobs: () => Promise<SegmentJob[] | Error>): HTMLElement {
  const body = h("tbody");
  for (const d of rows) {
    const m = methodOf(d);
    const qualified = h("td", { class: "num", "data-label": "Total qualified" }, h("span", { class: "muted" }, "…"));
    const evaluated = h("td", { "data-label": "Last evaluated" }, h("span", { class: "muted" }, "…"));
    body.append(h("tr", {},
      h("th", { scope: "row", "data-label": "Name" }, h("a", { href: audiencePath(d.id), class: "row-link" }, d.name)),
      h("td", { class: "description", "data-label": "Description" }, d.description ? d.description : h("span", { class: "muted" }, "No description")),
      h("td", { "data-label": "Method" }, methodBadge(m)),
      qualified,
      evaluated));
    const judged = jobs().then((j) => {
      if (j instanceof Error && m === "batch") {
        evaluated.replaceChildren(h("span", { class: "muted", title: j.message }, "unknown"));
        return undefined;
      }
      const le = lastEvaluated(d, j instanceof Error ? [] : j);
      evaluated.replaceChildren(le.kind === "continuous" ? "Continuously" : le.kind === "at" ? formatDateTime(le.time) : h("span", { class: "muted" }, "Not yet"));
      return le;
    });
    ctx.api.metrics(d.id, "24h").then(
      async (r) => {
        // A batch audience no job has evaluated has no members yet: "0" would read as "nobody matches".
        const le = await judged;
        qualified.replaceChildren(le?.kind === "never" && r.totalQualified === 0 ? h("span", { class: "muted", "data-testid": "not-evaluated" }, "Not evaluated yet") : formatCount(r.totalQualified));
      },
      (err: unknown) => qualified.replaceChildren(h("span", { class: "muted", title: messageOf(err) }, "unavailable")),
    );
  }
  const table = h("table", { class: "data-table audiences-table" },
    h("caption", { class: "visually-hidden" }, "Audiences of this sandbox"),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Description"), h("th", { scope: "col" }, "Method"),
      h("th", { scope: "col", class: "num" }, "Total qualified"), h("th", { scope: "col" }, "Last evaluated"))),
    body);
  table.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    const links = Array.from(table.querySelectorAll<HTMLAnchorElement>("a.row-link"));
    const i = links.indexOf(document.activeElement as HTMLAnchorElement);
    if (i < 0) return;
    e.preventDefault();
    links[Math.max(0, Math.min(links.length - 1, i + (e.key === "ArrowDown" ? 1 : -1)))]!.focus();
  });
  return h("div", { class: "table-wrap" }, table);
}

function renderPager(state: ListState, total: number, reload: () => void): HTMLElement {
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  const go = (p: number) => {
    state.page = p;
    reload();
  };
  const first = state.page * PAGE_SIZE + 1;
  const last = Math.min(total, (state.page + 1) * PAGE_SIZE);
  return h("nav", { class: "pager", "aria-label": "Pages" },
    h("button", { type: "button", class: "button-secondary", disabled: state.page === 0, onclick: () => go(state.page - 1) }, "← Previous"),
    h("span", { class: "pager-status" }, `${formatCount(first)}–${formatCount(last)} of ${formatCount(total)} · page ${state.page + 1} of ${pages}`),
    h("button", { type: "button", class: "button-secondary", disabled: state.page + 1 >= pages, onclick: () => go(state.page + 1) }, "Next →"));
}
