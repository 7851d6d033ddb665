// Opens the profile store the configuration asks for: PostgreSQL (schema
// `segmentd_profiles`) when a database URL is set, otherwise the embedded
// SQLite file `profiles.db` in the data directory. The metadata store makes the
// same choice from the same two settings, so one switch moves all data.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { EmbeddedProfileStore } from "./embedded/sqlite-store.js";
import { PostgresProfileStore } from "./postgres/pg-store.js";
import type { ProfileStore } from "./store.js";
import { moduleSchema } from "../platform/pg-url.js";

export interface OpenProfileStoreOptions {
  dataDir: string;
  databaseUrl?: string;
}

export function openProfileStore(o: OpenProfileStoreOptions): ProfileStore {
  if (o.databaseUrl) return new PostgresProfileStore({ connectionString: o.databaseUrl, schema: moduleSchema(o.databaseUrl, "profiles") });
  mkdirSync(o.dataDir, { recursive: true });
  return new EmbeddedProfileStore({ path: path.join(o.dataDir, "profiles.db") });
}

