/**
 * The PQL editor: a real <textarea> (so typing, selection, undo, IME and
 * screen readers behave natively) over a <pre> that draws the same text with
 * colours and squiggles. The textarea's text is transparent and its caret is
 * not, so the user sees the coloured copy. Both use the same font metrics and
 * the overlay follows the textarea's scroll position.
 * Diagnostics are listed under the editor; each one moves the caret to its
 * position when activated.
 */
import { h } from "../dom.js";
import { offsetOf, segmentsOf, type Span } from "./segments.js";

export interface EditorDiagnostic extends Span {
  message: string;
  severity: "error" | "warning";
}

export interface PqlEditor {
  element: HTMLElement;
  textarea: HTMLTextAreaElement;
  value(): string;
  setValue(text: string): void;
  setDiagnostics(list: EditorDiagnostic[]): void;
}

export function createPqlEditor(id: string, initial: string, onInput: (text: string) => void): PqlEditor {
  const highlight = h("pre", { class: "pql-highlight", "aria-hidden": "true" });
  const textarea = h("textarea", {
    id,
    class: "pql-input",
    spellcheck: "false",
    autocapitalize: "off",
    autocomplete: "off",
    rows: 6,
    "aria-describedby": `${id}-diagnostics`,
  });
  textarea.value = initial;
  const list = h("ul", { class: "diagnostics", id: `${id}-diagnostics`, "aria-live": "polite" });
  let diagnostics: EditorDiagnostic[] = [];

  const paint = () => {
    const text = textarea.value;
    const nodes = segmentsOf(text, diagnostics).map((s) => {
      const cls = [`tok-${s.kind}`, s.error ? "tok-error" : ""].filter((c) => c !== "").join(" ");
      return h("span", { class: cls }, s.text);
    });
    // A trailing newline needs a character after it, or the overlay is one line short.
    highlight.replaceChildren(...nodes, "\n");
    // The textarea grows with its text instead of scrolling: a scrollbar would
    // narrow its text box but not the overlay's, and the two would wrap apart.
    textarea.style.height = "auto";
    textarea.style.height = `${textarea.scrollHeight}px`;
    highlight.scrollTop = textarea.scrollTop;
    highlight.scrollLeft = textarea.scrollLeft;
  };

  const paintList = () => {
    if (diagnostics.length === 0) {
      list.replaceChildren();
      list.hidden = true;
      return;
    }
    list.hidden = false;
    list.replaceChildren(...diagnostics.map((d) => h("li", { class: `diagnostic diagnostic-${d.severity}` },
      h("button", {
        type: "button",
        class: "diagnostic-jump",
        onclick: () => {
          const at = offsetOf(textarea.value, d.line, d.column);
          textarea.focus();
          textarea.setSelectionRange(at, Math.max(at, offsetOf(textarea.value, d.endLine, d.endColumn)));
        },
      }, `Line ${d.line}:${d.column}`),
      ` ${d.severity === "error" ? "Error" : "Warning"}: ${d.message}`)));
  };

  textarea.addEventListener("input", () => {
    paint();
    onInput(textarea.value);
  });
  textarea.addEventListener("scroll", () => {
    highlight.scrollTop = textarea.scrollTop;
    highlight.scrollLeft = textarea.scrollLeft;
  });
  paint();
  paintList();
  return {
    element: h("div", { class: "pql-field" }, h("div", { class: "pql-editor" }, highlight, textarea), list),
    textarea,
    value: () => textarea.value,
    setValue(text) {
      textarea.value = text;
      paint();
      onInput(text);
    },
    setDiagnostics(next) {
      diagnostics = next;
      paint();
      paintList();
    },
  };
}
