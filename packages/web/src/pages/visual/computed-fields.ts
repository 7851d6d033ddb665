/**
 * Computed attributes in the palette: each live one (NEW, PROCESSING, PROCESSED — the ones a
 * definition may read) as a profile field at `_<TENANT_ID>.ComputedAttributes.<name>`, typed by
 * its function so that its rule gets the right operators. A MOST_RECENT value is an object
 * {timestamp, value}: the palette offers its `.value`. Pure, so it is tested without a browser.
 */
import type { BuilderField, BuilderFieldType, BuilderPalette, ComputedAttribute } from "../../api/types.js";

export const LIVE_COMPUTED_STATUSES = ["NEW", "PROCESSING", "PROCESSED"];

export interface ComputedField {
  attribute: ComputedAttribute;
  field: BuilderField;
}

const UNIT_WORDS: Record<string, [string, string]> = { HOURS: ["hour", "hours"], DAYS: ["day", "days"], WEEKS: ["week", "weeks"], MONTHS: ["month", "months"] };

/** "SUM, 12 hours": the function and the lookback. */
export function computedMeta(a: ComputedAttribute): string {
  const [one, many] = UNIT_WORDS[a.duration.unit] ?? [a.duration.unit.toLowerCase(), a.duration.unit.toLowerCase()];
  return `${a.mergeFunction.value}, ${a.duration.count} ${a.duration.count === 1 ? one : many}`;
}

function fieldOf(a: ComputedAttribute): BuilderField {
  const base = `${a.positionPath.join(".")}.${a.name}`;
  const xdm = a.returnSchema["meta:xdmType"];
  let type: BuilderFieldType;
  let items: BuilderFieldType | undefined;
  let path = base;
  switch (a.mergeFunction.value) {
    case "COUNT":
      type = "integer";
      break;
    case "MOST_RECENT":
      path = `${base}.value`;
      type = "string";
      break;
    case "LIST":
      type = "array";
      items = "string";
      break;
    default:
      type = xdm === "date-time" ? "date-time" : "number";
  }
  return { path, type, ...(items === undefined ? {} : { items }), count: 0, examples: [] };
}

/** The live attributes as fields, by display name. */
export function computedFields(attributes: readonly ComputedAttribute[]): ComputedField[] {
  return attributes
    .filter((a) => LIVE_COMPUTED_STATUSES.includes(a.status))
    .map((a) => ({ attribute: a, field: fieldOf(a) }))
    .sort((x, y) => x.attribute.displayName.localeCompare(y.attribute.displayName) || x.attribute.name.localeCompare(y.attribute.name));
}

/** The palette with the computed fields among the profile's (rule editors look fields up there for their types). */
export function withComputedFields(palette: BuilderPalette, fields: readonly ComputedField[]): BuilderPalette {
  const known = new Set(palette.profile.fields.map((f) => f.path));
  const extra = fields.map((c) => c.field).filter((f) => !known.has(f.path));
  return extra.length === 0 ? palette : { ...palette, profile: { ...palette.profile, fields: [...palette.profile.fields, ...extra] } };
}

/** Whether a profile field is a computed attribute's (listed in its own section, not among the sampled attributes). */
export function isComputedPath(path: string): boolean {
  return /^_?[^.]+\.(System)?ComputedAttributes\./.test(path);
}
