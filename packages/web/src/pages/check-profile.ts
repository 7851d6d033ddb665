/**
 * "Check a profile" on an audience's page: an identity (namespace and value)
 * in, and out comes why the profile is in or out now (segmentd's explain:
 * GET …/definitions/{id}/explain) — the verdict in a sentence, when it would
 * leave, consent, the stored status and its history, the audiences it refers
 * to, the attributes read (servers that send them) and the traced expression.
 */
import { detailsOf, messageOf } from "../api/errors.js";
import type { ExplainedAttribute, Explanation, SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { fieldPath, h, notice } from "../dom.js";
import { COMMON_NAMESPACES, checkFailureText, identityText, namespaceLabel, ruleText, sourceText, statusText, storedNote, valueText, verdictOf } from "../explain-words.js";
import { sourceWords } from "../backfill-words.js";
import { formatCount, formatDateTime } from "../format.js";
import { audiencePath } from "../router.js";
import { renderTrace } from "./trace-tree.js";

export interface CheckProfile {
  element: HTMLElement;
  /** Fill the form with this identity and check it. */
  check(namespace: string, id: string): void;
}

function historyView(x: Explanation): HTMLElement {
  const list = x.membership.history;
  if (list.length === 0) return h("p", { class: "muted" }, "No status changes are recorded for this profile in this audience.");
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table" },
    h("caption", { class: "visually-hidden" }, "Status changes, oldest first"),
    h("thead", {}, h("tr", {}, ...["Change", "By", "When"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...list.map((t) => h("tr", {},
      h("td", { "data-label": "Change" }, `${t.from ?? "none"} → ${t.to}`),
      h("td", { "data-label": "By" }, sourceWords(t.source)),
      h("td", { "data-label": "When" }, formatDateTime(t.at)))))));
}

function attributesView(list: ExplainedAttribute[]): HTMLElement {
  if (list.length === 0) return h("p", { class: "muted" }, "The expression reads no profile attribute.");
  return h("div", { class: "table-wrap" }, h("table", { class: "data-table attributes-table" },
    h("caption", { class: "visually-hidden" }, "Attributes the expression read, with the fragment that supplied each"),
    h("thead", {}, h("tr", {}, ...["Attribute", "Value", "From", "Merge rule"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, ...list.map((a) => h("tr", {},
      h("th", { scope: "row", "data-label": "Attribute" }, fieldPath(a.path)),
      h("td", { "data-label": "Value" }, h("code", {}, valueText(a.value))),
      h("td", { "data-label": "From" }, sourceText(a)),
      h("td", { "data-label": "Merge rule" }, ruleText(a)))))));
}

function resultView(x: Explanation, def: SegmentDefinition): HTMLElement {
  const v = verdictOf(x, def.name);
  const note = storedNote(x);
  const stored = x.membership;
  return h("div", { class: "check-result" },
    h("div", { class: `verdict verdict-${v.in ? "in" : "out"}`, "data-testid": "verdict" },
      h("span", { class: "verdict-mark", "aria-hidden": "true" }, v.in ? "✓" : "✗"),
      h("div", {},
        h("p", { class: "verdict-headline" }, v.headline),
        h("p", { class: "verdict-detail" }, v.detail))),
    h("dl", { class: "props" },
      h("dt", {}, "Stored status"),
      h("dd", { "data-testid": "stored-status" }, statusText(stored.status),
        stored.lastQualificationTime ? h("span", { class: "muted" }, ` · last qualified ${formatDateTime(stored.lastQualificationTime)}`) : null),
      // Leaving only means something for a profile that is in.
      x.result ? h("dt", {}, "Leaves on") : null,
      x.result ? h("dd", { "data-testid": "exits-at" }, x.exitsAt ? formatDateTime(x.exitsAt) : h("span", { class: "muted" }, "not expected without new data")) : null,
      h("dt", {}, "Consent"), h("dd", {}, x.excludedByConsent ? "Opted out: excluded from this audience" : "Not excluded"),
      h("dt", {}, "Events read"), h("dd", {}, `${formatCount(x.events.read)}${x.events.truncated ? " (the newest; older events were left out)" : ""}`),
      h("dt", {}, "Identity"), h("dd", { "data-testid": "checked-identity" }, identityText({ namespace: x.entityIdNS, id: x.entityId })),
      h("dt", {}, "segmentd profile id"), h("dd", { "data-testid": "profile-id" }, h("code", {}, x.profileId), h("span", { class: "muted" }, " (internal, for the logs and the API)")),
      h("dt", {}, "Evaluated"), h("dd", {}, formatDateTime(x.evaluatedAt))),
    note ? notice("info", note) : null,
    x.references.length > 0 ? h("section", { "aria-labelledby": "check-refs" },
      h("h3", { id: "check-refs" }, "Audiences it refers to"),
      h("ul", { class: "plain-list" }, ...x.references.map((r) => h("li", {},
        h("a", { href: audiencePath(r.id) }, r.id), " — ", statusText(r.status))))) : null,
    x.attributes ? h("section", { "aria-labelledby": "check-attrs" }, h("h3", { id: "check-attrs" }, "Attributes read"), attributesView(x.attributes)) : null,
    h("section", { "aria-labelledby": "check-trace" }, h("h3", { id: "check-trace" }, "Why, step by step"), renderTrace(x.trace)),
    h("section", { "aria-labelledby": "check-history" }, h("h3", { id: "check-history" }, "Status history"), historyView(x)));
}

/** `onRun` hears each identity checked (the page keeps it in the address). */
export function createCheckProfile(ctx: PageContext, def: SegmentDefinition, onRun: (namespace: string, id: string) => void = () => {}): CheckProfile {
  const nsInput = h("input", { id: "check-ns", name: "entityIdNS", value: "Email", list: "check-ns-list", autocomplete: "off", spellcheck: "false", required: true });
  const idInput = h("input", { id: "check-id", name: "entityId", placeholder: "ann@example.com", autocomplete: "off", spellcheck: "false", required: true });
  const button = h("button", { type: "submit", class: "button" }, "Check");
  const out = h("div", { class: "check-out", "aria-live": "polite" });
  let seq = 0;

  const run = () => {
    const ns = nsInput.value.trim();
    const id = idInput.value.trim();
    if (ns === "" || id === "") {
      out.replaceChildren(notice("error", ns === "" ? "Give the identity's namespace." : "Give the identity's value."));
      (ns === "" ? nsInput : idInput).focus();
      return;
    }
    const mine = ++seq;
    onRun(ns, id);
    out.setAttribute("aria-busy", "true");
    out.replaceChildren(h("p", { class: "muted" }, `Checking ${namespaceLabel(ns)} ${id}…`));
    ctx.api.explain(def.id, ns, id).then(
      (x) => {
        if (mine !== seq || ctx.left()) return;
        out.setAttribute("aria-busy", "false");
        out.replaceChildren(resultView(x, def));
        ctx.announce(verdictOf(x, def.name).headline);
      },
      (err: unknown) => {
        if (mine !== seq || ctx.left()) return;
        out.setAttribute("aria-busy", "false");
        const unknown = checkFailureText(err, ns, id, ctx.session.sandboxName);
        const details = detailsOf(err);
        out.replaceChildren(unknown
          ? notice("empty", unknown, "Check the spelling and the namespace: the identity must be one the profile was ingested with.")
          : notice("error", "The profile could not be checked.", messageOf(err), details.length > 0 ? h("ul", { class: "notice-list" }, ...details.map((d) => h("li", {}, d))) : null));
      },
    );
  };

  const form = h("form", { class: "check-form", "aria-label": "Check a profile", novalidate: true },
    h("div", { class: "field-inline field-ns" }, h("label", { for: "check-ns" }, "Identity namespace"), nsInput,
      h("datalist", { id: "check-ns-list" }, ...COMMON_NAMESPACES.map((n) => h("option", { value: n })))),
    h("div", { class: "field-inline" }, h("label", { for: "check-id" }, "Identity value"), idInput),
    button);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });

  const element = h("div", { class: "check-profile" },
    h("p", { class: "muted" }, "Find out whether one profile is in this audience now, and why: the expression is evaluated for it as the engines do."),
    form,
    out);
  return {
    element,
    check(namespace, id) {
      nsInput.value = namespaceLabel(namespace);
      idInput.value = id;
      run();
    },
  };
}
