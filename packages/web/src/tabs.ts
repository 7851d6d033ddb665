/**
 * Tabs as the WAI-ARIA pattern has them: one tab stop for the tab list
 * (roving tabindex), ←/→/Home/End move between tabs and show them at once,
 * each panel labelled by its tab. The chosen tab is kept in the address
 * (?tab=…, replaced, not pushed) so a reload or a shared link opens it.
 */
import { h } from "./dom.js";

export interface TabSpec {
  id: string;
  label: string;
  panel: HTMLElement;
}

export interface Tabs {
  element: HTMLElement;
  /** Show a tab; move focus to its tab (keyboard) or its panel (after an action elsewhere). */
  select(id: string, focus?: "tab" | "panel"): void;
}

export function createTabs(label: string, specs: readonly TabSpec[], onShow: (id: string) => void): Tabs {
  const buttons = specs.map((s) => h("button", { type: "button", role: "tab", id: `tab-${s.id}`, "aria-controls": `panel-${s.id}`, class: "tab" }, s.label));
  const panels = specs.map((s) => h("div", { role: "tabpanel", id: `panel-${s.id}`, "aria-labelledby": `tab-${s.id}`, class: "tab-panel", tabindex: 0 }, s.panel));

  const select = (id: string, focus?: "tab" | "panel") => {
    const index = Math.max(0, specs.findIndex((s) => s.id === id));
    buttons.forEach((b, i) => {
      b.setAttribute("aria-selected", String(i === index));
      b.tabIndex = i === index ? 0 : -1;
      panels[i]!.hidden = i !== index;
    });
    if (focus === "tab") buttons[index]!.focus();
    if (focus === "panel") panels[index]!.focus();
    const url = new URL(location.href);
    if (index === 0) url.searchParams.delete("tab");
    else url.searchParams.set("tab", specs[index]!.id);
    history.replaceState(null, "", url.pathname + url.search);
    onShow(specs[index]!.id);
  };

  buttons.forEach((b, i) => {
    b.addEventListener("click", () => select(specs[i]!.id));
    b.addEventListener("keydown", (e) => {
      const n = specs.length;
      const to = e.key === "ArrowRight" ? (i + 1) % n : e.key === "ArrowLeft" ? (i - 1 + n) % n : e.key === "Home" ? 0 : e.key === "End" ? n - 1 : -1;
      if (to < 0) return;
      e.preventDefault();
      select(specs[to]!.id, "tab");
    });
  });

  return {
    element: h("div", { class: "tabs" }, h("div", { role: "tablist", "aria-label": label, class: "tab-list" }, ...buttons), ...panels),
    select,
  };
}
