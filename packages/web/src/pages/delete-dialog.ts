/**
 * Deleting an audience: a modal <dialog> (Escape cancels, focus stays inside)
 * that asks once, then shows the server's refusal in words when another
 * audience still references this one through inSegment (the message names
 * the dependents).
 */
import { messageOf } from "../api/errors.js";
import type { SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { navigate } from "../router.js";

export function openDeleteDialog(ctx: PageContext, def: Pick<SegmentDefinition, "id" | "name">): void {
  const status = h("div", { class: "form-status" });
  const confirm = h("button", { type: "button", class: "button button-danger" }, "Delete");
  const cancel = h("button", { type: "button", class: "button-secondary" }, "Cancel");
  const dialog = h("dialog", { class: "dialog", "aria-labelledby": "delete-title" },
    h("h2", { id: "delete-title" }, `Delete “${def.name}”?`),
    h("p", {}, "The audience and its memberships stop being evaluated. This cannot be undone."),
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
    ctx.api.deleteDefinition(def.id).then(
      () => {
        close();
        ctx.announce(`Deleted ${def.name}`);
        navigate("/audiences");
      },
      (err: unknown) => {
        confirm.disabled = false;
        status.replaceChildren(notice("error", "The audience was not deleted.", messageOf(err)));
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
