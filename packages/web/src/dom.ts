/**
 * A tiny element builder: the UI is vanilla DOM, and this keeps page code
 * declarative without a framework. Text is always set as text (never as
 * HTML), so server data cannot inject markup.
 */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | null | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, "").toLowerCase(), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "number" ? String(c) : c);
  }
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: Array<Node | string>): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el as SVGElement;
}

/** A message box for errors and empty states; `role` makes screen readers announce errors. */
export function notice(kind: "error" | "empty" | "info", title: string, detail?: string, ...actions: Child[]): HTMLElement {
  return h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" },
    h("p", { class: "notice-title" }, title),
    detail ? h("p", { class: "notice-detail" }, detail) : null,
    actions.length > 0 ? h("div", { class: "notice-actions" }, ...actions) : null);
}

export function clear(el: Element): void {
  el.replaceChildren();
}

/**
 * A field path ("homeAddress.countryCode") that wraps only after its dots:
 * a break opportunity (<wbr>) follows each dot and the class turns off the
 * anywhere-wrapping of code, so a narrow column never splits a name mid-word.
 */
export function fieldPath(path: string, tag: "code" | "span" = "code"): HTMLElement {
  const el = h(tag, { class: "field-path" });
  path.split(".").forEach((part, i, all) => {
    el.append(i < all.length - 1 ? `${part}.` : part);
    if (i < all.length - 1) el.append(document.createElement("wbr"));
  });
  return el;
}
