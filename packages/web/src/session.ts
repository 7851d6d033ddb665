/**
 * Who the UI acts as: token, API key, organization and sandbox. Kept in
 * sessionStorage (gone when the tab closes) because the token grants access
 * to the whole organization; the list of sandboxes seen is not secret and is
 * remembered in localStorage to fill the switcher.
 */

export interface Session {
  token: string;
  apiKey: string;
  orgId: string;
  sandboxName: string;
}

const KEY = "segmentd.session";
const KNOWN = "segmentd.knownSandboxes";

function isSession(v: unknown): v is Session {
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  return ["token", "apiKey", "orgId", "sandboxName"].every((k) => typeof o[k] === "string" && o[k] !== "");
}

export function loadSession(): Session | undefined {
  try {
    const raw = window.sessionStorage.getItem(KEY);
    const v: unknown = raw === null ? undefined : JSON.parse(raw);
    return isSession(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(s: Session): void {
  window.sessionStorage.setItem(KEY, JSON.stringify(s));
  rememberSandbox(s.orgId, s.sandboxName);
}

export function clearSession(): void {
  window.sessionStorage.removeItem(KEY);
}

/** "org / sandbox" pairs used before, most recent first. */
export function knownSandboxes(): Array<{ orgId: string; sandboxName: string }> {
  try {
    const v: unknown = JSON.parse(localStorage.getItem(KNOWN) ?? "[]");
    if (!Array.isArray(v)) return [];
    return v.filter((x): x is { orgId: string; sandboxName: string } => typeof x?.orgId === "string" && typeof x?.sandboxName === "string");
  } catch {
    return [];
  }
}

function rememberSandbox(orgId: string, sandboxName: string): void {
  const list = [{ orgId, sandboxName }, ...knownSandboxes().filter((x) => x.orgId !== orgId || x.sandboxName !== sandboxName)].slice(0, 10);
  localStorage.setItem(KNOWN, JSON.stringify(list));
}
