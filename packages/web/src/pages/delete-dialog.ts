/**
 * Deleting an audience (or a destination): a modal <dialog> (Escape cancels,
 * focus stays inside) that asks once, then shows the server's refusal in words
 * — e.g. when another audience still references this one through inSegment
 * (the message names the dependents).
 */
import { messageOf } from "../api/errors.js";
import type { SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { navigate } from "../router.js";

export interface ConfirmDelete {
  /** The resource's name, in the title. */
  name: string;
  /** What deleting does, in one sentence. */
  consequence: string;
  /** The deletion; a rejection shows the server's words under `failure`. */
  run(): Promise<void>;
  failure: string;
  /** Where to go once deleted. */
  then: string;
}

/** A modal <dialog> that asks once, runs the deletion, and shows a refusal in words. */
export function openConfirmDelete(ctx: PageContext, o: ConfirmDelete): void {
  const status = h("div", { class: "form-status" });
  const confirm = h("button", { type: "button", class: "button button-danger" }, "Delete");
  const cancel = h("button", { type: "button", class: "button-secondary" }, "Cancel");
  const dialog = h("dialog", { class: "dialog", "aria-labelledby": "delete-title" },
    h("h2", { id: "delete-title" }, `Delete “${o.name}”?`),
    h("p", {}, o.consequence),
    status,
    h("div", { class: "dialog-actions" }, cancel, confirm));
  const close = () => {
    dialog.close();
    dialog.remove();
  };
  cancel.addEventListener("click", close);
  dialog.addEventListener("close", () => dialog.remove());
  confirm.addEventListener("click", () => {
    confirm.disabled = true;
    status.replaceChildren(h("p", { class: "muted" }, "Deleting…"));
    o.run().then(
      () => {
        close();
        ctx.announce(`Deleted ${o.name}`);
        navigate(o.then);
      },
      (err: unknown) => {
        confirm.disabled = false;
        status.replaceChildren(notice("error", o.failure, messageOf(err)));
        cancel.focus();
      },
    );
  });
  document.body.append(dialog);
  ctx.onLeave(() => {
    if (dialog.isConnected) close();
  });
  dialog.showModal();
  cancel.focus();
}

export function openDeleteDialog(ctx: PageContext, def: Pick<SegmentDefinition, "id" | "name">): void {
  openConfirmDelete(ctx, {
    name: def.name,
    consequence: "The audience and its memberships stop being evaluated. This cannot be undone.",
    run: () => ctx.api.deleteDefinition(def.id).then(() => undefined),
    failure: "The audience was not deleted.",
    then: "/audiences",
  });
}
