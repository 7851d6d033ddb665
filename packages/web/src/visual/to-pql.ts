/**
 * rulesToPql: a model as canonical PQL text (the pql package's `format`).
 * The model is validated first, and the text is read back and compared with
 * the tree it was written from, so what the builder shows is what runs.
 */
import { astEqual, format, parse } from "@segmentd/pql";
import { ModelError, queryOf } from "./build.js";
import type { VisualModel } from "./model.js";
import { validateModel } from "./validate.js";

/**
 * Canonical PQL of the model; "" for an empty model. Throws ModelError (with
 * the offending rule's id) for a model validateModel finds problems in.
 */
export function rulesToPql(model: VisualModel): string {
  const problems = validateModel(model);
  if (problems.length > 0) throw new ModelError(problems[0]!.message, problems[0]!.ruleId);
  const query = queryOf(model);
  if (!query) return "";
  const text = format(query);
  if (!astEqual(parse(text), query)) throw new ModelError("The rules do not read back as written");
  return text;
}

export type RulesToPqlResult = { ok: true; pql: string } | { ok: false; message: string; ruleId?: string };

/** rulesToPql for a UI: never throws. */
export function tryRulesToPql(model: VisualModel): RulesToPqlResult {
  try {
    return { ok: true, pql: rulesToPql(model) };
  } catch (e) {
    const ruleId = e instanceof ModelError ? e.ruleId : undefined;
    return ruleId === undefined ? { ok: false, message: (e as Error).message } : { ok: false, message: (e as Error).message, ruleId };
  }
}
