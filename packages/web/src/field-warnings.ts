/**
 * Warnings for profile fields the sandbox's data does not have: a misspelled
 * field (`person.agee > 30`) is valid PQL that matches nobody, so without a
 * word it estimates "≈ 0 profiles". The palette's sampled profile fields
 * become a schema for the PQL package's `check`, whose unknown-field
 * diagnostics turn into warnings naming the closest known field. Only
 * profile fields are checked (event fields vary by event type), and a
 * top-level name with nothing close to it (identityMap, segmentMembership…)
 * is left alone: the sample lists attributes, not every part of a profile.
 * Pure (no DOM), unit-tested.
 */
import { check, type Diagnostic, type XdmFieldType } from "@segmentd/pql";
import type { BuilderField, BuilderPalette } from "./api/types.js";

const TYPES: Readonly<Record<string, XdmFieldType>> = {
  string: "string", integer: "integer", number: "number", boolean: "boolean", date: "date", "date-time": "date-time", array: "array", object: "object",
};

/** The sampled profile fields as a check schema (parents included); undefined when nothing was sampled. */
export function schemaOfPalette(palette: Pick<BuilderPalette, "profile">): Record<string, XdmFieldType> | undefined {
  const fields: BuilderField[] = palette.profile.fields;
  if (palette.profile.sampled === 0 || fields.length === 0) return undefined;
  const schema: Record<string, XdmFieldType> = {};
  for (const f of fields) {
    const parts = f.path.split(".");
    for (let i = 1; i < parts.length; i++) schema[parts.slice(0, i).join(".")] ??= "object";
    schema[f.path] = TYPES[f.type] ?? "object";
  }
  return schema;
}

const UNKNOWN = /^Unknown field '([^']+)' in (?:the profile|'([^']+)')(?:; did you mean '([^']+)'\?)?$/;

/** Warnings for the expression's profile fields that no sampled profile has. Nothing while the text has errors. */
export function unknownFieldWarnings(text: string, schema: Record<string, XdmFieldType> | undefined): Diagnostic[] {
  if (!schema || text.trim() === "") return [];
  const out: Diagnostic[] = [];
  for (const d of check(text, { schema })) {
    if (d.code !== "PQL_UNKNOWN_FIELD") continue;
    const m = UNKNOWN.exec(d.message);
    if (!m) continue;
    const [, name, parent, guess] = m;
    const path = parent === undefined ? name! : `${parent}.${name!}`;
    const near = guess === undefined ? undefined : parent === undefined ? guess : `${parent}.${guess}`;
    if (near === undefined && parent === undefined) continue;
    out.push({
      ...d,
      severity: "warning",
      message: near !== undefined
        ? `No sampled profile has the field ${path}, so it matches nobody. Did you mean ${near}?`
        : `No sampled profile has the field ${path}, so it matches nobody. Check its name in the Visual tab's palette.`,
    });
  }
  return out;
}
