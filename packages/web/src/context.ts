/** What every page gets: the API client for the session, where to render, and lifecycle hooks. */
import type { ApiClient } from "./api/client.js";
import type { Session } from "./session.js";

export interface PageContext {
  api: ApiClient;
  session: Session;
  /** The page's region (<main>); already emptied. */
  main: HTMLElement;
  /** Set the document title and the page heading's text for screen readers. */
  title(text: string): void;
  /** Run when the user leaves the page (stop timers, polls). */
  onLeave(fn: () => void): void;
  /** A short polite announcement ("Saved", "Deleted"). */
  announce(text: string): void;
  /** True once the user has left this page: late answers must not render. */
  left(): boolean;
}
