/**
 * An audience's members (segmentd's GET …/definitions/{id}/members), a page
 * of 20 at a time: in the audience or exited, each with its identities, when
 * it last qualified and which evaluation set its status; "Check" on a member
 * opens it in the "Check a profile" box. The API pages by cursor, so
 * Previous walks back through the cursors already seen.
 */
import { messageOf } from "../api/errors.js";
import type { Member, MemberPage, MembershipStatus, SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { checkIdentity, identityText } from "../explain-words.js";
import { sourceWords } from "../backfill-words.js";
import { formatCount, formatDateTime } from "../format.js";
import { audiencePath } from "../router.js";

const PAGE_SIZE = 20;

export interface MembersView {
  element: HTMLElement;
  /** Load the first page unless already loaded (the tab loads it when first shown). */
  show(): void;
}

/** The address that opens the audience's page on "Check a profile" for this identity. */
export function checkHref(def: Pick<SegmentDefinition, "id">, namespace: string, id: string): string {
  return `${audiencePath(def.id)}?${new URLSearchParams({ tab: "check", ns: namespace, id }).toString()}`;
}

export function createMembers(ctx: PageContext, def: SegmentDefinition, onCheck: (namespace: string, id: string) => void): MembersView {
  let status: MembershipStatus = "realized";
  // starts[i] is the cursor of page i; page 0 has none.
  let starts: Array<string | undefined> = [undefined];
  let pageIndex = 0;
  let loaded = false;
  let seq = 0;
  const box = h("div", { class: "members-body", "aria-live": "polite" });

  const row = (m: Member): HTMLElement => {
    const who = checkIdentity(m.identities);
    let action: HTMLElement | string = "";
    if (who) {
      const link = h("a", { class: "button-secondary button-small", href: checkHref(def, who.namespace, who.id) }, "Check", h("span", { class: "visually-hidden" }, ` ${identityText(who)}`));
      link.addEventListener("click", (e) => {
        // A plain click stays on the page; a modified one opens the address as the browser would.
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        onCheck(who.namespace, who.id);
      });
      action = link;
    }
    return h("tr", {},
      h("th", { scope: "row", "data-label": "Identities" },
        m.identities.length === 0 ? h("span", { class: "muted" }, `profile ${m.profileId}`) : h("ul", { class: "plain-list" }, ...m.identities.map((i) => h("li", {}, identityText(i))))),
      h("td", { "data-label": status === "realized" ? "Last qualified" : "Last qualified before exiting" }, formatDateTime(m.lastQualificationTime)),
      h("td", { "data-label": "Status set by" }, m.since ? `${sourceWords(m.since.source)}, ${formatDateTime(m.since.at)}` : h("span", { class: "muted" }, "no longer in the log")),
      h("td", { class: "member-action" }, action));
  };

  const render = (page: MemberPage) => {
    const total = page._page.totalCount;
    if (page.children.length === 0) {
      box.replaceChildren(notice("empty", status === "realized" ? "No profile is in this audience." : "No profile has exited this audience.",
        status === "realized" ? "Members appear after a batch job, or as profiles qualify by streaming or edge evaluation." : undefined));
      return;
    }
    const first = pageIndex * PAGE_SIZE + 1;
    const last = pageIndex * PAGE_SIZE + page.children.length;
    const table = h("table", { class: "data-table members-table" },
      h("caption", { class: "visually-hidden" }, status === "realized" ? "Profiles in the audience" : "Profiles that exited the audience"),
      h("thead", {}, h("tr", {}, ...["Identities", status === "realized" ? "Last qualified" : "Last qualified before exiting", "Status set by", "Why"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ...page.children.map(row)));
    const go = (i: number) => {
      pageIndex = i;
      void load();
    };
    const next = page._page.next;
    box.replaceChildren(
      h("div", { class: "table-wrap" }, table),
      h("nav", { class: "pager", "aria-label": "Member pages" },
        h("button", { type: "button", class: "button-secondary", disabled: pageIndex === 0, onclick: () => go(pageIndex - 1) }, "← Previous"),
        h("span", { class: "pager-status", "data-testid": "members-status" }, `${formatCount(first)}–${formatCount(last)} of ${formatCount(total)}`),
        h("button", {
          type: "button", class: "button-secondary", disabled: next === null,
          onclick: () => {
            starts = [...starts.slice(0, pageIndex + 1), next ?? undefined];
            go(pageIndex + 1);
          },
        }, "Next →")));
  };

  const load = async () => {
    const mine = ++seq;
    loaded = true;
    box.setAttribute("aria-busy", "true");
    if (box.childElementCount === 0) box.append(h("p", { class: "muted" }, "Loading members…"));
    let page: MemberPage;
    try {
      page = await ctx.api.members(def.id, status, PAGE_SIZE, starts[pageIndex]);
    } catch (err) {
      if (mine !== seq || ctx.left()) return;
      box.setAttribute("aria-busy", "false");
      box.replaceChildren(notice("error", "The members could not be loaded.", messageOf(err), h("button", { type: "button", class: "button-secondary", onclick: () => void load() }, "Try again")));
      return;
    }
    if (mine !== seq || ctx.left()) return;
    box.setAttribute("aria-busy", "false");
    render(page);
  };

  const statusPicker = h("fieldset", { class: "segmented" },
    h("legend", { class: "visually-hidden" }, "Members with status"),
    ...([["realized", "In the audience"], ["exited", "Exited"]] as const).map(([value, label]) => {
      const input = h("input", { type: "radio", name: "members-status", id: `members-${value}`, value, checked: value === status });
      input.addEventListener("change", () => {
        if (!input.checked) return;
        status = value;
        starts = [undefined];
        pageIndex = 0;
        box.replaceChildren();
        void load();
      });
      return h("span", { class: "segment" }, input, h("label", { for: `members-${value}` }, label));
    }));

  const element = h("div", { class: "members" },
    h("div", { class: "card-head" },
      h("p", { class: "muted members-lead" }, "Who the audience holds now, as its evaluations stored it."),
      statusPicker),
    box);
  return {
    element,
    show() {
      if (!loaded) void load();
    },
  };
}
