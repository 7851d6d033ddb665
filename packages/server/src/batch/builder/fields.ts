/**
 * The audience builder's palette (issue #29): the profile attributes and event types, with their
 * fields, that exist in a sandbox — read from a sample of the stored data (the first profiles in
 * the store's order, their events), since segmentd's Schema Registry keeps field groups by
 * reference and defines no fields of its own; its identity descriptors name the identity fields.
 * Each field has its path, its type as PQL reads it (a date is a string PQL's `occurs` parses), how
 * many sampled records hold it and a few example values. Cached per sandbox for a minute: the
 * builder asks on every open.
 */
import type { Clock } from "../../platform/clock.js";
import type { ProfileReads } from "../../profiles/store.js";
import { NO_MERGE_POLICY } from "../../profiles/types.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";

export const FIELDS_SAMPLE_PROFILES = 1_000;
export const FIELDS_SAMPLE_EVENTS = 20_000;
export const FIELDS_CACHE_MS = 60_000;
const MAX_FIELDS = 500;
const MAX_EVENT_TYPES = 200;
const MAX_DEPTH = 8;
const EXAMPLES = 5;
const EXAMPLE_CHARS = 64;
/** Read by dedicated rules (identities, audience membership) or not data at all. */
const SKIPPED = new Set(["identityMap", "segmentMembership", "_id", "xdmMeta", "_repo"]);
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;

export type FieldType = "string" | "number" | "integer" | "boolean" | "date" | "date-time" | "array" | "object";

export interface FieldInfo {
  path: string;
  type: FieldType;
  /** For arrays: the type of their items (the most common one). */
  items?: FieldType;
  /** Sampled records holding the field. */
  count: number;
  examples: (string | number | boolean)[];
}

export interface EventTypeInfo {
  eventType: string;
  count: number;
  fields: FieldInfo[];
}

export interface Palette {
  computedAt: string;
  profile: { sampled: number; fields: FieldInfo[] };
  events: { sampled: number; eventTypes: EventTypeInfo[]; fields: FieldInfo[] };
  /** Identity namespaces seen in the sample, and the fields identity descriptors mark. */
  identities: { namespaces: string[]; descriptors: { path: string; namespace: string; primary: boolean }[] };
}

/** The identity descriptors of a sandbox's schemas (the Schema Registry's, in Adobe's shape). */
export type DescriptorsOf = (ctx: TenantContext) => Promise<Record<string, unknown>[]>;

/** Field statistics while sampling: types seen and distinct example values. */
class FieldTally {
  private readonly fields = new Map<string, { types: Map<FieldType, number>; items: Map<FieldType, number>; count: number; examples: Set<string | number | boolean> }>();

  add(record: Record<string, unknown>): void {
    this.walk(record, "", 0);
  }

  private walk(o: Record<string, unknown>, prefix: string, depth: number): void {
    for (const [k, v] of Object.entries(o)) {
      if (depth === 0 && SKIPPED.has(k)) continue;
      if (v === null || v === undefined) continue;
      const path = prefix === "" ? k : `${prefix}.${k}`;
      const type = typeOf(v);
      if (type === "object") {
        if (depth + 1 < MAX_DEPTH) this.walk(v as Record<string, unknown>, path, depth + 1);
        continue;
      }
      let f = this.fields.get(path);
      if (f === undefined) {
        if (this.fields.size >= MAX_FIELDS) continue;
        f = { types: new Map(), items: new Map(), count: 0, examples: new Set() };
        this.fields.set(path, f);
      }
      f.count++;
      f.types.set(type, (f.types.get(type) ?? 0) + 1);
      if (Array.isArray(v)) {
        for (const x of v.slice(0, 20)) {
          if (x === null || x === undefined) continue;
          f.items.set(typeOf(x), (f.items.get(typeOf(x)) ?? 0) + 1);
          if (f.examples.size < EXAMPLES && isPrimitive(x)) f.examples.add(example(x));
        }
      } else if (f.examples.size < EXAMPLES && isPrimitive(v)) {
        f.examples.add(example(v));
      }
    }
  }

  result(): FieldInfo[] {
    return [...this.fields.entries()]
      .map(([path, f]): FieldInfo => {
        const type = widest(f.types);
        return { path, type, ...(type === "array" && f.items.size > 0 ? { items: widest(f.items) } : {}), count: f.count, examples: [...f.examples] };
      })
      .sort((a, b) => a.path.localeCompare(b.path));
  }
}

function isPrimitive(v: unknown): v is string | number | boolean {
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean";
}

function example(v: string | number | boolean): string | number | boolean {
  return typeof v === "string" && v.length > EXAMPLE_CHARS ? `${v.slice(0, EXAMPLE_CHARS)}…` : v;
}

function typeOf(v: unknown): FieldType {
  if (Array.isArray(v)) return "array";
  switch (typeof v) {
    case "number":
      return Number.isInteger(v) ? "integer" : "number";
    case "boolean":
      return "boolean";
    case "string":
      return DATE.test(v) ? "date" : DATE_TIME.test(v) ? "date-time" : "string";
    case "object":
      return "object";
    default:
      return "string";
  }
}

/** The type that holds every value seen: integers and numbers are numbers; anything mixed with text is text. */
function widest(types: Map<FieldType, number>): FieldType {
  if (types.size === 1) return [...types.keys()][0]!;
  const kinds = new Set(types.keys());
  if ([...kinds].every((t) => t === "integer" || t === "number")) return "number";
  if ([...kinds].every((t) => t === "date" || t === "date-time")) return "date-time";
  if (kinds.has("array")) return "array";
  return "string";
}

export class BuilderFields {
  private readonly cache = new Map<string, { at: number; palette: Palette }>();

  constructor(
    private readonly profiles: ProfileReads,
    private readonly clock: Clock,
    private readonly descriptors: DescriptorsOf,
  ) {}

  async palette(ctx: TenantContext, refresh = false): Promise<Palette> {
    const scope = scopeOf(ctx);
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    const now = this.clock.now();
    const hit = this.cache.get(key);
    if (!refresh && hit !== undefined && now - hit.at < FIELDS_CACHE_MS) return hit.palette;

    const profileFields = new FieldTally();
    const eventFields = new FieldTally();
    const byType = new Map<string, { count: number; tally: FieldTally }>();
    const namespaces = new Set<string>();
    let sampledProfiles = 0;
    let sampledEvents = 0;
    // Identity graph none: one entry per identity, no merging to pay for; the fields are the same.
    scan: for await (const chunk of this.profiles.scanProfiles(scope, NO_MERGE_POLICY, { chunkSize: 200, events: true })) {
      for (const p of chunk) {
        if (sampledProfiles >= FIELDS_SAMPLE_PROFILES) break scan;
        sampledProfiles++;
        profileFields.add(p.entity);
        for (const id of p.identities) namespaces.add(id.namespace);
        for (const e of p.events) {
          if (sampledEvents >= FIELDS_SAMPLE_EVENTS) break;
          sampledEvents++;
          eventFields.add(e.body);
          const type = typeof e.body["eventType"] === "string" ? (e.body["eventType"] as string) : null;
          if (type === null) continue;
          let t = byType.get(type);
          if (t === undefined) {
            if (byType.size >= MAX_EVENT_TYPES) continue;
            t = { count: 0, tally: new FieldTally() };
            byType.set(type, t);
          }
          t.count++;
          t.tally.add(e.body);
        }
      }
    }
    const palette: Palette = {
      computedAt: new Date(now).toISOString(),
      profile: { sampled: sampledProfiles, fields: profileFields.result() },
      events: {
        sampled: sampledEvents,
        eventTypes: [...byType.entries()]
          .map(([eventType, t]) => ({ eventType, count: t.count, fields: t.tally.result().filter((f) => f.path !== "eventType") }))
          .sort((a, b) => b.count - a.count || a.eventType.localeCompare(b.eventType)),
        fields: eventFields.result(),
      },
      identities: { namespaces: [...namespaces].sort(), descriptors: identityDescriptors(await this.descriptors(ctx)) },
    };
    this.cache.set(key, { at: now, palette });
    return palette;
  }
}

/** Identity descriptors as builder fields: `/person/email` → `person.email`. */
function identityDescriptors(list: Record<string, unknown>[]): Palette["identities"]["descriptors"] {
  const out: Palette["identities"]["descriptors"] = [];
  for (const d of list) {
    const prop = d["xdm:sourceProperty"];
    const ns = d["xdm:namespace"];
    if (d["@type"] !== "xdm:descriptorIdentity" || typeof prop !== "string" || typeof ns !== "string") continue;
    const tenantPath = prop.replace(/^\//, "").split("/").join(".");
    out.push({ path: tenantPath, namespace: ns, primary: d["xdm:isPrimary"] === true });
  }
  return out.sort((a, b) => a.path.localeCompare(b.path));
}
