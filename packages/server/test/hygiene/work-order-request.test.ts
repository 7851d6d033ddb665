// Parsing of work-order bodies: both identity formats (and both spellings of
// the id list), action spellings, dataset lists, duplicates, target services.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HygieneError } from "../../src/hygiene/errors.js";
import { MSG_BOTH_IDENTITY_FORMS, MSG_NO_IDENTITIES, parseWorkOrderRequest } from "../../src/hygiene/work-order-request.js";

const ids = (...v: string[]) => v.map((id) => ({ namespace: { code: "Email" }, id }));

function rejects(body: unknown, message: string, max = 100) {
  assert.throws(() => parseWorkOrderRequest(body, max), (e: unknown) => e instanceof HygieneError && e.status === 400 && e.code === "400001" && e.message === message);
}

describe("work-order request parsing", () => {
  it("normalizes both identity formats to distinct (lower-cased namespace, id) pairs", () => {
    const legacy = parseWorkOrderRequest({ action: "delete_identity", datasetId: "ALL", identities: [...ids("a@x.com", "a@x.com"), { namespace: { code: "ECID" }, id: "a@x.com" }] }, 100);
    assert.deepEqual(legacy.identities, [{ namespace: "email", id: "a@x.com" }, { namespace: "ecid", id: "a@x.com" }]);
    for (const key of ["ids", "IDs"]) {
      const r = parseWorkOrderRequest({ action: "delete_identity", datasetId: "ALL", namespacesIdentities: [{ namespace: { code: "email" }, [key]: ["b@x.com", "c@x.com", "b@x.com"] }] }, 100);
      assert.deepEqual(r.identities, [{ namespace: "email", id: "b@x.com" }, { namespace: "email", id: "c@x.com" }]);
    }
  });

  it("accepts the documented action spellings and answers with Adobe's response names", () => {
    for (const a of ["delete_identity", "delete-identity", "identity-delete"]) assert.equal(parseWorkOrderRequest({ action: a, datasetId: "ALL", identities: ids("a") }, 10).action, "identity-delete");
    assert.equal(parseWorkOrderRequest({ action: "update_identity", datasetId: "d", identities: ids("a"), fieldUpdates: { set: { x: 1 } } }, 10).action, "identity-update");
  });

  it("splits dataset lists and defaults targetServices to the full set", () => {
    const r = parseWorkOrderRequest({ action: "delete_identity", datasetId: "d1, d2", identities: ids("a") }, 10);
    assert.deepEqual(r.datasets, ["d1", "d2"]);
    assert.deepEqual(r.targetServices, ["datalake", "identity", "profile", "ajo"]);
    assert.deepEqual(parseWorkOrderRequest({ action: "delete_identity", datasetId: "ALL", identities: ids("a"), targetServices: ["profile", "identity", "ajo"] }, 10).targetServices, ["profile", "identity", "ajo"]);
  });

  it("refuses bad bodies with exact messages", () => {
    rejects({ action: "delete_identity", datasetId: "ALL", identities: ids("a"), namespacesIdentities: [] }, MSG_BOTH_IDENTITY_FORMS);
    rejects({ action: "delete_identity", datasetId: "ALL", identities: [] }, MSG_NO_IDENTITIES);
    rejects({ action: "delete_identity", datasetId: "ALL", namespacesIdentities: [{ namespace: { code: "email" }, ids: [] }] }, "namespacesIdentities[0]: 'ids' must be a non-empty array of strings.");
    rejects({ action: "delete_identity", datasetId: "ALL", namespacesIdentities: [{ namespace: { code: "email" }, ids: ["a", "b", "c"] }] }, "A work order may contain at most 2 identities; this one has 3.", 2);
    rejects({ action: "delete_identity", datasetId: "ALL", identities: [{ namespace: { code: "email" }, id: 5 }] }, "identities[0]: the identity value must be a non-empty string.");
    rejects({ action: "delete_identity", datasetId: "d1,d1", identities: ids("a") }, "'datasetId' lists the same dataset more than once.");
    rejects({ action: "delete_identity", datasetId: "d1,", identities: ids("a") }, "'datasetId' contains an empty dataset id.");
    rejects({ action: "delete_identity", datasetId: "ALL", identities: ids("a"), targetServices: ["lake"] }, "Unknown target service 'lake'. Allowed: datalake, identity, profile, ajo.");
    rejects({ action: "delete_identity", datasetId: "ALL", identities: ids("a"), displayName: 3 }, "'displayName' must be a string.");
    rejects([], "The request body must be a JSON object.");
  });
});
