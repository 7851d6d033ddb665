/**
 * Creating a destination: a webhook — the endpoint (URL, no auth or a bearer token, custom
 * headers), the retry period and batch size —, a NATS JetStream subject — the subject, the
 * server (segmentd's own by default), the retry period — or a file export — format,
 * compression, full or incremental runs, how often and from when; then for all the audiences to send
 * (the sandbox's own) and the profile attributes and identity namespaces each profile
 * carries (offered from the sandbox's data, as the visual builder's palette samples it).
 *
 * One destination is three Flow Service resources, created in order: base connection
 * (auth), target connection (where; the server checks the URL here), flow (what). When
 * a later step is refused the earlier ones are deleted again, so a refused form leaves
 * nothing behind. The flow's signing secret is shown once, after the create.
 */
import { destinationsApi } from "../api/destinations.js";
import { ApiFailure, detailsOf, messageOf } from "../api/errors.js";
import type { BuilderPalette, SegmentDefinition } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { METHOD_LABELS, methodOf } from "../methods.js";
import { destinationPath } from "../router.js";
import { connectionBody, DEFAULT_BATCH_SIZE, DEFAULT_RETRY_SECONDS, FILE_FREQUENCIES, flowBody, frequencyWords, natsStreamName, targetBody, validateDraft, type DestinationDraft, type DestinationKindDraft, type DraftErrors, type DraftField, type FileFrequency } from "./destinations-model.js";

/** The sandbox guardrail on audiences: the list is read whole. */
const AUDIENCE_CAP = 4000;

async function allAudiences(ctx: PageContext): Promise<SegmentDefinition[]> {
  const out: SegmentDefinition[] = [];
  for (let start = 0; start < AUDIENCE_CAP; start += 100) {
    const page = await ctx.api.listDefinitions({ start, limit: 100 });
    out.push(...page.segments);
    if (page.segments.length < 100 || out.length >= page.page.totalCount) break;
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** Attribute paths worth offering: leaves of the profile, not identities or memberships. */
export function offeredAttributes(palette: BuilderPalette | undefined): string[] {
  if (!palette) return [];
  return palette.profile.fields
    .filter((f) => f.type !== "object" && !/^(identityMap|segmentMembership|_segmentd)(\.|$)/.test(f.path))
    .map((f) => f.path)
    .sort();
}

function checkList(name: string, values: Array<{ value: string; label: Node | string; extra?: Node }>): { element: HTMLElement; checked(): string[] } {
  const boxes = values.map((v, i) => {
    const id = `${name}-${i}`;
    const input = h("input", { type: "checkbox", id, name, value: v.value });
    return { input, row: h("li", { class: "check-row" }, input, h("label", { for: id }, v.label), v.extra ?? null) };
  });
  return {
    element: h("ul", { class: "check-list plain-list" }, ...boxes.map((b) => b.row)),
    checked: () => boxes.filter((b) => b.input.checked).map((b) => b.input.value),
  };
}

function field(id: string, label: string, control: HTMLElement, hint?: string): { element: HTMLElement; error: HTMLElement } {
  const error = h("p", { class: "hint hint-error", id: `${id}-error`, role: "alert" });
  const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  control.setAttribute("aria-describedby", [hintEl ? `${id}-hint` : "", `${id}-error`].filter((x) => x !== "").join(" "));
  return { element: h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl, error), error };
}

export async function renderDestinationCreate(ctx: PageContext): Promise<void> {
  ctx.title("Create destination");
  ctx.main.append(h("p", { class: "muted" }, "Loading the sandbox's audiences…"));
  let audiences: SegmentDefinition[];
  try {
    audiences = await allAudiences(ctx);
  } catch (err) {
    if (ctx.left()) return;
    ctx.main.replaceChildren(notice("error", "The audiences could not be loaded.", messageOf(err), h("a", { class: "button", href: "/destinations" }, "Back to destinations")));
    return;
  }
  // Without the palette the form still works: attributes are typed.
  const palette = await ctx.api.builderFields().catch(() => undefined);
  if (ctx.left()) return;

  const name = h("input", { id: "dest-name", name: "name", autocomplete: "off", maxlength: 256 });
  const url = h("input", { id: "dest-url", name: "url", type: "url", inputmode: "url", autocomplete: "off", spellcheck: "false", placeholder: "https://crm.example.com/segmentd/hook" });
  const token = h("input", { id: "dest-token", name: "token", type: "password", autocomplete: "off" });
  const headers = h("textarea", { id: "dest-headers", name: "headers", rows: 3, spellcheck: "false", placeholder: "X-Tenant: acme" });
  const retry = h("input", { id: "dest-retry", name: "retry", type: "number", min: 1, max: 604800, step: 1, value: DEFAULT_RETRY_SECONDS });
  const batch = h("input", { id: "dest-batch", name: "batch", type: "number", min: 1, max: 1000, step: 1, value: DEFAULT_BATCH_SIZE });
  const otherAttributes = h("input", { id: "dest-attributes", name: "attributes", autocomplete: "off", spellcheck: "false", placeholder: "person.name.firstName, personalEmail.address" });
  const format = h("select", { id: "file-format", name: "format" }, h("option", { value: "ndjson" }, "NDJSON (one JSON object per line)"), h("option", { value: "csv" }, "CSV (a header line, then one row per member)"));
  const gzip = h("input", { type: "checkbox", id: "file-gzip", name: "gzip" });
  const mode = h("select", { id: "file-mode", name: "mode" }, h("option", { value: "DAILY_FULL_EXPORT" }, "Every member, each run"), h("option", { value: "FIRST_FULL_THEN_INCREMENTAL" }, "Every member first, then the changes since the previous run"));
  const frequency = h("select", { id: "file-frequency", name: "frequency" }, ...FILE_FREQUENCIES.map((f) => h("option", { value: f }, frequencyWords(f))));
  const startDate = h("input", { id: "file-start-date", name: "startDate", type: "date" });
  const startTime = h("input", { id: "file-start-time", name: "startTime", type: "time" });
  const subject = h("input", { id: "nats-subject", name: "subject", autocomplete: "off", spellcheck: "false", maxlength: 200, placeholder: "crm.members" });
  const serverUrl = h("input", { id: "nats-server", name: "serverUrl", autocomplete: "off", spellcheck: "false", inputmode: "url", placeholder: "nats://nats.internal:4222" });

  const authChoice = (value: "none" | "bearer", label: string) => {
    const input = h("input", { type: "radio", name: "auth", id: `auth-${value}`, value, checked: value === "none" });
    input.addEventListener("change", () => {
      tokenField.element.hidden = !(value === "bearer" && input.checked);
    });
    return h("span", { class: "segment" }, input, h("label", { for: `auth-${value}` }, label));
  };
  const tokenField = field("dest-token", "Token", token, "Sent as Authorization: Bearer …; stored encrypted, never shown again.");
  tokenField.element.hidden = true;

  const audienceList = checkList("audience", audiences.map((d) => ({ value: d.id, label: d.name, extra: h("span", { class: `badge badge-${methodOf(d)}` }, METHOD_LABELS[methodOf(d)]) })));
  const audienceError = h("p", { class: "hint hint-error", id: "audiences-error", role: "alert" });
  const attributeList = checkList("attribute", offeredAttributes(palette).map((p) => ({ value: p, label: h("code", {}, p) })));
  const attributeError = h("p", { class: "hint hint-error", id: "dest-attributes-error", role: "alert" });
  const namespaceList = checkList("namespace", (palette?.identities.namespaces ?? []).map((n) => ({ value: n, label: n })));

  const fields: Record<Exclude<DraftField, "audiences" | "attributes">, ReturnType<typeof field>> = {
    name: field("dest-name", "Name", name),
    startDate: field("file-start-date", "First export on (UTC date, optional)", startDate, "Empty: the first export runs now, then at each period."),
    startTime: field("file-start-time", "At (UTC time, optional)", startTime, "Empty: 00:00 UTC on that date."),
    url: field("dest-url", "Endpoint URL", url, "Each change is POSTed here as JSON (AEP's HTTP API destination shape), signed per Standard Webhooks."),
    token: tokenField,
    headers: field("dest-headers", "Custom headers (optional)", headers, "One “Name: value” per line, at most 20. Values are stored encrypted."),
    retryPeriodSeconds: field("dest-retry", "Retry failed deliveries for (seconds)", retry, "Then a delivery becomes a dead letter you can replay. 86,400 = 24 hours."),
    maxBatchSize: field("dest-batch", "Most profiles per request", batch),
    subject: field("nats-subject", "Subject", subject, "Each change is one JetStream message on this subject, captured by the destination's own stream."),
    serverUrl: field("nats-server", "NATS server (optional)", serverUrl, "Empty: segmentd's own NATS server. Otherwise nats://host:port or tls://host:port."),
  };
  const status = h("div", { class: "form-status", "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "button" }, "Create destination");

  const kindChoice = (value: DestinationKindDraft, label: string) => {
    const input = h("input", { type: "radio", name: "kind", id: `kind-${value}`, value, checked: value === "webhook" });
    input.addEventListener("change", () => showKind());
    return h("span", { class: "segment" }, input, h("label", { for: `kind-${value}` }, label));
  };
  const kind = (): DestinationKindDraft => {
    const v = form.querySelector<HTMLInputElement>("input[name=kind]:checked")?.value;
    return v === "file" || v === "nats" ? v : "webhook";
  };
  const webhookOnly = h("div", {},
    fields.url.element,
    h("fieldset", { class: "field plain-fieldset" }, h("legend", {}, "Authentication"), h("div", { class: "segmented" }, authChoice("none", "None"), authChoice("bearer", "Bearer token"))),
    tokenField.element,
    fields.headers.element);
  const natsOnly = h("div", { "data-testid": "nats-settings" }, fields.subject.element, fields.serverUrl.element);
  const fileSection = h("section", { class: "card", "aria-labelledby": "files-title", "data-testid": "file-settings" },
    h("h2", { id: "files-title" }, "Files"),
    h("p", { class: "hint" }, "Each run writes one series of files per audience, with a manifest, on the server; download them from the destination's page."),
    h("div", { class: "grid-2" },
      h("div", { class: "field" }, h("label", { for: "file-format" }, "Format"), format),
      h("div", { class: "field" }, h("label", { for: "file-mode" }, "Each run writes"), mode)),
    h("div", { class: "field" }, h("label", { class: "inline-check" }, gzip, "Compress each file (gzip)")),
    h("div", { class: "field" }, h("label", { for: "file-frequency" }, "How often"), frequency),
    h("div", { class: "grid-2" }, fields.startDate.element, fields.startTime.element));
  const deliverySettings = h("details", { class: "card delivery-settings" },
    h("summary", {}, "Delivery settings"),
    h("div", { class: "grid-2" }, fields.retryPeriodSeconds.element, fields.maxBatchSize.element));
  const audiencesHint = h("p", { class: "hint" });
  const attributesHint = h("p", { class: "hint" });
  const pageTitle = h("h1", {}, "Create a webhook destination");
  const pageLead = h("p", { class: "lead" });
  const batchLabel = fields.maxBatchSize.element.querySelector("label")!;
  const showKind = () => {
    const k = kind();
    const file = k === "file";
    webhookOnly.hidden = k !== "webhook";
    natsOnly.hidden = k !== "nats";
    deliverySettings.hidden = file;
    fileSection.hidden = !file;
    batchLabel.textContent = k === "nats" ? "Most profiles per publish batch" : "Most profiles per request";
    pageTitle.textContent = file ? "Create a file export destination" : k === "nats" ? "Create a NATS JetStream destination" : "Create a webhook destination";
    audiencesHint.textContent = file
      ? "Each run writes their members (every member, or the changes since the previous run)."
      : "Their current members are sent first (status existing), then every change as it happens (realized, exited).";
    attributesHint.textContent = file
      ? "Each row carries only these attributes, read from the merged profile when the run writes it."
      : k === "nats"
        ? "Each message carries only these attributes, read from the merged profile when it is published."
        : "Each profile in a request carries only these attributes, read from the merged profile when it is sent.";
    pageLead.textContent = file
      ? `Write the members of audiences of sandbox ${ctx.session.sandboxName} to files on a schedule.`
      : k === "nats"
        ? `Publish the changes of audiences of sandbox ${ctx.session.sandboxName} to a NATS JetStream subject, for your own consumers.`
        : `Send audiences of sandbox ${ctx.session.sandboxName} to an HTTP endpoint as they change.`;
  };

  const form = h("form", { class: "destination-form", novalidate: true },
    h("section", { class: "card", "aria-labelledby": "endpoint-title" },
      h("h2", { id: "endpoint-title" }, "Destination"),
      h("fieldset", { class: "field plain-fieldset" }, h("legend", {}, "Kind"), h("div", { class: "segmented" }, kindChoice("webhook", "Webhook"), kindChoice("nats", "NATS subject"), kindChoice("file", "File export"))),
      fields.name.element,
      webhookOnly,
      natsOnly),
    fileSection,
    h("section", { class: "card", "aria-labelledby": "audiences-title" },
      h("h2", { id: "audiences-title" }, "Audiences"),
      audiencesHint,
      audiences.length === 0
        ? notice("empty", "This sandbox has no audiences.", "Create an audience first, then come back to send it.", h("a", { class: "button", href: "/audiences/new" }, "Create audience"))
        : h("fieldset", { class: "plain-fieldset", "aria-describedby": "audiences-error" }, h("legend", { class: "visually-hidden" }, "Audiences to send"), audienceList.element),
      audienceError),
    h("section", { class: "card", "aria-labelledby": "attributes-title" },
      h("h2", { id: "attributes-title" }, "Attributes and identities"),
      attributesHint,
      offeredAttributes(palette).length > 0
        ? h("fieldset", { class: "plain-fieldset" }, h("legend", {}, "Profile attributes found in this sandbox's data"), attributeList.element)
        : null,
      h("div", { class: "field" }, h("label", { for: "dest-attributes" }, "Other attribute paths (optional)"), otherAttributes, attributeError),
      h("fieldset", { class: "plain-fieldset" }, h("legend", {}, "Identity namespaces"),
        (palette?.identities.namespaces.length ?? 0) > 0 ? namespaceList.element : h("p", { class: "muted small" }, "No identity namespaces found in this sandbox's data."),
        h("p", { class: "hint" }, "None chosen: every namespace the profile has is sent."))),
    deliverySettings,
    status,
    h("div", { class: "form-actions" }, h("a", { class: "button-secondary", href: "/destinations" }, "Cancel"), submit));

  // A refusal stays until the form changes: then it describes a form no longer shown.
  form.addEventListener("input", () => {
    if (status.querySelector(".notice-error")) status.replaceChildren();
    // A message shown goes as soon as the form no longer earns it; new ones wait for the submit.
    const now = validateDraft(draft());
    for (const [k, f] of Object.entries(fields) as Array<[keyof typeof fields, ReturnType<typeof field>]>) {
      if (f.error.textContent !== "" && now[k] === undefined) {
        f.error.textContent = "";
        f.element.querySelector("input, textarea, select")?.setAttribute("aria-invalid", "false");
      }
    }
    if (audienceError.textContent !== "" && now.audiences === undefined) audienceError.textContent = "";
    if (attributeError.textContent !== "" && now.attributes === undefined) attributeError.textContent = "";
  });

  const draft = (): DestinationDraft => ({
    kind: kind(),
    file: { format: format.value === "csv" ? "csv" : "ndjson", gzip: gzip.checked, mode: mode.value === "FIRST_FULL_THEN_INCREMENTAL" ? "FIRST_FULL_THEN_INCREMENTAL" : "DAILY_FULL_EXPORT", frequency: frequency.value as FileFrequency, startDate: startDate.value, startTime: startTime.value },
    nats: { subject: subject.value, serverUrl: serverUrl.value },
    name: name.value,
    url: url.value,
    auth: (form.querySelector<HTMLInputElement>("input[name=auth]:checked")?.value ?? "none") as "none" | "bearer",
    token: token.value,
    headers: headers.value,
    audienceIds: audienceList.checked(),
    attributes: [...attributeList.checked(), ...otherAttributes.value.split(/[\s,]+/).filter((a) => a !== "")],
    namespaces: namespaceList.checked(),
    retryPeriodSeconds: Number(retry.value),
    maxBatchSize: Number(batch.value),
  });

  const showErrors = (errors: DraftErrors) => {
    for (const [k, f] of Object.entries(fields) as Array<[keyof typeof fields, ReturnType<typeof field>]>) {
      f.error.textContent = errors[k] ?? "";
      f.element.querySelector("input, textarea")?.setAttribute("aria-invalid", String(errors[k] !== undefined));
    }
    audienceError.textContent = errors.audiences ?? "";
    attributeError.textContent = errors.attributes ?? "";
    if (errors.retryPeriodSeconds !== undefined || errors.maxBatchSize !== undefined) form.querySelector("details")!.open = true;
  };

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const d = draft();
    const errors = validateDraft(d);
    showErrors(errors);
    if (Object.keys(errors).length > 0) {
      status.replaceChildren();
      form.querySelector<HTMLElement>("[aria-invalid=true], .hint-error:not(:empty)")?.closest(".field, section")?.querySelector<HTMLElement>("input, textarea")?.focus();
      return;
    }
    submit.disabled = true;
    status.replaceChildren(h("p", { class: "muted" }, "Creating…"));
    void create(ctx, d).then(
      (created) => {
        if (ctx.left()) return;
        ctx.announce(`Created ${d.name}`);
        showSecret(ctx, d.name, created.flowId, created.signingSecret, d.kind ?? "webhook");
      },
      (err: unknown) => {
        if (ctx.left()) return;
        submit.disabled = false;
        const details = detailsOf(err);
        status.replaceChildren(notice("error", "The destination was not created.", messageOf(err)));
        if (details.length > 0) status.append(h("ul", { class: "notice-list" }, ...details.map((x) => h("li", {}, x))));
        status.querySelector<HTMLElement>(".notice")?.setAttribute("tabindex", "-1");
        status.querySelector<HTMLElement>(".notice")?.focus();
      },
    );
  });

  ctx.main.replaceChildren(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "/destinations" }, "Destinations"), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, "New")),
    h("div", { class: "page-head" }, h("div", {}, pageTitle, pageLead)),
    form,
  );
  showKind();
  name.focus();
}

/** The three resources in order; a refusal deletes what was already made, then throws. */
async function create(ctx: PageContext, d: DestinationDraft): Promise<{ flowId: string; signingSecret: string | undefined }> {
  const api = ctx.api;
  const connection = await destinationsApi.createConnection(api, connectionBody(d));
  let target: { id: string } | undefined;
  try {
    target = await destinationsApi.createTarget(api, targetBody(d, connection.id));
    const flow = await destinationsApi.createFlow(api, flowBody(d, target.id));
    return { flowId: flow.id, signingSecret: flow.signingSecret };
  } catch (err) {
    // Best effort: the refusal is what the user needs to read, not a cleanup failure.
    if (target) await destinationsApi.deleteTarget(api, target.id).catch(() => {});
    await destinationsApi.deleteConnection(api, connection.id).catch(() => {});
    throw err instanceof ApiFailure ? err : new Error(messageOf(err));
  }
}

function showSecret(ctx: PageContext, name: string, flowId: string, secret: string | undefined, kind: DestinationKindDraft): void {
  ctx.title(`Created ${name}`);
  ctx.main.replaceChildren(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "/destinations" }, "Destinations"), h("span", { "aria-hidden": "true" }, " / "), h("span", { "aria-current": "page" }, name)),
    h("div", { class: "page-head" }, h("h1", {}, `Created “${name}”`)),
    secretCard(secret, kind === "file"
      ? "Its first export runs at its start (now, if no later date was given); the files appear on the destination's page."
      : kind === "nats"
        ? `Its current members are being published to stream ${natsStreamName(flowId)}; every change follows as it happens.`
        : "Its current members are on their way; every change follows as it happens."),
    h("div", { class: "form-actions form-actions-start" }, h("a", { class: "button", href: destinationPath(flowId) }, "Open the destination"), h("a", { class: "button-secondary", href: "/destinations" }, "All destinations")),
  );
  ctx.main.querySelector<HTMLElement>("[data-testid=signing-secret]")?.focus();
}

/** The signing secret, shown this once, with a copy button. */
export function secretCard(secret: string | undefined, lead: string): HTMLElement {
  if (secret === undefined) return notice("info", lead);
  const copied = h("span", { class: "muted small", "aria-live": "polite" });
  const copy = h("button", { type: "button", class: "button-secondary button-small" }, "Copy");
  copy.addEventListener("click", () => {
    navigator.clipboard.writeText(secret).then(() => (copied.textContent = "Copied."), () => (copied.textContent = "Copying is not allowed here: select the secret and copy it."));
  });
  return h("section", { class: "card secret-card", "aria-labelledby": "secret-title" },
    h("p", {}, lead),
    h("h2", { id: "secret-title" }, "Signing secret"),
    h("p", { class: "secret-row" }, h("code", { class: "secret", "data-testid": "signing-secret", tabindex: "0" }, secret), copy, copied),
    h("p", { class: "hint" }, "Copy it now: it is shown only this once. The endpoint verifies each request's webhook-signature header with it (Standard Webhooks, HMAC-SHA256 over webhook-id.webhook-timestamp.body); see docs/activation.md."));
}
