/**
 * Sign in with a token. On a server running the local development tenant and
 * opened from this machine, the fields come pre-filled from /ui/config.json
 * (see packages/server/src/web/ui-config.ts for the rule). The credentials
 * are tried with one cheap call before they are kept, so a typo is reported
 * here, in words, rather than on the next page.
 */
import { ApiClient, fetchUiConfig } from "../api/client.js";
import { messageOf } from "../api/errors.js";
import { h, notice } from "../dom.js";
import { knownSandboxes, loadSession, type Session } from "../session.js";

function field(id: string, label: string, value: string, hint: string, type = "text"): { row: HTMLElement; input: HTMLInputElement } {
  const input = h("input", { id, name: id, type, value, required: true, autocomplete: "off", spellcheck: "false", "aria-describedby": `${id}-hint` });
  return { input, row: h("div", { class: "field" }, h("label", { for: id }, label), input, h("p", { class: "hint", id: `${id}-hint` }, hint)) };
}

export async function renderSignIn(root: HTMLElement, onSignedIn: (s: Session) => void): Promise<void> {
  const config = await fetchUiConfig();
  const previous = loadSession();
  const recent = knownSandboxes()[0];
  const dev = config.credentials;
  const token = field("token", "Access token", dev?.token ?? previous?.token ?? "", "Sent as Authorization: Bearer …", "password");
  const apiKey = field("apiKey", "API key (client id)", dev?.apiKey ?? previous?.apiKey ?? "", "Sent as x-api-key.");
  const org = field("orgId", "Organization", dev?.orgId ?? previous?.orgId ?? recent?.orgId ?? "", "The IMS organization id, e.g. 1234…@AdobeOrg.");
  const sandbox = field("sandboxName", "Sandbox", dev?.sandboxName ?? previous?.sandboxName ?? recent?.sandboxName ?? "prod", "Audiences live in one sandbox; you can switch later.");
  const status = h("div", { class: "form-status", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "button" }, "Sign in");
  const form = h("form", { class: "signin-form", "aria-labelledby": "signin-title", novalidate: true },
    h("h1", { id: "signin-title" }, "Sign in to segmentd"),
    h("p", { class: "lead" }, "Build and inspect audiences: batch, streaming and edge."),
    dev ? notice("info", "Filled in for you", "This server runs the local development tenant and you opened it from this machine, so its development token is filled in.") : null,
    token.row, apiKey.row, org.row, sandbox.row, status, submit);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const s: Session = { token: token.input.value.trim(), apiKey: apiKey.input.value.trim(), orgId: org.input.value.trim(), sandboxName: sandbox.input.value.trim() };
    const missing = [[s.token, token], [s.apiKey, apiKey], [s.orgId, org], [s.sandboxName, sandbox]].find(([v]) => v === "");
    if (missing) {
      const f = missing[1] as { input: HTMLInputElement; row: HTMLElement };
      status.replaceChildren(notice("error", `${f.row.querySelector("label")!.textContent} is required.`));
      f.input.focus();
      return;
    }
    submit.disabled = true;
    status.replaceChildren(h("p", { class: "muted" }, "Checking the credentials…"));
    new ApiClient(s).listDefinitions({ start: 0, limit: 1 }).then(
      () => onSignedIn(s),
      (err: unknown) => {
        submit.disabled = false;
        status.replaceChildren(notice("error", "Sign-in failed.", messageOf(err)));
      },
    );
  });
  root.replaceChildren(h("main", { id: "main", class: "signin" }, form));
  (dev ? submit : token.input).focus();
}
