/**
 * The frame around every signed-in page: skip link, header with navigation,
 * the organization / sandbox switcher and sign-out, the <main> region the
 * pages render into, and a live region for announcements.
 */
import { h } from "./dom.js";
import { knownSandboxes, type Session } from "./session.js";

export interface ShellHandles {
  main: HTMLElement;
  live: HTMLElement;
  setActive(section: "audiences" | "destinations" | "lifecycle" | null): void;
}

export interface ShellActions {
  onSwitch(orgId: string, sandboxName: string): void;
  onSignOut(): void;
}

export function renderShell(root: HTMLElement, session: Session, actions: ShellActions): ShellHandles {
  const known = knownSandboxes();
  const orgInput = h("input", { id: "switch-org", name: "orgId", value: session.orgId, title: "Organization", size: Math.max(12, session.orgId.length + 1), list: "known-orgs", autocomplete: "off", spellcheck: "false", required: true });
  const sandboxInput = h("input", { id: "switch-sandbox", name: "sandboxName", value: session.sandboxName, title: "Sandbox", list: "known-sandboxes", autocomplete: "off", spellcheck: "false", required: true });
  const switcher = h("form", { class: "switcher", "aria-label": "Organization and sandbox" },
    h("label", { for: "switch-org" }, "Organization"), orgInput,
    h("datalist", { id: "known-orgs" }, ...[...new Set(known.map((k) => k.orgId))].map((o) => h("option", { value: o }))),
    h("label", { for: "switch-sandbox" }, "Sandbox"), sandboxInput,
    h("datalist", { id: "known-sandboxes" }, ...[...new Set(known.map((k) => k.sandboxName))].map((s) => h("option", { value: s }))),
    h("button", { type: "submit", class: "button-secondary" }, "Switch"));
  switcher.addEventListener("submit", (e) => {
    e.preventDefault();
    const org = orgInput.value.trim();
    const sb = sandboxInput.value.trim();
    if (org !== "" && sb !== "") actions.onSwitch(org, sb);
  });
  const navAudiences = h("a", { href: "/audiences" }, "Audiences");
  const navDestinations = h("a", { href: "/destinations" }, "Destinations");
  // "Data " is not drawn on a phone (the three links and sign-out share one row there); it stays in the link's name.
  const navLifecycle = h("a", { href: "/lifecycle", class: "nav-lifecycle" }, h("span", { class: "nav-extra" }, "Data "), "lifecycle");
  const main = h("main", { id: "main", tabindex: "-1" });
  const live = h("div", { class: "visually-hidden", "aria-live": "polite", role: "status" });
  root.replaceChildren(
    h("a", { class: "skip-link", href: "#main" }, "Skip to content"),
    h("header", { class: "topbar" },
      h("a", { class: "brand", href: "/audiences", "aria-label": "segmentd audiences" }, h("span", { class: "brand-mark", "aria-hidden": "true" }, "◆"), "segmentd"),
      h("nav", { "aria-label": "Main" }, navAudiences, navDestinations, navLifecycle),
      switcher,
      h("button", { type: "button", class: "button-ghost", onclick: () => actions.onSignOut() }, "Sign out")),
    main,
    live,
  );
  return {
    main,
    live,
    setActive(section) {
      for (const [a, s] of [[navAudiences, "audiences"], [navDestinations, "destinations"], [navLifecycle, "lifecycle"]] as const) {
        if (s === section) a.setAttribute("aria-current", "page");
        else a.removeAttribute("aria-current");
      }
    },
  };
}
