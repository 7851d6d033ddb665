/** The Destinations page's decisions that need no browser: the form's checks and bodies, routes, health and errors in words. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Flow, FlowRun } from "../src/api/destinations.js";
import type { BuilderPalette } from "../src/api/types.js";
import { offeredAttributes } from "../src/pages/destinations-create.js";
import {
  connectionBody, DEFAULT_BATCH_SIZE, DEFAULT_FILE, DEFAULT_RETRY_SECONDS, exportStatusWords, flowBody, formatLag, frequencyWords, formatPeriod, healthOf, lastErrors, natsStreamName, parseHeaders, runKind, runStatusWords, selectedOf, targetBody, validateDraft, type DestinationDraft, type FileDraft,
} from "../src/pages/destinations-model.js";
import { destinationPath, parseRoute } from "../src/router.js";

const draft = (over: Partial<DestinationDraft> = {}): DestinationDraft => ({
  name: "CRM", url: "https://crm.example.com/hook", auth: "none", token: "", headers: "", audienceIds: ["a1"], attributes: [], namespaces: [],
  retryPeriodSeconds: DEFAULT_RETRY_SECONDS, maxBatchSize: DEFAULT_BATCH_SIZE, ...over,
});

const stats = { sent: 3, failed: 0, retrying: 0, dead: 0, lagSeconds: 0, lastError: null };

describe("destination routes", () => {
  it("parses the list, the create form and a destination, and builds a destination's path", () => {
    assert.deepEqual(parseRoute("/destinations", ""), { page: "destinations" });
    assert.deepEqual(parseRoute("/destinations/new", ""), { page: "destinationNew" });
    assert.deepEqual(parseRoute("/destinations/f%2F1", ""), { page: "destination", id: "f/1" });
    assert.deepEqual(parseRoute("/destinations/a/b", ""), { page: "notFound", path: "/destinations/a/b" });
    assert.equal(destinationPath("f/1"), "/destinations/f%2F1");
  });
});

describe("custom headers typed as lines", () => {
  it("reads Name: value lines, skipping blank ones and keeping colons in values", () => {
    assert.deepEqual(parseHeaders("X-Tenant: acme\n\n  X-Url: http://a:1/b  \r\n"), { headers: { "X-Tenant": "acme", "X-Url": "http://a:1/b" } });
  });
  it("names the line of a header without a colon, a bad name, or a repeated one", () => {
    assert.equal(parseHeaders("X-A: 1\nnonsense").error, "Line 2: write a header as “Name: value”.");
    assert.equal(parseHeaders("X A: 1").error, "Line 1: “X A” is not a header name (letters, digits and - only, at most 64).");
    assert.equal(parseHeaders("X-A: 1\nx-a: 2").error, "Line 2: x-a is given twice.");
    assert.equal(parseHeaders(": v").error, "Line 1: write a header as “Name: value”.");
  });
  it("refuses more than 20, as the API does", () => {
    const lines = Array.from({ length: 21 }, (_, i) => `X-H${i}: v`).join("\n");
    assert.equal(parseHeaders(lines).error, "At most 20 custom headers.");
    assert.equal(parseHeaders(lines.split("\n").slice(0, 20).join("\n")).error, undefined);
  });
});

describe("the create form's checks", () => {
  it("accepts a complete draft", () => {
    assert.deepEqual(validateDraft(draft()), {});
  });
  it("says what is missing or wrong, per field", () => {
    assert.deepEqual(validateDraft(draft({ name: " ", url: "", audienceIds: [] })), {
      name: "Give the destination a name.", url: "Enter the endpoint's URL.", audiences: "Choose at least one audience to send.",
    });
    assert.equal(validateDraft(draft({ url: "ftp://x" })).url, "The URL must start with http:// or https://.");
    assert.equal(validateDraft(draft({ auth: "bearer", token: "" })).token, "Enter the bearer token, or choose no authentication.");
    assert.equal(validateDraft(draft({ attributes: ["person.name", "person..age"] })).attributes, "“person..age” is not an attribute path (e.g. person.name.firstName).");
    assert.equal(validateDraft(draft({ retryPeriodSeconds: 0 })).retryPeriodSeconds, "Between 1 and 604,800 seconds (7 days).");
    assert.equal(validateDraft(draft({ retryPeriodSeconds: 1.5 })).retryPeriodSeconds, "Between 1 and 604,800 seconds (7 days).");
    assert.equal(validateDraft(draft({ maxBatchSize: 1001 })).maxBatchSize, "Between 1 and 1,000 profiles.");
    assert.equal(validateDraft(draft({ headers: "bad" })).headers, "Line 1: write a header as “Name: value”.");
  });
});

describe("the three Flow Service bodies", () => {
  const d = draft({ auth: "bearer", token: " t0ken ", headers: "X-Tenant: acme", audienceIds: ["a1", "a2"], attributes: ["person.age", "person.age", "homeAddress.countryCode"], namespaces: ["Email"], retryPeriodSeconds: 5, maxBatchSize: 10 });
  it("a base connection with the bearer token (or None)", () => {
    assert.deepEqual(connectionBody(d), { name: "CRM (auth)", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a61", version: "1.0" }, auth: { specName: "Bearer Token", params: { token: "t0ken" } } });
    assert.deepEqual(connectionBody(draft()).auth, { specName: "None", params: {} });
  });
  it("a target connection with the URL and headers (none when empty)", () => {
    assert.deepEqual(targetBody(d, "c1"), {
      name: "CRM", baseConnectionId: "c1", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a61", version: "1.0" }, data: { format: "json" },
      params: { httpEndpoint: "https://crm.example.com/hook", headers: { "X-Tenant": "acme" } },
    });
    assert.deepEqual(targetBody(draft(), "c1").params, { httpEndpoint: "https://crm.example.com/hook" });
  });
  it("a flow selecting the audiences, each attribute once, the namespaces as identityMap paths, and the delivery settings", () => {
    const f = flowBody(d, "t1") as { targetConnectionIds: string[]; transformations: Flow["transformations"]; delivery: unknown };
    assert.deepEqual(f.targetConnectionIds, ["t1"]);
    assert.deepEqual(f.transformations[0]!.params.segmentSelectors.selectors, [{ type: "PLATFORM_SEGMENT", value: { id: "a1" } }, { type: "PLATFORM_SEGMENT", value: { id: "a2" } }]);
    assert.deepEqual(f.transformations[0]!.params.profileSelectors.selectors.map((s) => s.value.path), ["person.age", "homeAddress.countryCode", "identityMap.Email"]);
    assert.deepEqual(f.delivery, { maxBatchSize: 10, retryPeriodMs: 5000 });
    // What the server answers back, read apart again.
    assert.deepEqual(selectedOf(f), { audiences: [{ id: "a1" }, { id: "a2" }], attributes: ["person.age", "homeAddress.countryCode"], namespaces: ["Email"] });
  });
});

describe("a file export destination", () => {
  const file = (over: Partial<FileDraft> = {}, d: Partial<DestinationDraft> = {}) => draft({ kind: "file", url: "", file: { ...DEFAULT_FILE, ...over }, ...d });
  it("needs no endpoint, token or delivery settings; checks the first export's date and time", () => {
    assert.deepEqual(validateDraft(file({}, { retryPeriodSeconds: 0, headers: "bad" })), {});
    assert.deepEqual(validateDraft(file({ startDate: "2026-12-01", startTime: "06:30" })), {});
    assert.deepEqual(validateDraft(file({ startDate: "2026-02-30" })), { startDate: "A date as YYYY-MM-DD." });
    assert.deepEqual(validateDraft(file({ startDate: "2026-12-01", startTime: "24:00" })), { startTime: "A time as HH:mm (UTC)." });
    assert.deepEqual(validateDraft(file({ startTime: "06:00" })), { startDate: "Give the date of the first export, or leave the time empty to export now." });
    assert.deepEqual(validateDraft(file({}, { name: "", audienceIds: [] })), { name: "Give the destination a name.", audiences: "Choose at least one audience to send." });
  });
  it("the three bodies: the file spec without auth, the format, compression, mode and frequency, a schedule on every audience, no delivery settings", () => {
    const d = file({ format: "csv", gzip: true, mode: "FIRST_FULL_THEN_INCREMENTAL", frequency: "EVERY_6_HOURS", startDate: "2026-12-01", startTime: "" }, { audienceIds: ["a1", "a2"], attributes: ["person.age"] });
    assert.deepEqual(connectionBody(d), { name: "CRM (files)", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a63", version: "1.0" } });
    assert.deepEqual(targetBody(d, "c1"), { name: "CRM", baseConnectionId: "c1", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a63", version: "1.0" }, params: { format: "csv", compression: "GZIP", exportMode: "FIRST_FULL_THEN_INCREMENTAL", frequency: "EVERY_6_HOURS" } });
    const f = flowBody(d, "t1") as { transformations: Flow["transformations"]; delivery?: unknown };
    assert.deepEqual(f.transformations[0]!.params.segmentSelectors.selectors.map((x) => x.value), [{ id: "a1", schedule: { startDate: "2026-12-01", startTime: "00:00" } }, { id: "a2", schedule: { startDate: "2026-12-01", startTime: "00:00" } }]);
    assert.equal(f.delivery, undefined);
    assert.deepEqual((flowBody(file(), "t1") as { transformations: Flow["transformations"] }).transformations[0]!.params.segmentSelectors.selectors.map((x) => x.value), [{ id: "a1" }], "no date: exported from now");
  });
  it("says frequencies and run statuses in words", () => {
    assert.deepEqual(["DAILY", "EVERY_3_HOURS", "EVERY_12_HOURS", undefined].map(frequencyWords), ["Every day", "Every 3 hours", "Every 12 hours", "Every day"]);
    assert.deepEqual(["queued", "running", "success", "failed", "expired"].map(exportStatusWords), ["Queued", "Running", "Succeeded", "Failed", "Expired (files removed)"]);
  });
});

describe("a NATS JetStream destination", () => {
  const nats = (subject: string, serverUrl = "", d: Partial<DestinationDraft> = {}) => draft({ kind: "nats", url: "", nats: { subject, serverUrl }, ...d });
  it("needs a subject (and no endpoint, token or headers); checks it and the server as the API does", () => {
    assert.deepEqual(validateDraft(nats("crm.members", "", { headers: "bad", auth: "bearer" })), {});
    assert.deepEqual(validateDraft(nats("crm.members", "nats://10.0.0.5:4222")), {});
    assert.deepEqual(validateDraft(nats("crm.members", "tls://nats.internal")), {});
    assert.deepEqual(validateDraft(nats("  ")), { subject: "Enter the subject to publish to (e.g. crm.members)." });
    for (const bad of ["crm.*", "crm.>", "crm members", "crm..members", ".crm"]) {
      assert.deepEqual(validateDraft(nats(bad)), { subject: "Dot-separated tokens of letters, digits, _ and - (no wildcards or spaces)." }, bad);
    }
    assert.deepEqual(validateDraft(nats("x".repeat(201))), { subject: "At most 200 characters." });
    assert.deepEqual(validateDraft(nats("SegmentD.events")), { subject: "Subjects under “SegmentD.” are reserved (segmentd's own streams and NATS inboxes)." });
    assert.deepEqual(validateDraft(nats("_INBOX.x")), { subject: "Subjects under “_INBOX.” are reserved (segmentd's own streams and NATS inboxes)." });
    for (const bad of ["http://nats:4222", "nats://u:p@nats:4222", "nats://nats:4222/x", "nats://"]) {
      assert.deepEqual(validateDraft(nats("crm", bad)), { serverUrl: "A server as nats://host:port or tls://host:port, or empty for segmentd's own NATS." }, bad);
    }
    assert.deepEqual(validateDraft(nats("crm", "", { retryPeriodSeconds: 0, maxBatchSize: 1001 })), { retryPeriodSeconds: "Between 1 and 604,800 seconds (7 days).", maxBatchSize: "Between 1 and 1,000 profiles." });
  });
  it("the three bodies: the NATS spec without auth, the subject and server (none when empty), the delivery settings", () => {
    const d = nats(" crm.members ", " nats://10.0.0.5:4222 ", { retryPeriodSeconds: 60, maxBatchSize: 50 });
    assert.deepEqual(connectionBody(d), { name: "CRM (NATS)", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a62", version: "1.0" } });
    assert.deepEqual(targetBody(d, "c1"), { name: "CRM", baseConnectionId: "c1", connectionSpec: { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a62", version: "1.0" }, params: { subject: "crm.members", serverUrl: "nats://10.0.0.5:4222" } });
    assert.deepEqual((targetBody(nats("crm"), "c1") as { params: unknown }).params, { subject: "crm" });
    assert.deepEqual((flowBody(d, "t1") as { delivery?: unknown }).delivery, { maxBatchSize: 50, retryPeriodMs: 60_000 });
  });
  it("names the flow's stream as the server does", () => {
    assert.equal(natsStreamName("5b1f0e4c-9d2a-4c1b-8e0f-1a2b3c4d5e6f"), "SEGMENTD_FLOW_5b1f0e4c9d2a4c1b8e0f1a2b3c4d5e6f");
  });
});

describe("a dataflow's health in words", () => {
  it("paused wins over counters; dead letters over retries; no stats means no deliverer", () => {
    assert.deepEqual(healthOf({ state: "disabled", deliveryStats: { ...stats, dead: 2 } }), { kind: "paused", label: "Paused" });
    assert.deepEqual(healthOf({ state: "enabled", deliveryStats: { ...stats, dead: 1, retrying: 4 } }), { kind: "dead", label: "Dead letters" });
    assert.deepEqual(healthOf({ state: "enabled", deliveryStats: { ...stats, retrying: 4 } }), { kind: "retrying", label: "Retrying" });
    assert.deepEqual(healthOf({ state: "enabled", deliveryStats: { ...stats, failed: 9, lastError: { at: "2026-01-01T00:00:00Z", message: "x" } } }), { kind: "healthy", label: "Healthy" });
    assert.deepEqual(healthOf({ state: "enabled" }), { kind: "unknown", label: "Not delivering here" });
  });
  it("writes lag and periods in their largest units", () => {
    assert.deepEqual([0, -1, Number.NaN, 0.04, 1.26, 12.4, 60, 245, 3600, 7860].map(formatLag), ["0 s", "0 s", "0 s", "0 s", "1.3 s", "12 s", "1 min", "4 min 5 s", "1 h", "2 h 11 min"]);
    assert.deepEqual([86_400_000, 5000, 5_400_000, 7_200_000, 1500].map(formatPeriod), ["1 day", "5 seconds", "90 minutes", "2 hours", "1,500 milliseconds"]);
  });
  it("merges the last error with the runs' errors: one entry per message with its count and latest time, newest first", () => {
    const run = (errors: FlowRun["statusSummary"]["errors"], kind = "stream"): FlowRun => ({
      id: "r", flowId: "f", createdAt: 0, updatedAt: 0, metrics: { recordSummary: { inputRecordCount: 0, outputRecordCount: 0, failedRecordCount: 0 }, segmentd: { kind, failedAttempts: 0 } },
      statusSummary: { status: "success", ...(errors ? { errors } : {}) },
    });
    const e500 = (at: string) => ({ code: "SEGMENTD-DELIVERY-HTTP-500", message: "Receiver answered HTTP 500", at });
    const list = lastErrors({ ...stats, lastError: { at: "2026-01-01T10:00:05Z", message: "Receiver answered HTTP 500" } }, [
      run([e500("2026-01-01T10:00:05Z"), e500("2026-01-01T10:00:03Z"), { code: "SEGMENTD-DELIVERY-ERROR", message: "connect ECONNREFUSED", at: "2026-01-01T10:00:01Z" }]),
      run([{ code: "SEGMENTD-DELIVERY-HTTP-404", message: "Receiver answered HTTP 404", at: "2026-01-01T10:00:02Z" }, e500("2026-01-01T09:00:00Z")]),
    ]);
    assert.deepEqual(list, [
      { at: "2026-01-01T10:00:05Z", message: "Receiver answered HTTP 500", count: 3 },
      { at: "2026-01-01T10:00:02Z", message: "Receiver answered HTTP 404", count: 1 },
      { at: "2026-01-01T10:00:01Z", message: "connect ECONNREFUSED", count: 1 },
    ]);
    // A last error the (cut) runs list does not hold still shows.
    assert.deepEqual(lastErrors({ ...stats, lastError: { at: "2026-01-02T00:00:00Z", message: "timeout" } }, []), [{ at: "2026-01-02T00:00:00Z", message: "timeout", count: 1 }]);
    assert.equal(lastErrors(undefined, [run(undefined)]).length, 0);
    assert.equal(lastErrors(undefined, [run(Array.from({ length: 15 }, (_, i) => ({ code: "c", message: `e${i}`, at: new Date(i * 1000).toISOString() })))]).length, 10);
    assert.equal(runKind(run(undefined, "resend")), "Activate now");
    assert.equal(runKind({ ...run(undefined, "resend"), activities: [{ name: "Streaming delivery" }] }), "Streaming delivery");
    assert.deepEqual(["success", "partialSuccess", "inProgress", "weird"].map(runStatusWords), ["Succeeded", "Partly failed", "In progress", "weird"]);
  });
});

describe("attributes offered from the sandbox's data", () => {
  it("offers leaves of the profile, not identities, memberships or objects, sorted", () => {
    const field = (path: string, type: "string" | "object" | "integer") => ({ path, type, count: 1, examples: [] });
    const palette = { profile: { fields: [field("person.name", "object"), field("person.name.firstName", "string"), field("identityMap.email", "string"), field("segmentMembership.ups", "object"), field("person.age", "integer")] } } as unknown as BuilderPalette;
    assert.deepEqual(offeredAttributes(palette), ["person.age", "person.name.firstName"]);
    assert.deepEqual(offeredAttributes(undefined), []);
  });
});
