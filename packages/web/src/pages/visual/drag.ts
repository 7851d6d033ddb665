/**
 * Drag-and-drop with the browser's own events: palette items and rule
 * handles are sources, each group's list of rules is a drop zone. The
 * innermost zone that accepts the dragged thing takes it; one that does not
 * (a profile attribute over an event's conditions) lets the zone around it
 * take it instead. The drop position is before the first rule whose middle is
 * below the pointer. Every drag has a keyboard equivalent (palette buttons,
 * move buttons), so drag-and-drop is a convenience, not the only way.
 */
import type { PaletteItem } from "./palette-items.js";

export type DragPayload = { kind: "palette"; item: PaletteItem } | { kind: "rule"; id: string };

export interface DropZone {
  accepts(payload: DragPayload, index: number): boolean;
  drop(payload: DragPayload, index: number): void;
}

/** What is being dragged: dataTransfer cannot be read during dragover, so it is kept here. */
let current: DragPayload | undefined;

function clearIndicators(): void {
  for (const el of Array.from(document.querySelectorAll(".v-drop-before, .v-drop-end"))) el.classList.remove("v-drop-before", "v-drop-end");
}

export function dragSource(el: HTMLElement, payload: () => DragPayload, label: string, image?: () => HTMLElement | null): void {
  el.draggable = true;
  el.addEventListener("dragstart", (e) => {
    e.stopPropagation();
    current = payload();
    if (e.dataTransfer) {
      e.dataTransfer.setData("text/plain", label);
      e.dataTransfer.effectAllowed = current.kind === "rule" ? "move" : "copy";
      const img = image?.();
      if (img) e.dataTransfer.setDragImage(img, 12, 12);
    }
    document.body.classList.add("v-dragging");
  });
  el.addEventListener("dragend", () => {
    current = undefined;
    clearIndicators();
    document.body.classList.remove("v-dragging");
  });
}

/** The index in the group (as `data-index` says) before which a drop at `y` goes; the group's length at the end. */
function indexAt(list: HTMLElement, y: number): number {
  for (const li of Array.from(list.querySelectorAll<HTMLElement>(":scope > li[data-index]"))) {
    const r = li.getBoundingClientRect();
    if (y < r.top + r.height / 2) return Number(li.dataset.index);
  }
  return Number(list.dataset.count ?? "0");
}

function indicate(list: HTMLElement, index: number): void {
  clearIndicators();
  const li = list.querySelector<HTMLElement>(`:scope > li[data-index="${index}"]`);
  if (li) li.classList.add("v-drop-before");
  else list.classList.add("v-drop-end");
}

export function dropZone(list: HTMLElement, zone: DropZone): void {
  list.addEventListener("dragover", (e) => {
    if (!current) return;
    const index = indexAt(list, e.clientY);
    if (!zone.accepts(current, index)) return;
    e.preventDefault();
    e.stopPropagation();
    if (e.dataTransfer) e.dataTransfer.dropEffect = current.kind === "rule" ? "move" : "copy";
    indicate(list, index);
  });
  list.addEventListener("dragleave", (e) => {
    if (!list.contains(e.relatedTarget as Node | null)) list.classList.remove("v-drop-end");
  });
  list.addEventListener("drop", (e) => {
    if (!current) return;
    const index = indexAt(list, e.clientY);
    if (!zone.accepts(current, index)) return;
    e.preventDefault();
    e.stopPropagation();
    const payload = current;
    current = undefined;
    clearIndicators();
    zone.drop(payload, index);
  });
}
