/**
 * The rule canvas: groups with their rules as cards. A group says whether
 * profiles must match all or any of its rules; a nested group is an include
 * or an exclude group. Each card has a drag handle, move buttons (also
 * Alt+Shift+arrows) and Remove; top-level cards show how many profiles the
 * rule alone matches. Every group can be the one the palette adds to.
 */
import { h } from "../../dom.js";
import type { Group, Rule } from "../../visual/index.js";
import type { DragPayload } from "./drag.js";
import { dragSource, dropZone } from "./drag.js";
import type { CanvasEnv, GroupView } from "./env.js";
import { eventFields } from "./env.js";
import { conditionOn } from "./new-rules.js";
import type { PaletteItem } from "./palette-items.js";
import { blockView, conditionEditor, eventEditor, segmentEditor } from "./rule-editors.js";
import { sequenceEditor } from "./sequence-editor.js";
import type { MoveKind } from "./tree.js";
import { describePlace, groupName, groupNumbers, insertRule, moveBy, moveRule, removeRule } from "./tree.js";

export interface CanvasHooks {
  /** Add a palette item to a group (at an index when dropped). */
  addItem(item: PaletteItem, groupId: string, index?: number): void;
  /** Whether a palette item can be dropped into that group. */
  acceptsItem(item: PaletteItem, groupId: string): boolean;
}

const MOVES: { kind: MoveKind; label: string; text: string; keys: string; key: string }[] = [
  { kind: "up", label: "Move up", text: "↑", keys: "Alt+Shift+ArrowUp", key: "ArrowUp" },
  { kind: "down", label: "Move down", text: "↓", keys: "Alt+Shift+ArrowDown", key: "ArrowDown" },
  { kind: "into", label: "Move into the group next to it", text: "⇥", keys: "Alt+Shift+ArrowRight", key: "ArrowRight" },
  { kind: "out", label: "Move out of its group", text: "⇤", keys: "Alt+Shift+ArrowLeft", key: "ArrowLeft" },
];

export function ruleTitle(rule: Rule, inEvent: boolean, groupNumber: number | undefined): string {
  switch (rule.kind) {
    case "condition":
      return `${inEvent ? "Event field" : "Attribute"} ${rule.field}`;
    case "event":
      return "Event";
    case "sequence":
      return "Sequence of events";
    case "segment":
      return "Audience membership";
    case "group":
      return `Group ${groupNumber ?? ""}`.trim();
    case "pql":
      return "PQL (read-only)";
  }
}

export function createCanvas(env: CanvasEnv, hooks: CanvasHooks) {
  let numbers = new Map<string, number>();

  const zone = (list: HTMLElement, group: Group) =>
    dropZone(list, {
      accepts: (p: DragPayload, index: number) =>
        p.kind === "palette" ? hooks.acceptsItem(p.item, group.id) : moveRule(env.model(), p.id, group.id, index) !== undefined,
      drop: (p: DragPayload, index: number) => {
        if (p.kind === "palette") {
          hooks.addItem(p.item, group.id, index);
          return;
        }
        const next = moveRule(env.model(), p.id, group.id, index);
        if (next) env.replace(next, `${p.id}-card`, `Moved to ${describePlace(next, p.id)}.`);
      },
    });

  const combinatorSelect = (group: Group) => {
    const id = `${group.id}-comb`;
    const select = h("select", { id },
      h("option", { value: "and", selected: group.combinator === "and" }, "all of these (AND)"),
      h("option", { value: "or", selected: group.combinator === "or" }, "any of these (OR)"));
    select.addEventListener("change", () => {
      group.combinator = select.value as Group["combinator"];
      env.restructure(id);
    });
    return h("span", { class: "v-input" }, h("label", { for: id, class: "visually-hidden" }, "Match"), select);
  };

  /** An event group's "Add a condition on [field]". */
  const fieldAdder = (group: Group, view: GroupView) => {
    const fields = eventFields(env.palette(), view.eventType);
    if (fields.length === 0) return null;
    const id = `${group.id}-field`;
    const select = h("select", { id }, ...fields.map((f) => h("option", { value: f.path }, `${f.path} (${f.type})`)));
    const add = h("button", { type: "button", class: "button-secondary v-mini", id: `${group.id}-add-field` }, "Add condition");
    add.addEventListener("click", () => {
      const f = fields.find((x) => x.path === select.value)!;
      const rule = conditionOn(env.newId(), f.path, f.type, f.items);
      const next = insertRule(env.model(), group.id, rule);
      if (next) env.replace(next, `${rule.id}-op`, `Added a condition on ${f.path}.`);
    });
    return h("span", { class: "v-inline" }, h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, "Condition on"), select), add);
  };

  const groupFoot = (group: Group, view: GroupView) => {
    const addGroup = (mode: Group["mode"]) => {
      const b = h("button", { type: "button", class: "button-ghost v-mini", id: `${group.id}-add-${mode}` }, mode === "include" ? "+ Group" : "+ Exclude group");
      b.addEventListener("click", () => hooks.addItem({ kind: "group", mode }, group.id));
      return b;
    };
    // Inside an event, conditions come from its own field list; the palette targets profile groups.
    if (view.context === "event") return h("div", { class: "v-group-foot" }, fieldAdder(group, view), addGroup("include"));
    const isTarget = env.target() === group.id;
    const where = groupName(env.model(), group.id);
    const target = h("button", { type: "button", class: `button-ghost v-mini v-target${isTarget ? " is-on" : ""}`, id: `${group.id}-target`, "aria-pressed": String(isTarget), "aria-label": `Palette adds to ${where}` }, isTarget ? "✓ Palette adds here" : "Add from palette here");
    target.addEventListener("click", () => env.setTarget(group.id));
    return h("div", { class: "v-group-foot" }, addGroup("include"), addGroup("exclude"), target);
  };

  const tools = (rule: Rule, title: string, view: GroupView) => {
    const model = env.model();
    const buttons = MOVES.map((m) => {
      const next = moveBy(model, rule.id, m.kind, view.hidden);
      const id = `${rule.id}-move-${m.kind}`;
      const b = h("button", { type: "button", class: "button-ghost v-mini", id, "aria-label": m.label, title: `${m.label} (${m.keys.replace(/Arrow/g, "")})`, "aria-keyshortcuts": m.keys, disabled: !next }, m.text);
      b.addEventListener("click", () => move(rule, title, m.kind, view, id));
      return b;
    });
    const remove = h("button", { type: "button", class: "button-ghost v-mini v-remove", id: `${rule.id}-remove`, "aria-label": "Remove", title: "Remove" }, "✕");
    remove.addEventListener("click", () => {
      const next = removeRule(env.model(), rule.id);
      if (next) env.replace(next, focusAfterRemove(rule.id, view), `Removed ${title}.`);
    });
    return h("span", { class: "v-tools" }, ...buttons, remove);
  };

  /** The card after the removed one, else the one before, else its group's palette button. */
  const focusAfterRemove = (id: string, view: GroupView): string | undefined => {
    const card = document.getElementById(`${id}-card`);
    const li = card?.closest("li.v-item");
    const sibling = (li?.nextElementSibling ?? li?.previousElementSibling)?.getAttribute("data-rule-id");
    if (sibling) return `${sibling}-card`;
    const group = li?.closest("ol.v-children")?.getAttribute("data-group-id");
    return group && !view.hidden?.has(id) ? `${group}-target` : undefined;
  };

  const move = (rule: Rule, title: string, kind: MoveKind, view: GroupView, focusId: string) => {
    const next = moveBy(env.model(), rule.id, kind, view.hidden);
    if (!next) {
      env.announce(`${title} cannot move ${kind === "into" ? "into a group: none is next to it" : kind === "out" ? "out: it is not in a nested group" : kind}.`);
      return;
    }
    env.replace(next, focusId, `Moved ${title} to ${describePlace(next, rule.id)}.`);
  };

  const body = (rule: Rule, view: GroupView): HTMLElement => {
    switch (rule.kind) {
      case "condition":
        return conditionEditor(rule, view.context, view.eventType, env);
      case "event":
        return eventEditor(rule, env);
      case "sequence":
        return sequenceEditor(rule, env);
      case "segment":
        return segmentEditor(rule, env);
      case "pql":
        return blockView(rule);
      case "group": {
        const id = `${rule.id}-mode`;
        const mode = h("select", { id },
          h("option", { value: "include", selected: rule.mode === "include" }, "Include profiles matching"),
          h("option", { value: "exclude", selected: rule.mode === "exclude" }, "Exclude profiles matching"));
        mode.addEventListener("change", () => {
          rule.mode = mode.value as Group["mode"];
          env.restructure(id);
        });
        return h("div", { class: "v-subgroup" },
          groupBody(rule, { ...view, label: "" }, false, h("span", { class: "v-input" }, h("label", { for: id, class: "visually-hidden" }, "Include or exclude"), mode)));
      }
    }
  };

  const card = (rule: Rule, parent: Group, index: number, first: boolean, view: GroupView, topLevel: boolean): HTMLElement => {
    const title = ruleTitle(rule, view.context === "event", numbers.get(rule.id));
    const titleId = `${rule.id}-title`;
    const handle = h("span", { class: "v-handle", title: "Drag to move", "aria-hidden": "true" }, "⠿");
    const article = h("article", { class: `v-card v-card-${rule.kind}${rule.kind === "group" && rule.mode === "exclude" ? " is-exclude" : ""}`, id: `${rule.id}-card`, role: "group", "aria-labelledby": titleId, tabindex: -1, "data-rule-id": rule.id },
      h("div", { class: "v-card-head" },
        handle,
        h("h4", { class: "v-card-title", id: titleId }, title),
        topLevel ? h("span", { class: "v-count", "data-count-for": rule.id, "aria-live": "off" }) : null,
        tools(rule, title, view)),
      body(rule, view),
      h("p", { class: "v-problem", id: `${rule.id}-problem`, "data-problem-for": rule.id, hidden: true }));
    dragSource(handle, () => ({ kind: "rule", id: rule.id }), title, () => article);
    article.addEventListener("keydown", (e) => {
      if (!e.altKey || !e.shiftKey) return;
      const m = MOVES.find((x) => x.key === e.key);
      if (!m) return;
      e.preventDefault();
      e.stopPropagation();
      move(rule, title, m.kind, view, `${rule.id}-card`);
    });
    return h("li", { class: "v-item", "data-index": index, "data-rule-id": rule.id },
      first ? null : h("span", { class: "v-connector", "aria-hidden": "true" }, parent.combinator.toUpperCase()),
      article);
  };

  /** A group's head (its label or `lead`, and all/any once it has two rules), its rules, and its foot. */
  const groupBody = (group: Group, view: GroupView, topLevel = false, lead?: HTMLElement): HTMLElement => {
    const visible = group.children.map((c, i) => ({ c, i })).filter(({ c }) => !view.hidden?.has(c.id));
    const headId = `${group.id}-head`;
    const number = numbers.get(group.id);
    const listName = number !== undefined ? `Rules of group ${number}` : view.context === "event" ? view.label : "Top-level rules";
    const list = h("ol", { class: "v-children", "data-group-id": group.id, "data-count": group.children.length, "aria-label": listName });
    visible.forEach(({ c, i }, k) => list.append(card(c, group, i, k === 0, view, topLevel)));
    // An event with only a type and a window needs no empty list: its foot adds conditions.
    const bare = visible.length === 0 && view.context === "event";
    if (visible.length === 0) list.append(h("li", { class: bare ? "v-empty is-bare" : "v-empty" }, bare ? "" : "No rules yet: add them from the palette, or drop them here."));
    zone(list, group);
    const head = h("div", { class: "v-group-head", id: headId },
      lead ?? (view.label === "" || bare ? null : h("span", { class: "v-group-label" }, view.label)),
      visible.length >= 2 ? combinatorSelect(group) : null);
    return h("div", { class: `v-group${env.target() === group.id ? " is-target" : ""}`, "data-group-id": group.id, "data-context": view.context }, head, list, groupFoot(group, view));
  };

  return {
    renderGroup: (group: Group, view: GroupView) => groupBody(group, view),
    render(): HTMLElement {
      const model = env.model();
      numbers = groupNumbers(model);
      return groupBody(model.root, { context: "profile", label: "Profiles that match" }, true);
    },
  };
}
