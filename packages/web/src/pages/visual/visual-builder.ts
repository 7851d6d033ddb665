/**
 * The Visual tab: palette beside the rule canvas, over the rule model
 * (packages/web/src/visual). The PQL editor's text stays what is saved:
 * opening the tab reads it as rules (pqlToRules; what cannot be shown
 * becomes a read-only block, so nothing is silently changed), and every edit
 * of the rules that can be written replaces it (rulesToPql). An edit that
 * cannot be written yet (a number field holding "1.") leaves the text as it
 * was and is reported here and by the builder's save gate.
 */
import { messageOf } from "../../api/errors.js";
import type { BuilderPalette } from "../../api/types.js";
import type { PageContext } from "../../context.js";
import { h, notice } from "../../dom.js";
import { sentence } from "../../format.js";
import type { VisualModel } from "../../visual/index.js";
import { pqlToRules, tryRulesToPql, validateModel } from "../../visual/index.js";
import { createCanvas } from "./canvas.js";
import type { AudienceRef, CanvasEnv } from "./env.js";
import type { RuleCount } from "./estimate.js";
import { computedFields, withComputedFields } from "./computed-fields.js";
import { createPalette } from "./palette.js";
import type { PaletteItem } from "./palette-items.js";
import { addItem, firstControlId, itemLabel } from "./palette-items.js";
import { paintCounts } from "./rule-counts.js";
import { groupName, locate, places } from "./tree.js";

export interface VisualBuilderOptions {
  /** The audience being edited: it is not offered for "member of". */
  excludeSegmentId?: string;
  /** The rules as PQL, after each edit that can be written. */
  write(pql: string): void;
  /** The rules changed (the estimate asks again). */
  changed(): void;
}

export interface VisualBuilder {
  element: HTMLElement;
  /** The tab opens: show `pql` as rules (unless it is what the rules wrote last). */
  show(pql: string): void;
  /** The rules on screen; undefined when the PQL could not be read. */
  model(): VisualModel | undefined;
  /** Why the rules on screen are not what the PQL says, when an edit could not be written. */
  problem(): string | undefined;
  focusProblem(): void;
  /** The PQL was edited elsewhere: the rules are read again when the tab opens. */
  pqlEdited(): void;
  paintCounts(counts: Map<string, RuleCount>): void;
}

export function createVisualBuilder(ctx: PageContext, options: VisualBuilderOptions): VisualBuilder {
  let model: VisualModel | undefined;
  let written: string | undefined;
  let palette: BuilderPalette | undefined;
  let audiences: AudienceRef[] = [];
  let targetId = "root";
  let paletteRequested = false;
  let lastCounts = new Map<string, RuleCount>();
  let idSeq = 0;
  const inputProblems = new Map<string, string>();
  let writeProblem: { message: string; ruleId?: string } | undefined;

  const banner = h("div", { class: "v-banner" });
  // Not a live region: the input's own error is announced; this is the overview.
  const summary = h("div", { class: "v-summary" });
  const canvasBox = h("div", { class: "v-canvas-body" });

  const env: CanvasEnv = {
    model: () => model!,
    palette: () => palette,
    audiences: () => audiences,
    newId: () => {
      const used = new Set(places(model!).map((p) => p.node.id));
      for (const p of places(model!)) if (p.node.kind === "sequence") for (const s of p.node.steps) used.add(s.id);
      let id: string;
      do id = `u${++idSeq}`;
      while (used.has(id));
      return id;
    },
    changed: () => commit(),
    restructure: (focusId) => {
      render(focusId);
      commit();
    },
    replace: (next, focusId, announce) => {
      model = next;
      render(focusId);
      commit();
      if (announce) ctx.announce(announce);
    },
    renderGroup: (group, view) => canvas.renderGroup(group, view),
    announce: (text) => ctx.announce(text),
    target: () => targetId,
    setTarget: (id) => {
      targetId = id;
      render(`${id}-target`);
      ctx.announce(`The palette adds to ${groupName(model!, id)}.`);
    },
    inputProblem: (inputId, message) => {
      const before = inputProblems.get(inputId);
      if (message === undefined) inputProblems.delete(inputId);
      else inputProblems.set(inputId, message);
      paintProblems();
      // A rule turning incomplete (or complete again) changes what the estimate may show.
      if (before !== message) options.changed();
    },
  };

  const pick = (item: PaletteItem, groupId = targetId, index?: number) => {
    if (!model) {
      ctx.announce("Fix the PQL in the PQL tab first: it cannot be shown as rules.");
      return;
    }
    const types = palette?.events.eventTypes.map((t) => t.eventType) ?? [];
    const added = addItem(model, item, groupId, index, types);
    if (!added) {
      ctx.announce(`The ${itemLabel(item)} cannot be added there.`);
      return;
    }
    model = added.model;
    // A new group is where the next palette items are wanted.
    if (added.rule.kind === "group") targetId = added.rule.id;
    render(firstControlId(added.rule));
    // A new condition wants its value first (its operator already fits the field's type); "exists" has none.
    if (added.rule.kind === "condition") {
      const value = document.getElementById(`${added.rule.id}-card`)?.querySelector<HTMLElement>(".v-operands input:not([hidden]), .v-operands select");
      value?.focus();
      // Typing replaces the placeholder value (a new number condition starts at 0).
      if (value instanceof HTMLInputElement) value.select();
    }
    commit();
    ctx.announce(`Added ${itemLabel(item)} to ${groupName(model, added.groupId)}.`);
  };

  const canvas = createCanvas(env, {
    addItem: (item, groupId, index) => pick(item, groupId, index),
    acceptsItem: (item, groupId) => model !== undefined && addItem(model, item, groupId, undefined, []) !== undefined,
  });
  const paletteView = createPalette((item) => pick(item), () => loadPalette(true));

  const loadPalette = (refresh: boolean) => {
    paletteView.set({ state: "loading" });
    Promise.allSettled([ctx.api.builderFields(refresh), allAudiences(ctx), ctx.api.computedAttributes()]).then(([fields, defs, cas]) => {
      if (ctx.left()) return;
      if (fields.status === "rejected") {
        paletteView.set({ state: "failed", message: messageOf(fields.reason) });
        return;
      }
      const computed = cas.status === "fulfilled" ? computedFields(cas.value) : [];
      // Computed attributes are profile fields to the rule editors (their types pick the operators).
      palette = withComputedFields(fields.value, computed);
      audiences = defs.status === "fulfilled" ? defs.value.filter((d) => d.id !== options.excludeSegmentId) : [];
      paletteView.set({
        state: "ready",
        palette,
        audiences,
        computed,
        ...(defs.status === "rejected" ? { audiencesError: messageOf(defs.reason) } : {}),
        ...(cas.status === "rejected" ? { computedError: messageOf(cas.reason) } : {}),
      });
      // Field types decide operators: draw the rules again with them.
      if (model) render();
    });
  };

  /** Draws the canvas, keeping focus on the same control (by id) or moving it to `focusId`. */
  const render = (focusId?: string) => {
    if (!model) {
      canvasBox.replaceChildren();
      return;
    }
    const active = document.activeElement instanceof HTMLElement && canvasBox.contains(document.activeElement) ? document.activeElement.id : "";
    if (!locate(model, targetId)) targetId = model.root.id;
    paletteView.setTarget(groupName(model, targetId));
    inputProblems.clear();
    canvasBox.replaceChildren(canvas.render());
    paintCounts(canvasBox, lastCounts);
    paintProblems();
    const wanted = focusId ?? active;
    if (wanted === "") return;
    let el = document.getElementById(wanted);
    // A move button that is now disabled (the rule reached the top) hands focus to its card.
    if (!el || (el as HTMLButtonElement).disabled) el = document.getElementById(`${wanted.split("-")[0]}-card`);
    if (el && canvasBox.contains(el)) el.focus();
    else canvasBox.querySelector<HTMLElement>(".v-card, .v-target")?.focus();
  };

  /** Writes the rules as PQL when they can be written; otherwise says why. */
  const commit = () => {
    if (!model) return;
    writeProblem = undefined;
    if (inputProblems.size === 0) {
      const r = tryRulesToPql(model);
      if (r.ok) {
        written = r.pql;
        options.write(r.pql);
      } else {
        writeProblem = r.ruleId === undefined ? { message: r.message } : { message: r.message, ruleId: r.ruleId };
      }
    }
    paintProblems();
    options.changed();
  };

  const currentProblem = (): string | undefined => {
    const first = inputProblems.values().next();
    if (!first.done) return first.value;
    return writeProblem?.message;
  };

  const paintProblems = () => {
    for (const p of Array.from(canvasBox.querySelectorAll<HTMLElement>("[data-problem-for]"))) {
      p.hidden = true;
      p.textContent = "";
    }
    if (model && writeProblem) {
      for (const p of validateModel(model)) {
        const el = p.ruleId === undefined ? null : canvasBox.querySelector<HTMLElement>(`[data-problem-for="${CSS.escape(p.ruleId)}"]`);
        if (el) {
          el.hidden = false;
          el.textContent = p.message;
        }
      }
    }
    const problem = currentProblem();
    summary.replaceChildren(...(problem ? [h("p", {}, `These rules are not saved as PQL yet: ${sentence(problem)}`)] : []));
    summary.hidden = !problem;
  };

  const element = h("div", { class: "visual" },
    banner,
    summary,
    h("div", { class: "v-layout" },
      paletteView.element,
      h("section", { class: "v-canvas", "aria-labelledby": "v-canvas-title" },
        h("h3", { id: "v-canvas-title" }, "Rules"),
        h("p", { class: "hint", id: "v-keys" }, "Move a rule with its arrow buttons or Alt+Shift+↑/↓; Alt+Shift+→ puts it into the group next to it, Alt+Shift+← takes it out of its group. Or drag it by its handle (⠿)."),
        canvasBox)));
  summary.hidden = true;

  return {
    element,
    show(pql) {
      if (!paletteRequested) {
        paletteRequested = true;
        loadPalette(false);
      }
      if (model && written !== undefined && pql === written) return;
      const r = pqlToRules(pql, model ? { previous: model } : {});
      if (!r.ok) {
        model = undefined;
        // Problems of the rules shown before belong to rules no longer shown: one banner, the current one.
        inputProblems.clear();
        writeProblem = undefined;
        paintProblems();
        banner.replaceChildren(notice("error", "The PQL cannot be shown as rules.", `Line ${r.error.line}, column ${r.error.column}: ${r.error.message} Fix it in the PQL tab.`));
        render();
        return;
      }
      model = r.model;
      written = pql;
      inputProblems.clear();
      writeProblem = undefined;
      banner.replaceChildren(...(r.blocks > 0
        ? [notice("info", r.blocks === 1 ? "One part of this expression cannot be shown as rules." : `${r.blocks} parts of this expression cannot be shown as rules.`, "They are shown as read-only PQL blocks, kept exactly as written; edit them in the PQL tab.")]
        : []));
      render();
    },
    model: () => model,
    problem: () => (model ? currentProblem() : undefined),
    focusProblem() {
      const input = inputProblems.keys().next();
      const id = !input.done ? input.value : writeProblem?.ruleId === undefined ? undefined : `${writeProblem.ruleId}-card`;
      if (id) document.getElementById(id)?.focus();
    },
    pqlEdited() {
      written = undefined;
      inputProblems.clear();
      writeProblem = undefined;
      paintProblems();
    },
    paintCounts(counts) {
      lastCounts = counts;
      paintCounts(canvasBox, counts);
    },
  };
}

/** Pages of the definitions list a palette reads at most (100 audiences each). */
const MAX_AUDIENCE_PAGES = 50;

/** The sandbox's audiences for inSegment rules, most recently updated first, every page of them (up to 5,000). */
async function allAudiences(ctx: PageContext): Promise<AudienceRef[]> {
  const out: AudienceRef[] = [];
  for (let page = 0; page < MAX_AUDIENCE_PAGES; page++) {
    const p = await ctx.api.listDefinitions({ start: page * 100, limit: 100 });
    out.push(...p.segments.map((d) => ({ id: d.id, name: d.name })));
    if (p.segments.length < 100 || out.length >= p.page.totalCount) break;
  }
  return out;
}
