/**
 * Client routes (real paths, History API). The server answers each of them
 * with index.html (packages/server/src/web/routes.ts), so reloads and shared
 * links work. Keep the two lists in step.
 */

export type Route =
  | { page: "signin" }
  | { page: "audiences"; query: URLSearchParams }
  | { page: "new" }
  | { page: "edit"; id: string }
  | { page: "details"; id: string }
  | { page: "lifecycle" }
  | { page: "destinations" }
  | { page: "destinationNew" }
  | { page: "destination"; id: string }
  | { page: "notFound"; path: string };

export function parseRoute(pathname: string, search: string): Route {
  const parts = pathname.split("/").filter((p) => p !== "").map((p) => decodeURIComponent(p));
  if (parts.length === 0) return { page: "audiences", query: new URLSearchParams(search) };
  const [a, b, c] = parts;
  if (a === "signin" && parts.length === 1) return { page: "signin" };
  if (a === "lifecycle" && parts.length === 1) return { page: "lifecycle" };
  if (a === "destinations") {
    if (parts.length === 1) return { page: "destinations" };
    if (b === "new" && parts.length === 2) return { page: "destinationNew" };
    if (b !== undefined && parts.length === 2) return { page: "destination", id: b };
  }
  if (a === "audiences") {
    if (parts.length === 1) return { page: "audiences", query: new URLSearchParams(search) };
    if (b === "new" && parts.length === 2) return { page: "new" };
    if (b !== undefined && parts.length === 2) return { page: "details", id: b };
    if (b !== undefined && c === "edit" && parts.length === 3) return { page: "edit", id: b };
  }
  return { page: "notFound", path: pathname };
}

export function audiencePath(id: string, edit = false): string {
  return `/audiences/${encodeURIComponent(id)}${edit ? "/edit" : ""}`;
}

export function destinationPath(id: string): string {
  return `/destinations/${encodeURIComponent(id)}`;
}

type Listener = () => void;
const listeners: Listener[] = [];

export function onNavigate(l: Listener): void {
  listeners.push(l);
}

export function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  for (const l of listeners) l();
}

/** Same-origin links navigate without a reload; modified clicks keep the browser's behaviour. */
export function interceptLinks(root: HTMLElement): void {
  root.addEventListener("click", (e) => {
    const me = e as MouseEvent;
    if (me.defaultPrevented || me.button !== 0 || me.metaKey || me.ctrlKey || me.shiftKey || me.altKey) return;
    const a = (e.target as Element | null)?.closest?.("a[href]");
    if (!a || a.getAttribute("target") === "_blank") return;
    const href = a.getAttribute("href")!;
    if (!href.startsWith("/") || href.startsWith("//")) return;
    e.preventDefault();
    navigate(href);
  });
  window.addEventListener("popstate", () => {
    for (const l of listeners) l();
  });
}
