/**
 * What a palette item becomes when it is added to a group (by click, Enter or
 * drop): a profile attribute a condition, an event type an event rule, an
 * event field a filter (inside an event) or an event rule with that filter
 * (elsewhere), an audience a membership rule. Items that only mean something
 * on the profile go to the nearest profile group when the target is an
 * event's conditions. Pure, so the placement rules are tested without a browser.
 */
import type { BuilderField } from "../../api/types.js";
import type { Rule, VisualModel } from "../../visual/index.js";
import { conditionOn, eventRuleFor, groupOf, segmentRuleFor, sequenceRuleFor } from "./new-rules.js";
import { idMaker, insertRule, locate, profileGroupFor } from "./tree.js";

export type PaletteItem =
  | { kind: "attribute"; field: BuilderField }
  | { kind: "eventType"; eventType: string }
  | { kind: "eventField"; eventType: string; field: BuilderField }
  | { kind: "audience"; id: string; name: string }
  | { kind: "sequence" }
  | { kind: "group"; mode: "include" | "exclude" };

/** The words of an item, as its button and announcements say them. */
export function itemLabel(item: PaletteItem): string {
  switch (item.kind) {
    case "attribute":
      return `attribute ${item.field.path}`;
    case "eventType":
      return `event ${item.eventType}`;
    case "eventField":
      return `${item.eventType} field ${item.field.path}`;
    case "audience":
      return `audience membership: ${item.name}`;
    case "sequence":
      return "sequence of events";
    case "group":
      return `${item.mode} group`;
  }
}

/** The control a new rule's editor starts with (focus goes there after adding). */
export function firstControlId(rule: Rule): string {
  switch (rule.kind) {
    case "condition":
      return `${rule.id}-op`;
    case "event":
      return `${rule.id}-type`;
    case "segment":
      return `${rule.id}-audience`;
    case "sequence":
      return `${rule.steps[0]!.id}-type`;
    case "group":
      return `${rule.id}-mode`;
    case "pql":
      return `${rule.id}-card`;
  }
}

export interface Added {
  model: VisualModel;
  rule: Rule;
  /** The group that took it (not the target when the item belongs on the profile). */
  groupId: string;
}

/**
 * The model with the item added to a group at `index` (default: its end);
 * undefined when it cannot go there (too deep). `eventTypes` are the
 * sandbox's, most frequent first (a new sequence starts with two of them).
 */
export function addItem(model: VisualModel, item: PaletteItem, groupId: string, index: number | undefined, eventTypes: string[]): Added | undefined {
  const place = locate(model, groupId);
  if (!place || place.node.kind !== "group") return undefined;
  const newId = idMaker(model);
  const inEvent = place.context === "event";
  let rule: Rule;
  let onProfile = true;
  switch (item.kind) {
    case "attribute":
      rule = conditionOn(newId(), item.field.path, item.field.type, item.field.items);
      break;
    case "eventType":
      rule = eventRuleFor(newId, item.eventType);
      break;
    case "eventField": {
      const filter = conditionOn(newId(), item.field.path, item.field.type, item.field.items);
      onProfile = !inEvent;
      rule = inEvent ? filter : eventRuleFor(newId, item.eventType, filter);
      break;
    }
    case "audience":
      rule = segmentRuleFor(newId(), item.id);
      break;
    case "sequence":
      rule = sequenceRuleFor(newId, eventTypes);
      break;
    case "group":
      onProfile = false;
      rule = groupOf(newId(), item.mode);
      break;
  }
  const into = onProfile && inEvent ? profileGroupFor(model, groupId) : groupId;
  const next = insertRule(model, into, rule, into === groupId ? index : undefined);
  return next ? { model: next, rule, groupId: into } : undefined;
}

/** Whether every word of the query is in the text (case-insensitive); an empty query matches. */
export function matchesQuery(text: string, query: string): boolean {
  const hay = text.toLowerCase();
  return query.toLowerCase().split(/\s+/).filter((w) => w !== "").every((w) => hay.includes(w));
}
