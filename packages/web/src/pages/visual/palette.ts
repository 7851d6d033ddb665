/**
 * The palette: what rules can be made of, from the sandbox's own data (the
 * profile attributes and event types with their fields that
 * GET …/segment/builder/fields found, the sandbox's audiences) and the
 * building blocks (sequence, groups). Searchable; each item is a button
 * (click or Enter adds it to the chosen group) and can be dragged onto a
 * group. An event type's fields open under it.
 */
import type { BuilderField, BuilderPalette } from "../../api/types.js";
import { fieldPath, h } from "../../dom.js";
import { formatCount } from "../../format.js";
import { dragSource } from "./drag.js";
import type { AudienceRef } from "./env.js";
import { computedMeta, isComputedPath, type ComputedField } from "./computed-fields.js";
import type { PaletteItem } from "./palette-items.js";
import { itemLabel, matchesQuery } from "./palette-items.js";

export type PaletteState =
  | { state: "loading" }
  | { state: "ready"; palette: BuilderPalette; audiences: AudienceRef[]; audiencesError?: string; computed?: ComputedField[]; computedError?: string }
  | { state: "failed"; message: string };

export interface PaletteView {
  element: HTMLElement;
  set(state: PaletteState): void;
  /** Which group items go to, in words. */
  setTarget(where: string): void;
}

const TYPE_WORDS: Record<string, string> = { string: "text", integer: "number", number: "number", boolean: "true/false", date: "date", "date-time": "date", array: "list", object: "object" };

function typeWord(f: BuilderField): string {
  return f.type === "array" && f.items ? `list of ${TYPE_WORDS[f.items] ?? f.items}` : (TYPE_WORDS[f.type] ?? f.type);
}

export function createPalette(pick: (item: PaletteItem) => void, refresh: () => void): PaletteView {
  const search = h("input", { id: "v-palette-search", type: "search", autocomplete: "off", spellcheck: "false", placeholder: "Field, event or audience" });
  const target = h("p", { class: "hint v-palette-target", id: "v-palette-target" });
  const status = h("p", { class: "visually-hidden", "aria-live": "polite" });
  const body = h("div", { class: "v-palette-body" });
  const refreshButton = h("button", { type: "button", class: "button-ghost v-mini", title: "Read the sandbox's fields again" }, "Refresh");
  refreshButton.addEventListener("click", refresh);
  let state: PaletteState = { state: "loading" };

  const itemButton = (item: PaletteItem, name: string, meta: string): HTMLElement => {
    const b = h("button", { type: "button", class: "v-pal-item", "aria-label": `Add ${itemLabel(item)}`, "aria-describedby": "v-palette-target", title: `Add ${itemLabel(item)} (or drag it onto a group)` },
      // Field paths wrap at their dots, never mid-word.
      h("span", { class: "v-pal-name" }, item.kind === "attribute" || item.kind === "eventField" ? fieldPath(name, "span") : name),
      meta === "" ? null : h("span", { class: "v-pal-meta", "aria-hidden": "true" }, meta));
    b.addEventListener("click", () => pick(item));
    dragSource(b, () => ({ kind: "palette", item }), itemLabel(item));
    return b;
  };

  const section = (id: string, title: string, items: HTMLElement[], empty: string): HTMLElement =>
    h("section", { class: "v-pal-section", "aria-labelledby": id },
      h("h4", { id }, title, h("span", { class: "muted" }, ` (${items.length})`)),
      items.length > 0 ? h("ul", { class: "v-pal-list" }, ...items) : h("p", { class: "hint" }, empty));

  const paint = () => {
    if (state.state === "loading") {
      body.replaceChildren(h("p", { class: "muted" }, "Reading the sandbox's fields…"));
      return;
    }
    if (state.state === "failed") {
      const retry = h("button", { type: "button", class: "button-secondary v-mini" }, "Try again");
      retry.addEventListener("click", refresh);
      body.replaceChildren(h("div", { class: "notice notice-error", role: "alert" }, h("p", { class: "notice-title" }, "The palette could not be loaded."), h("p", { class: "notice-detail" }, state.message), retry));
      return;
    }
    const q = search.value;
    const { palette, audiences } = state;
    const attrs = palette.profile.fields
      .filter((f) => f.type !== "object" && !isComputedPath(f.path) && matchesQuery(f.path, q))
      .map((f) => h("li", {}, itemButton({ kind: "attribute", field: f }, f.path, typeWord(f))));
    const computed = (state.computed ?? [])
      .filter((c) => matchesQuery(`${c.attribute.displayName} ${c.field.path}`, q))
      .map((c) => h("li", {}, itemButton({ kind: "attribute", field: c.field }, c.field.path, `${c.attribute.displayName} · ${computedMeta(c.attribute)}`)));
    const events = palette.events.eventTypes.flatMap((t) => {
      const typeHit = matchesQuery(t.eventType, q);
      const fields = t.fields.filter((f) => f.type !== "object" && (typeHit || matchesQuery(`${t.eventType} ${f.path}`, q)));
      if (!typeHit && fields.length === 0) return [];
      const listId = `v-pal-fields-${t.eventType.replace(/[^A-Za-z0-9_-]/g, "_")}`;
      const open = q.trim() !== "" && !typeHit;
      const toggle = h("button", { type: "button", class: "button-ghost v-mini v-pal-toggle", "aria-expanded": String(open), "aria-controls": listId, "aria-label": `Fields of ${t.eventType}` }, open ? "▾" : "▸");
      const list = h("ul", { class: "v-pal-list v-pal-fields", id: listId, hidden: !open },
        ...fields.map((f) => h("li", {}, itemButton({ kind: "eventField", eventType: t.eventType, field: f }, f.path, typeWord(f)))));
      toggle.addEventListener("click", () => {
        const now = list.hidden;
        list.hidden = !now;
        toggle.setAttribute("aria-expanded", String(now));
        toggle.textContent = now ? "▾" : "▸";
      });
      return [h("li", {}, h("div", { class: "v-pal-row" }, itemButton({ kind: "eventType", eventType: t.eventType }, t.eventType, `${formatCount(t.count)} events`), fields.length > 0 ? toggle : null), list)];
    });
    const auds = audiences.filter((a) => matchesQuery(a.name, q)).map((a) => h("li", {}, itemButton({ kind: "audience", id: a.id, name: a.name }, a.name, "")));
    const blocks: [PaletteItem, string][] = [
      [{ kind: "sequence" }, "Sequence: this, then that"],
      [{ kind: "group", mode: "include" }, "Group (all / any of)"],
      [{ kind: "group", mode: "exclude" }, "Exclude group"],
    ];
    const blockItems = blocks.filter(([item, name]) => matchesQuery(`${name} ${itemLabel(item)}`, q)).map(([item, name]) => h("li", {}, itemButton(item, name, "")));
    body.replaceChildren(
      section("v-pal-attrs", "Profile attributes", attrs, q ? "No attribute matches." : "No profile attributes in the sampled data yet."),
      section("v-pal-computed", "Computed attributes", computed,
        state.computedError ? `Computed attributes could not be listed (${state.computedError}).` : q ? "No computed attribute matches." : "No computed attributes in this sandbox yet."),
      section("v-pal-events", "Events", events, q ? "No event type matches." : "No events in the sampled data yet."),
      section("v-pal-audiences", "Audiences", auds, state.audiencesError ? `Audiences could not be listed (${state.audiencesError}).` : q ? "No audience matches." : "No other audiences yet."),
      section("v-pal-blocks", "Building blocks", blockItems, "No building block matches."),
      h("p", { class: "hint" }, `From ${formatCount(palette.profile.sampled)} sampled profiles and ${formatCount(palette.events.sampled)} events.`));
    status.textContent = q.trim() === "" ? "" : `${attrs.length + computed.length + events.length + auds.length + blockItems.length} matches`;
  };
  search.addEventListener("input", paint);

  return {
    element: h("aside", { class: "v-palette", "aria-labelledby": "v-palette-title" },
      h("div", { class: "v-palette-head" }, h("h3", { id: "v-palette-title" }, "Add rules"), refreshButton),
      h("label", { for: "v-palette-search", class: "v-input-label" }, "Search the palette"),
      search,
      target,
      status,
      body),
    set(next) {
      state = next;
      paint();
    },
    setTarget(where) {
      target.textContent = `Adds to ${where}. Press Enter on an item, or drag it onto a group.`;
    },
  };
}
