/**
 * The audience builder (create and edit): name, description, merge policy,
 * the rules in two tabs — PQL (the editor with live diagnostics and the
 * "ignore year" helper) and Visual (palette and rule canvas, visual/) — the
 * live size estimate, and the evaluation method choice. The PQL text is what
 * is saved; the Visual tab reads it and writes it. Edge and Streaming can be
 * chosen only when the expression and merge policy qualify; otherwise the
 * radio is disabled and the reasons are shown beside it (eligibility.ts
 * explains the two sources).
 */
import type { DefinitionDraft } from "../api/client.js";
import { detailsOf, messageOf } from "../api/errors.js";
import type { MergePolicy, SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { createPqlEditor } from "../editor/pql-editor.js";
import { COMMON_DATE_FIELDS, isFieldPath, withIgnoreYear } from "../editor/ignore-year.js";
import { schemaOfPalette, unknownFieldWarnings } from "../field-warnings.js";
import { sentence } from "../format.js";
import { choicesFromLocal, choicesFromServer, keepSelection, localVerdict, type MethodChoice } from "../eligibility.js";
import { METHOD_HINTS, METHOD_LABELS, METHODS, methodOf } from "../methods.js";
import { audiencePath, navigate } from "../router.js";
import { createTabs } from "../tabs.js";
import { openDeleteDialog } from "./delete-dialog.js";
import { createImpactPanel } from "./impact-panel.js";
import { createEstimateView } from "./visual/estimate.js";
import { createVisualBuilder } from "./visual/visual-builder.js";

const SERVER_CHECK_DELAY_MS = 350;
/** The tab last used to edit rules, opened first next time. */
const TAB_KEY = "segmentd.builder.tab";

/** The estimate's identity graph: the merge policy's ("pdg" stitches profiles), as the preview API names it. */
function graphTypeOf(policy: MergePolicy | undefined): "none" | "pdg" {
  return policy?.identityGraph?.type === "pdg" ? "pdg" : "none";
}

function storedTab(): string | null {
  try {
    return localStorage.getItem(TAB_KEY);
  } catch {
    return null;
  }
}

export async function renderBuilder(ctx: PageContext, id: string | undefined): Promise<void> {
  ctx.title(id ? "Edit audience" : "Create audience");
  ctx.main.append(h("p", { class: "muted" }, "Loading…"));
  let policies: MergePolicy[] = [];
  let policiesError: string | undefined;
  const [defResult, polResult] = await Promise.allSettled([id ? ctx.api.getDefinition(id) : Promise.resolve(undefined), ctx.api.mergePolicies()]);
  if (ctx.left()) return;
  if (defResult.status === "rejected") {
    ctx.main.replaceChildren(notice("error", "This audience could not be opened.", messageOf(defResult.reason), h("a", { class: "button", href: "/audiences" }, "Back to audiences")));
    return;
  }
  const existing: SegmentDefinition | undefined = defResult.value;
  if (polResult.status === "fulfilled") policies = polResult.value;
  else policiesError = messageOf(polResult.reason);

  const draft: DefinitionDraft = {
    name: existing?.name ?? "",
    description: existing?.description ?? "",
    expression: existing?.expression.format === "pql/text" ? existing.expression.value : "",
    mergePolicyId: existing?.mergePolicyId ?? policies.find((p) => p.default)?.id ?? "",
    method: existing ? methodOf(existing) : "batch",
  };
  let conversionError: string | undefined;
  if (existing && existing.expression.format !== "pql/text") {
    // Definitions written through the API in pql/json are edited as text; saving stores pql/text.
    try {
      draft.expression = await ctx.api.pqlText(existing.expression);
    } catch (err) {
      conversionError = messageOf(err);
    }
    if (ctx.left()) return;
  }

  const nameInput = h("input", { id: "aud-name", required: true, maxlength: 1024, value: draft.name, autocomplete: "off" });
  const descInput = h("textarea", { id: "aud-description", rows: 2, maxlength: 8192 });
  descInput.value = draft.description;
  const policySelect = h("select", { id: "aud-merge-policy" },
    ...policies.map((p) => h("option", { value: p.id, selected: p.id === draft.mergePolicyId }, `${p.name}${p.default ? " (default)" : ""}${p.isActiveOnEdge ? " · active on edge" : ""}`)));
  if (policies.length === 0) policySelect.append(h("option", { value: "" }, "The sandbox's default merge policy"));

  const choicesBox = h("div", { class: "method-choices" });
  const checkStatus = h("p", { class: "check-status muted", "aria-live": "polite" });
  const classification = h("p", { class: "classification muted" });
  let choices: MethodChoice[] = choicesFromLocal(localVerdict(draft.expression), undefined);
  let hasErrors = false;
  // Editing only: what saving the edited expression would do to the audience.
  const impact = existing ? createImpactPanel(ctx, existing.id, { expression: draft.expression, mergePolicyId: draft.mergePolicyId }) : undefined;

  const renderChoices = () => {
    draft.method = keepSelection(draft.method, choices);
    choicesBox.replaceChildren(...METHODS.map((m) => {
      const c = choices.find((x) => x.method === m)!;
      const inputId = `method-${m}`;
      const reasonsId = `method-${m}-reasons`;
      const radio = h("input", { type: "radio", name: "method", id: inputId, value: m, checked: draft.method === m, disabled: !c.enabled, "aria-describedby": reasonsId });
      radio.addEventListener("change", () => {
        if (radio.checked) draft.method = m;
      });
      return h("div", { class: `method-choice${c.enabled ? "" : " is-disabled"}` },
        radio,
        h("label", { for: inputId }, h("span", { class: `badge badge-${m}` }, METHOD_LABELS[m])),
        h("div", { class: "method-text", id: reasonsId },
          h("p", { class: "method-hint" }, METHOD_HINTS[m]),
          c.enabled ? null : h("ul", { class: "method-reasons", "aria-label": `Why ${METHOD_LABELS[m]} is not available` },
            ...(c.reasons.length > 0 ? c.reasons : ["not available for this expression"]).map((r) => h("li", {}, r)))));
    }));
  };

  const selectedPolicy = () => policies.find((p) => p.id === policySelect.value);
  // The sandbox's sampled profile fields, to warn about a misspelled one (field-warnings.ts).
  let fieldSchema: ReturnType<typeof schemaOfPalette>;
  let lastChecked = draft.expression;
  let serverTimer: number | undefined;
  let checkSeq = 0;
  const evaluate = () => {
    const text = editor.value();
    const v = localVerdict(text);
    hasErrors = v.diagnostics.some((d) => d.severity === "error") || text.trim() === "";
    editor.setDiagnostics(hasErrors ? v.diagnostics : [...v.diagnostics, ...unknownFieldWarnings(text, fieldSchema)]);
    // A refused save's message is about the text as it was: an edit makes it stale.
    if (text !== lastChecked) saveStatus.replaceChildren();
    lastChecked = text;
    choices = choicesFromLocal(v, selectedPolicy());
    classification.textContent = v.queryType ? `Query type: ${v.queryType}` : "";
    renderChoices();
    impact?.changed(text, policySelect.value, !hasErrors);
    refreshEstimate();
    window.clearTimeout(serverTimer);
    const seq = ++checkSeq;
    if (hasErrors) {
      checkStatus.textContent = text.trim() === "" ? "Write an expression to see which methods it qualifies for." : "Fix the errors above to check eligibility.";
      return;
    }
    checkStatus.textContent = "Checking with the server…";
    serverTimer = window.setTimeout(() => {
      ctx.api.eligibility(text, policySelect.value).then(
        (answer) => {
          if (seq !== checkSeq || ctx.left()) return;
          choices = choicesFromServer(answer);
          checkStatus.textContent = "Checked with the server.";
          renderChoices();
        },
        (err: unknown) => {
          if (seq !== checkSeq || ctx.left()) return;
          checkStatus.textContent = `The server could not check eligibility (${messageOf(err)}); showing the check made in your browser.`;
        },
      );
    }, SERVER_CHECK_DELAY_MS);
  };
  // Set while the Visual tab writes the text, so that only typing in the PQL tab counts as a PQL edit.
  let writingFromRules = false;
  const editor = createPqlEditor("aud-expression", draft.expression, () => {
    if (!writingFromRules) visual.pqlEdited();
    evaluate();
  });
  let activeTab = "pql";
  const visual = createVisualBuilder(ctx, {
    ...(existing ? { excludeSegmentId: existing.id } : {}),
    write: (pql) => {
      writingFromRules = true;
      try {
        editor.setValue(pql);
      } finally {
        writingFromRules = false;
      }
    },
    changed: () => refreshEstimate(),
  });
  const estimate = createEstimateView(ctx, (counts) => visual.paintCounts(counts));
  const refreshEstimate = () => {
    const incomplete = activeTab === "visual" ? visual.problem() : undefined;
    estimate.update(editor.value(), !hasErrors, activeTab === "visual" ? visual.model() : undefined, graphTypeOf(selectedPolicy()), incomplete === undefined ? undefined : sentence(incomplete));
  };
  ctx.onLeave(() => window.clearTimeout(serverTimer));
  policySelect.addEventListener("change", evaluate);

  // "Ignore year" helper.
  const yearField = h("input", { id: "ignore-year-field", list: "date-fields", value: COMMON_DATE_FIELDS[0]!, autocomplete: "off", spellcheck: "false" });
  const yearStatus = h("p", { class: "hint", "aria-live": "polite" });
  const insertYear = () => {
    const f = yearField.value.trim();
    if (!isFieldPath(f)) {
      yearStatus.textContent = `“${f}” is not a field path such as person.birthDate.`;
      yearField.focus();
      return;
    }
    editor.setValue(withIgnoreYear(editor.value(), f));
    yearStatus.textContent = `Added: ${f} on today's month and day, any year. This makes the audience batch-only.`;
    editor.textarea.focus();
  };
  yearField.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      insertYear();
    }
  });

  const pqlPanel = h("div", { class: "pql-panel" },
    h("div", { class: "field" },
      h("label", { for: "aud-expression" }, "Expression (PQL)"),
      editor.element),
    h("details", { class: "helper" },
      h("summary", {}, "Ignore year — match a date on today's month and day"),
      h("div", { class: "helper-body" },
        h("label", { for: "ignore-year-field" }, "Date field"), yearField,
        h("datalist", { id: "date-fields" }, ...COMMON_DATE_FIELDS.map((f) => h("option", { value: f }))),
        h("button", { type: "button", class: "button-secondary", onclick: insertYear }, "Insert condition"),
        yearStatus)));
  const tabs = createTabs("How to edit the rules", [
    { id: "pql", label: "PQL", panel: pqlPanel },
    { id: "visual", label: "Visual", panel: visual.element },
  ], (tab) => {
    activeTab = tab;
    try {
      localStorage.setItem(TAB_KEY, tab);
    } catch {
      // Storage may be off (private mode): the choice is then not remembered.
    }
    if (tab === "visual") visual.show(editor.value());
    // The editor sizes itself to its text only while shown: text the rules wrote meanwhile needs a repaint.
    else editor.setDiagnostics(localVerdict(editor.value()).diagnostics);
    refreshEstimate();
  });

  const saveStatus = h("div", { class: "form-status" });
  const saveButton = h("button", { type: "submit", class: "button" }, existing ? "Save changes" : "Save audience");
  const form = h("form", { class: "builder", novalidate: true },
    h("div", { class: "page-head" },
      h("h1", {}, existing ? `Edit “${existing.name}”` : "Create audience"),
      existing ? h("button", { type: "button", class: "button-secondary button-danger-outline", onclick: () => openDeleteDialog(ctx, existing!) }, "Delete") : null),
    h("div", { class: "grid-2" },
      h("div", { class: "field" }, h("label", { for: "aud-name" }, "Name"), nameInput),
      h("div", { class: "field" }, h("label", { for: "aud-merge-policy" }, "Merge policy"), policySelect,
        policiesError ? h("p", { class: "hint hint-error" }, `Merge policies could not be loaded (${policiesError}); the sandbox default is used.`) : null)),
    h("div", { class: "field" }, h("label", { for: "aud-description" }, "Description"), descInput),
    h("div", { class: "field rules-field" },
      h("h2", { class: "rules-title" }, "Audience rules"),
      conversionError ? notice("error", "The stored pql/json expression could not be converted to text.", `${conversionError} Saving will replace it with the text written here.`) : null,
      tabs.element,
      classification,
      estimate.element),
    h("fieldset", { class: "methods" }, h("legend", {}, "Evaluation method"), checkStatus, choicesBox),
    impact?.element,
    saveStatus,
    h("div", { class: "form-actions" },
      h("a", { class: "button-secondary", href: existing ? audiencePath(existing.id) : "/audiences" }, "Cancel"),
      saveButton));

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    draft.name = nameInput.value.trim();
    draft.description = descInput.value;
    draft.expression = editor.value();
    draft.mergePolicyId = policySelect.value;
    if (draft.name === "") {
      saveStatus.replaceChildren(notice("error", "Give the audience a name."));
      nameInput.focus();
      return;
    }
    const unwritten = visual.problem();
    if (activeTab === "visual" && unwritten) {
      saveStatus.replaceChildren(notice("error", "A rule is not complete.", `${sentence(unwritten)} Complete or remove it, then save.`));
      visual.focusProblem();
      return;
    }
    if (hasErrors) {
      if (draft.expression.trim() === "") {
        saveStatus.replaceChildren(notice("error", "The audience has no rules.", "Add a rule in the Visual tab or write an expression in the PQL tab, then save."));
        if (activeTab === "pql") editor.textarea.focus();
        return;
      }
      saveStatus.replaceChildren(notice("error", "The expression has errors.", "Fix the errors listed under the expression, then save."));
      tabs.select("pql");
      editor.textarea.focus();
      return;
    }
    if (impact && !impact.seen(draft.expression, draft.mergePolicyId)) {
      // The change has not been shown yet: show it first; the next Save saves.
      impact.showNow();
      impact.element.scrollIntoView({ block: "nearest" });
      saveStatus.replaceChildren(notice("info", "Review the impact of this change above, then save again."));
      ctx.announce("Review the impact of this change, then save again.");
      return;
    }
    saveButton.disabled = true;
    saveStatus.replaceChildren(h("p", { class: "muted" }, "Saving…"));
    const done = existing ? ctx.api.updateDefinition(existing.id, draft) : ctx.api.createDefinition(draft);
    done.then(
      (saved) => {
        ctx.announce(`Saved ${saved.name}`);
        navigate(audiencePath(saved.id));
      },
      (err: unknown) => {
        saveButton.disabled = false;
        const details = detailsOf(err);
        saveStatus.replaceChildren(notice("error", "The audience was not saved.", messageOf(err), details.length > 0 ? h("ul", { class: "notice-list" }, ...details.map((d) => h("li", {}, d))) : null));
      },
    );
  });
  ctx.main.replaceChildren(form);
  evaluate();
  ctx.api.builderFields().then((palette) => {
    if (ctx.left()) return;
    fieldSchema = schemaOfPalette(palette);
    evaluate();
  }, () => {
    // Without the palette there is nothing to compare field names with; the rest works as before.
  });
  const askedTab = new URLSearchParams(location.search).get("tab") ?? storedTab();
  tabs.select(askedTab === "visual" ? "visual" : "pql");
  nameInput.focus();
}
