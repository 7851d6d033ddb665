/**
 * Computed attributes in the builder's palette, without a browser: only live ones are listed,
 * each typed by its function (so its rule starts with the right operator), MOST_RECENT by its
 * `.value`; an item added to the canvas writes the path a definition reads, and that PQL comes
 * back as the same rule.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { BuilderPalette, ComputedAttribute } from "../src/api/types.js";
import { computedFields, computedMeta, isComputedPath, withComputedFields } from "../src/pages/visual/computed-fields.js";
import { addItem } from "../src/pages/visual/palette-items.js";
import { emptyModel, pqlToRules, rulesToPql } from "../src/visual/index.js";

const T = "_acme";

function ca(name: string, fn: string, status = "PROCESSED", extra: Partial<ComputedAttribute> = {}): ComputedAttribute {
  return {
    id: `id-${name}`,
    name,
    displayName: name.toUpperCase(),
    status,
    positionPath: [T, "ComputedAttributes"],
    mergeFunction: { value: fn },
    returnSchema: { "meta:xdmType": fn === "COUNT" ? "integer" : fn === "LIST" ? "array" : fn === "MOST_RECENT" ? "object" : "number" },
    duration: { count: 12, unit: "HOURS" },
    ...extra,
  } as ComputedAttribute;
}

const PALETTE = {
  computedAt: "2026-03-01T00:00:00.000Z",
  profile: { sampled: 1, fields: [{ path: "person.age", type: "integer", count: 1, examples: [30] }] },
  events: { sampled: 0, eventTypes: [], fields: [] },
  identities: { namespaces: [], descriptors: [] },
} as unknown as BuilderPalette;

describe("computed attributes in the palette", () => {
  it("lists live attributes only, typed by function, by display name", () => {
    const fields = computedFields([
      ca("spend", "SUM"),
      ca("visits", "COUNT", "NEW"),
      ca("lastPage", "MOST_RECENT", "PROCESSING"),
      ca("orders", "LIST"),
      ca("firstSeen", "MIN", "PROCESSED", { returnSchema: { "meta:xdmType": "date-time" } }),
      ca("old", "SUM", "DISABLED"),
      ca("draft", "SUM", "DRAFT"),
      ca("broken", "SUM", "FAILED"),
    ]);
    assert.deepEqual(fields.map((f) => [f.field.path, f.field.type, f.field.items ?? null]), [
      [`${T}.ComputedAttributes.firstSeen`, "date-time", null],
      [`${T}.ComputedAttributes.lastPage.value`, "string", null],
      [`${T}.ComputedAttributes.orders`, "array", "string"],
      [`${T}.ComputedAttributes.spend`, "number", null],
      [`${T}.ComputedAttributes.visits`, "integer", null],
    ]);
    assert.equal(computedMeta(ca("spend", "SUM")), "SUM, 12 hours");
    assert.equal(computedMeta(ca("w", "COUNT", "NEW", { duration: { count: 1, unit: "WEEKS" } })), "COUNT, 1 week");
  });

  it("the palette's profile fields gain them (rule editors read types there); the sampled list leaves them out", () => {
    const fields = computedFields([ca("spend", "SUM")]);
    const p = withComputedFields(PALETTE, fields);
    assert.deepEqual(p.profile.fields.map((f) => f.path), ["person.age", `${T}.ComputedAttributes.spend`]);
    assert.equal(withComputedFields(p, fields), p, "added once");
    assert.equal(isComputedPath(`${T}.ComputedAttributes.spend`), true);
    assert.equal(isComputedPath(`acme.SystemComputedAttributes.x`), true);
    assert.equal(isComputedPath("person.age"), false);
    assert.equal(isComputedPath("commerce.ComputedAttributesX.y"), false);
  });

  it("an added item writes the path a definition reads, and the PQL reads back as the same rule", () => {
    const [spend] = computedFields([ca("spend", "SUM")]);
    const m = emptyModel();
    const added = addItem(m, { kind: "attribute", field: spend!.field }, m.root.id, undefined, []);
    assert.ok(added);
    const rule = added.rule;
    assert.equal(rule.kind, "condition");
    // A number field: its rule starts as "equals" a number, as person.age's does.
    assert.equal(rule.kind === "condition" ? rule.operator : "", "equals");
    const withValue = { ...added.model, root: { ...added.model.root, children: [{ ...rule, operator: "greaterThan", operands: [{ kind: "integer", value: 100 }] }] } } as typeof m;
    const text = rulesToPql(withValue);
    assert.equal(text, `${T}.ComputedAttributes.spend > 100`);
    const back = pqlToRules(text);
    assert.ok(back.ok);
    assert.equal(rulesToPql(back.model), text);
  });
});
