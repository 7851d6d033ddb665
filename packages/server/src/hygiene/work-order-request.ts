/**
 * Parses and validates a work-order request body (hygiene-api.md §4.1) into a
 * normalized request. Only shape rules live here; the dataset and quota checks
 * need stores and run afterwards (validation order of §4.8). Every failure is
 * a 400 before anything is stored or consumed.
 */
import type { Identity, JsonValue } from "../profiles/types.js";
import { invalid } from "./errors.js";
import { findViolation, LIMIT_CODES, RECORD_LIMITS } from "../platform/limits.js";
import type { FieldChanges, WorkOrderAction } from "./records.js";

export const ALL_DATASETS = "ALL";
export const TARGET_SERVICES = ["datalake", "identity", "profile", "ajo"] as const;

/** The literal messages Adobe returns (hygiene-api.md §4.1). */
export const MSG_BOTH_IDENTITY_FORMS = "Identities and NamespacesIdentities are not allowed at the same time";
export const MSG_NO_IDENTITIES = "Identities are Empty for Delete Identity request.";

const ACTIONS: Readonly<Record<string, WorkOrderAction>> = {
  delete_identity: "identity-delete",
  "delete-identity": "identity-delete",
  "identity-delete": "identity-delete",
  update_identity: "identity-update",
  "update-identity": "identity-update",
  "identity-update": "identity-update",
};

export interface WorkOrderRequest {
  action: WorkOrderAction;
  /** As submitted (echoed in responses). */
  datasetId: string;
  /** Parsed: "ALL" or the listed ids. */
  datasets: "ALL" | string[];
  displayName: string;
  description: string;
  /** Distinct identities, namespace codes lower-cased as the profile store keeps them. */
  identities: Identity[];
  targetServices: string[];
  fieldChanges: FieldChanges | null;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function optionalString(body: Obj, key: string, max: number): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(`'${key}' must be a string.`);
  if (v.length > max) throw invalid(`'${key}' must be at most ${max} characters long.`);
  return v;
}

function namespaceCode(ns: unknown, where: string): string {
  if (!isObj(ns)) throw invalid(`${where}: 'namespace' must be an object with a 'code'.`);
  const code = ns.code;
  if (typeof code !== "string" || code.trim() === "") throw invalid(`${where}: 'namespace.code' must be a non-empty string.`);
  return code.trim().toLowerCase();
}

function identityValue(v: unknown, where: string): string {
  if (typeof v !== "string" || v.trim() === "") throw invalid(`${where}: the identity value must be a non-empty string.`);
  if (v.length > 1024) throw invalid(`${where}: the identity value must be at most 1024 characters long.`);
  return v;
}

/** Counts the raw entries first, so an oversized order is refused before any per-identity work. */
function rawCount(identities: unknown[] | undefined, namespaced: unknown[] | undefined): number {
  if (identities) return identities.length;
  let n = 0;
  for (const g of namespaced ?? []) {
    if (isObj(g)) {
      const ids = g.ids ?? g.IDs;
      if (Array.isArray(ids)) n += ids.length;
    }
  }
  return n;
}

function parseIdentities(body: Obj, maxIdentities: number): Identity[] {
  const hasLegacy = body.identities !== undefined && body.identities !== null;
  const hasNs = body.namespacesIdentities !== undefined && body.namespacesIdentities !== null;
  if (hasLegacy && hasNs) throw invalid(MSG_BOTH_IDENTITY_FORMS);
  const list = hasLegacy ? body.identities : body.namespacesIdentities;
  if (!hasLegacy && !hasNs) throw invalid(MSG_NO_IDENTITIES);
  if (!Array.isArray(list)) throw invalid(`'${hasLegacy ? "identities" : "namespacesIdentities"}' must be an array.`);
  if (list.length === 0) throw invalid(MSG_NO_IDENTITIES);
  const count = rawCount(hasLegacy ? list : undefined, hasNs ? list : undefined);
  if (count > maxIdentities) throw invalid(`A work order may contain at most ${maxIdentities} identities; this one has ${count}.`);

  const out: Identity[] = [];
  const seen = new Set<string>();
  const push = (namespace: string, id: string) => {
    const k = `${namespace}\u0000${id}`;
    if (seen.has(k)) return;
    seen.add(k);
    out.push({ namespace, id });
  };
  if (hasLegacy) {
    list.forEach((e: unknown, i) => {
      const where = `identities[${i}]`;
      if (!isObj(e)) throw invalid(`${where}: each identity must be an object with 'namespace' and 'id'.`);
      push(namespaceCode(e.namespace, where), identityValue(e.id, where));
    });
  } else {
    list.forEach((g: unknown, i) => {
      const where = `namespacesIdentities[${i}]`;
      if (!isObj(g)) throw invalid(`${where}: each entry must be an object with 'namespace' and 'ids'.`);
      const ns = namespaceCode(g.namespace, where);
      const ids = g.ids ?? g.IDs;
      if (!Array.isArray(ids) || ids.length === 0) throw invalid(`${where}: 'ids' must be a non-empty array of strings.`);
      ids.forEach((v: unknown, j) => push(ns, identityValue(v, `${where}.ids[${j}]`)));
    });
  }
  return out;
}

function parseDatasets(raw: unknown, action: WorkOrderAction): { datasetId: string; datasets: "ALL" | string[] } {
  if (typeof raw !== "string" || raw.trim() === "") throw invalid("'datasetId' is required: a dataset id, a comma-separated list of dataset ids, or ALL.");
  const datasetId = raw.trim();
  if (datasetId === ALL_DATASETS) {
    if (action === "identity-update") throw invalid("A record update work order applies to exactly one dataset; 'ALL' is not allowed.");
    return { datasetId, datasets: ALL_DATASETS };
  }
  const ids = datasetId.split(",").map((s) => s.trim());
  if (ids.some((s) => s === "")) throw invalid("'datasetId' contains an empty dataset id.");
  if (ids.includes(ALL_DATASETS)) throw invalid("'ALL' cannot be combined with dataset ids.");
  if (new Set(ids).size !== ids.length) throw invalid("'datasetId' lists the same dataset more than once.");
  if (action === "identity-update" && ids.length > 1) throw invalid("A record update work order applies to exactly one dataset.");
  return { datasetId, datasets: ids };
}

function parseTargetServices(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [...TARGET_SERVICES];
  if (!Array.isArray(raw) || raw.length === 0 || !raw.every((s) => typeof s === "string")) {
    throw invalid(`'targetServices' must be a non-empty array of: ${TARGET_SERVICES.join(", ")}.`);
  }
  const bad = raw.find((s) => !(TARGET_SERVICES as readonly string[]).includes(s));
  if (bad !== undefined) throw invalid(`Unknown target service '${bad}'. Allowed: ${TARGET_SERVICES.join(", ")}.`);
  return [...new Set(raw as string[])];
}

/** Paths that would change who a record belongs to are refused: an update must not re-key records. */
function checkPath(path: string, where: string): void {
  if (path.trim() === "" || path.split(".").some((s) => s === "")) throw invalid(`${where}: '${path}' is not a dotted field path.`);
  const head = path.split(".")[0]!;
  if (head === "identityMap" || head === "_id") throw invalid(`${where}: '${path}' cannot be changed by a record update.`);
}

function parseFieldChanges(raw: unknown): FieldChanges {
  if (!isObj(raw)) throw invalid("'fieldUpdates' is required for update_identity: an object with 'set' and/or 'remove'.");
  const set = raw.set ?? {};
  const remove = raw.remove ?? [];
  if (!isObj(set)) throw invalid("'fieldUpdates.set' must be an object mapping field paths to values.");
  if (!Array.isArray(remove) || !remove.every((p) => typeof p === "string")) throw invalid("'fieldUpdates.remove' must be an array of field paths.");
  const setPaths = Object.keys(set);
  if (setPaths.length === 0 && remove.length === 0) throw invalid("'fieldUpdates' must set or remove at least one field.");
  for (const p of setPaths) {
    checkPath(p, "fieldUpdates.set");
    // The value lands inside stored records at its path: it is held to a record's limits there,
    // now, before the order is accepted and its quota consumed.
    const room = RECORD_LIMITS.maxDepth - p.split(".").length;
    const bad = room < 1 ? { code: LIMIT_CODES.depth, message: "" } : findViolation(set[p], { ...RECORD_LIMITS, maxDepth: room });
    if (bad === null) continue;
    const where = `fieldUpdates.set['${p.slice(0, 256)}']`;
    if (bad.code === LIMIT_CODES.depth) throw invalid(`${where}: the value, at its path, nests deeper than a record's limit of ${RECORD_LIMITS.maxDepth} levels`);
    throw invalid(`${where}: ${bad.message.replace(" at $", " at value")}`);
  }
  for (const p of remove as string[]) checkPath(p, "fieldUpdates.remove");
  return { set: set as Record<string, JsonValue>, remove: remove as string[] };
}

export function parseWorkOrderRequest(body: unknown, maxIdentities: number): WorkOrderRequest {
  if (!isObj(body)) throw invalid("The request body must be a JSON object.");
  const rawAction = body.action;
  const action = typeof rawAction === "string" && Object.hasOwn(ACTIONS, rawAction) ? ACTIONS[rawAction]! : undefined;
  if (action === undefined) {
    throw invalid(`Unsupported action ${JSON.stringify(rawAction ?? null)}. Allowed: delete_identity, update_identity.`);
  }
  const identities = parseIdentities(body, maxIdentities);
  const { datasetId, datasets } = parseDatasets(body.datasetId, action);
  const displayName = optionalString(body, "displayName", 255) ?? optionalString(body, "name", 255) ?? "";
  const description = optionalString(body, "description", 1000) ?? "";
  const targetServices = parseTargetServices(body.targetServices);
  const fieldChanges = action === "identity-update" ? parseFieldChanges(body.fieldUpdates) : null;
  return { action, datasetId, datasets, displayName, description, identities, targetServices, fieldChanges };
}
