/**
 * The audience tool's entry point: restore the session (or show sign-in),
 * draw the shell, and render the page for the current path. Any error that
 * escapes a page is shown in words in place of the page, never a blank one.
 */
import { ApiClient } from "./api/client.js";
import { messageOf } from "./api/errors.js";
import type { PageContext } from "./context.js";
import { h, notice } from "./dom.js";
import { renderAudiences } from "./pages/audiences.js";
import { renderBuilder } from "./pages/builder.js";
import { renderDestinations } from "./pages/destinations.js";
import { renderDestinationCreate } from "./pages/destinations-create.js";
import { renderDestinationDetail } from "./pages/destinations-detail.js";
import { renderDetails } from "./pages/details.js";
import { renderLifecycle } from "./pages/lifecycle.js";
import { renderSignIn } from "./pages/signin.js";
import { interceptLinks, navigate, onNavigate, parseRoute } from "./router.js";
import { clearSession, loadSession, saveSession, type Session } from "./session.js";
import { renderShell, type ShellHandles } from "./shell.js";

const root = document.getElementById("app")!;
let shell: ShellHandles | undefined;
let shellFor: Session | undefined;
let leaveCurrent: () => void = () => {};

function sameSession(a: Session | undefined, b: Session): boolean {
  return a !== undefined && a.token === b.token && a.orgId === b.orgId && a.sandboxName === b.sandboxName && a.apiKey === b.apiKey;
}

async function render(): Promise<void> {
  leaveCurrent();
  const route = parseRoute(location.pathname, location.search);
  const session = loadSession();
  if (route.page === "signin" || !session) {
    shell = undefined;
    shellFor = undefined;
    if (route.page !== "signin") {
      // Remember where the user was going, so sign-in can take them there.
      navigate(`/signin?next=${encodeURIComponent(location.pathname + location.search)}`, true);
      return;
    }
    document.title = "Sign in — segmentd";
    await renderSignIn(root, (s) => {
      saveSession(s);
      const next = new URLSearchParams(location.search).get("next");
      navigate(next !== null && next.startsWith("/") && !next.startsWith("//") ? next : "/audiences");
    });
    return;
  }
  if (!shell || !sameSession(shellFor, session)) {
    shellFor = session;
    shell = renderShell(root, session, {
      onSwitch(orgId, sandboxName) {
        saveSession({ ...session, orgId, sandboxName });
        navigate("/audiences");
      },
      onSignOut() {
        clearSession();
        navigate("/signin");
      },
    });
  }
  const s = shell;
  s.main.replaceChildren();
  s.setActive(route.page === "lifecycle" ? "lifecycle" : route.page.startsWith("destination") ? "destinations" : route.page === "notFound" ? null : "audiences");
  const cleanups: Array<() => void> = [];
  let gone = false;
  leaveCurrent = () => {
    gone = true;
    for (const c of cleanups.splice(0)) c();
  };
  const ctx: PageContext = {
    api: new ApiClient(session),
    session,
    main: s.main,
    title: (text) => {
      document.title = `${text} — segmentd`;
    },
    onLeave: (fn) => cleanups.push(fn),
    announce: (text) => {
      s.live.textContent = text;
    },
    left: () => gone,
  };
  try {
    switch (route.page) {
      case "audiences": await renderAudiences(ctx, route.query); break;
      case "new": await renderBuilder(ctx, undefined); break;
      case "edit": await renderBuilder(ctx, route.id); break;
      case "details": await renderDetails(ctx, route.id); break;
      case "lifecycle": await renderLifecycle(ctx); break;
      case "destinations": await renderDestinations(ctx); break;
      case "destinationNew": await renderDestinationCreate(ctx); break;
      case "destination": await renderDestinationDetail(ctx, route.id); break;
      case "notFound":
        ctx.title("Page not found");
        s.main.append(notice("error", "There is no page at this address.", route.path, h("a", { href: "/audiences", class: "button" }, "Go to audiences")));
        break;
    }
  } catch (err) {
    if (gone) return;
    s.main.replaceChildren(notice("error", "This page could not be shown.", messageOf(err), h("a", { href: "/audiences", class: "button" }, "Go to audiences")));
  }
  // Move focus to the new page's content so keyboard and screen-reader users start there.
  if (!gone && document.activeElement === document.body) s.main.focus({ preventScroll: true });
}

interceptLinks(root);
onNavigate(() => {
  void render();
});
window.addEventListener("unhandledrejection", (e) => {
  shell?.main.append(notice("error", "Something went wrong.", messageOf(e.reason)));
});
void render();
