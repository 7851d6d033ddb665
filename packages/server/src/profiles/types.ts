// Shared types of the profile data plane: tenant scope, datasets, XDM records,
// identities and merge policies. Kept free of storage and HTTP concerns so the
// HTTP layer, the engines and both stores can all import it.

import type { SandboxNameScope } from "../platform/tenant.js";

/** Every store call is scoped to one organization and one sandbox (decisions §4); the profile stores key it by sandbox name. */
export type TenantScope = SandboxNameScope;

export type SchemaClass = "profile" | "experienceevent";

/** XDM class ids as AEP's Catalog and Schema Registry spell them. */
export const SCHEMA_CLASS_IDS: Readonly<Record<SchemaClass, string>> = {
  profile: "https://ns.adobe.com/xdm/context/profile",
  experienceevent: "https://ns.adobe.com/xdm/context/experienceevent",
};

/**
 * A field of the record that carries an identity, for datasets whose schema marks
 * identity fields instead of (or besides) sending an identityMap.
 */
export interface IdentityFieldDescriptor {
  /** Dotted path inside the record, e.g. "personalEmail.address". */
  path: string;
  namespace: string;
  primary?: boolean;
}

/** A Catalog dataset (AEP `/data/foundation/catalog/dataSets` shape where reasonable). */
export interface Dataset {
  id: string;
  name: string;
  description?: string;
  schemaClass: SchemaClass;
  /** Whether records of this dataset feed Real-Time Customer Profile (tags.unifiedProfile). */
  profileEnabled: boolean;
  identityFields: IdentityFieldDescriptor[];
  imsOrg: string;
  sandboxName: string;
  /** Epoch milliseconds, as Catalog reports `created` / `updated`. */
  created: number;
  updated: number;
}

export interface DatasetInput {
  /** Optional: callers may choose the id (tests, demo); otherwise the store assigns a 24-hex id. */
  id?: string;
  name: string;
  description?: string;
  schemaClass: SchemaClass;
  profileEnabled?: boolean;
  identityFields?: IdentityFieldDescriptor[];
}

export type AuthenticatedState = "ambiguous" | "authenticated" | "loggedOut";

export interface IdentityMapEntry {
  id: string;
  primary?: boolean;
  authenticatedState?: AuthenticatedState;
}

/** XDM identityMap: namespace code → identities in that namespace. */
export type IdentityMap = Record<string, IdentityMapEntry[]>;

/** One identity, namespace codes compared case-insensitively (stored lower-cased). */
export interface Identity {
  namespace: string;
  id: string;
}

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * A record that passed validation, ready to be stored. `identities` holds every
 * identity of the record (identityMap and identity fields), primary first.
 */
export interface ValidRecord {
  index: number;
  kind: SchemaClass;
  body: JsonObject;
  primary: Identity;
  identities: Identity[];
  /** Event time (events) or `_repo.modifyDate` (profiles), epoch ms; null = use ingestion time. */
  timestamp: number | null;
  /** Event `_id` (events only). */
  eventId: string | null;
  /** Serialized size in bytes (UTF-8 JSON). */
  size: number;
  /** `body` serialized as JSON, computed once during validation and reused by the stores. */
  json: string;
}

export interface RecordError {
  /** Position of the record in its file / request (0-based). */
  index: number;
  code: string;
  message: string;
  /** Path of the offending field inside the record, when there is one. */
  path?: string;
}

export type IdentityGraphType = "none" | "pdg";
export type AttributeMergeType = "timestampOrdered" | "dataSetPrecedence";

/** The part of a merge policy the data plane needs (the metadata store keeps the rest). */
export interface MergePolicySpec {
  id?: string;
  identityGraph: { type: IdentityGraphType };
  attributeMerge: { type: AttributeMergeType; order?: string[] };
}

/** AEP's documented fallback when no default merge policy is configured. */
export const NO_MERGE_POLICY: MergePolicySpec = {
  identityGraph: { type: "none" },
  attributeMerge: { type: "timestampOrdered" },
};

export interface ProfileFragment {
  datasetId: string;
  primary: Identity;
  /** `_repo.modifyDate` if the record gave one, else ingestion time (epoch ms). */
  timestamp: number;
  body: JsonObject;
}

export interface StoredEvent {
  datasetId: string;
  eventId: string;
  primary: Identity;
  timestamp: number;
  body: JsonObject;
}

export type MembershipStatus = "realized" | "exited";
/** Who wrote a membership change; `backfill`: a continuous/edge definition's memberships computed at once when it is saved (batch/backfill/). */
export type MembershipSource = "batch" | "streaming" | "edge" | "backfill";

export interface Membership {
  profileId: string;
  definitionId: string;
  status: MembershipStatus;
  /** ISO-8601 (decisions §4). */
  lastQualificationTime: string;
}

export interface MembershipTransition {
  profileId: string;
  definitionId: string;
  from: MembershipStatus | null;
  to: MembershipStatus;
  source: MembershipSource;
  /** ISO-8601. */
  at: string;
}

/** A profile as the profile access API and the engines see it. */
export interface MergedProfile {
  /** Stable id of the stitched identity graph (the oldest graph's id survives a merge). */
  profileId: string;
  /** Identities the profile was built from: the whole graph (pdg) or the looked-up one (none). */
  identities: Identity[];
  /** Merged XDM attributes, with identityMap and segmentMembership.ups filled in. */
  entity: JsonObject;
  /** Datasets that contributed fragments. */
  sources: string[];
  /** Newest fragment timestamp (epoch ms), null when only events exist. */
  lastModifiedAt: number | null;
  /** decisions §2: consents.marketing.preferred or consents.collect.val is "n". */
  optedOut: boolean;
}
