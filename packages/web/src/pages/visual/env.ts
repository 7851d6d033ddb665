/**
 * What the canvas's editors share: the model being edited, the palette's data
 * for field types and suggestions, and the ways an editor reports a change
 * (a value typed in place, or a change of shape that redraws the rules).
 */
import type { BuilderField, BuilderPalette } from "../../api/types.js";
import type { Group, RuleContext, VisualModel } from "../../visual/index.js";
import type { OperandEnv } from "./operand-inputs.js";

export interface AudienceRef {
  id: string;
  name: string;
}

export interface GroupView {
  context: RuleContext;
  /** The event type of the enclosing event rule or step (its fields' types). */
  eventType?: string;
  /** Children the enclosing editor shows as its own controls (event type, time window). */
  hidden?: ReadonlySet<string>;
  /** The root group's heading ("Event conditions"); nested groups are numbered. */
  label: string;
}

export interface CanvasEnv extends OperandEnv {
  model(): VisualModel;
  palette(): BuilderPalette | undefined;
  audiences(): AudienceRef[];
  newId(): string;
  /** The model was changed in place in its shape: redraw, then focus this element id (or keep focus). */
  restructure(focusId?: string): void;
  /** Replace the model (tree edits return new ones), redraw, focus and announce. */
  replace(next: VisualModel, focusId?: string, announce?: string): void;
  renderGroup(group: Group, view: GroupView): HTMLElement;
  /** A polite screen-reader announcement. */
  announce(text: string): void;
  /** The group palette items are added to. */
  target(): string;
  setTarget(groupId: string): void;
}

/** A profile attribute of the palette. */
export function profileField(palette: BuilderPalette | undefined, path: string): BuilderField | undefined {
  return palette?.profile.fields.find((f) => f.path === path);
}

/** A field of an event type (or of any event when the type is not known). */
export function eventField(palette: BuilderPalette | undefined, eventType: string | undefined, path: string): BuilderField | undefined {
  const typed = eventType === undefined ? undefined : palette?.events.eventTypes.find((t) => t.eventType === eventType);
  return typed?.fields.find((f) => f.path === path) ?? palette?.events.fields.find((f) => f.path === path);
}

/** The fields an event filter can test: those of its type, else those of every event. */
export function eventFields(palette: BuilderPalette | undefined, eventType: string | undefined): BuilderField[] {
  const typed = eventType === undefined ? undefined : palette?.events.eventTypes.find((t) => t.eventType === eventType);
  return (typed?.fields ?? palette?.events.fields ?? []).filter((f) => f.type !== "object" && f.path !== "eventType");
}
