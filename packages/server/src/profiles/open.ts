// Opens the profile store the configuration asks for: PostgreSQL (schema
// `segmentd_profiles`) when a database URL is set, otherwise the embedded
// SQLite file `profiles.db` in the data directory. The metadata store makes the
// same choice from the same two settings, so one switch moves all data.
//
// The embedded store runs in a worker thread by default (worker-store.ts), so
// its synchronous SQLite work and fsyncs never block the server's event loop;
// `worker: false` (config `profileStore.worker`, env
// SEGMENTD_PROFILE_STORE_WORKER=0) runs it on the calling thread instead.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { EmbeddedProfileStore } from "./embedded/sqlite-store.js";
import { WorkerProfileStore } from "./embedded/worker-store.js";
import { PostgresProfileStore } from "./postgres/pg-store.js";
import type { ProfileStore } from "./store.js";
import { moduleSchema } from "../platform/pg-url.js";

export interface OpenProfileStoreOptions {
  dataDir: string;
  databaseUrl?: string;
  /** Embedded store in a worker thread (default true). */
  worker?: boolean;
  /** Worker store only: told when the worker thread dies (every call fails from then on). */
  onWorkerCrash?: (err: Error) => void;
}

export function openProfileStore(o: OpenProfileStoreOptions): ProfileStore {
  if (o.databaseUrl) return new PostgresProfileStore({ connectionString: o.databaseUrl, schema: moduleSchema(o.databaseUrl, "profiles") });
  mkdirSync(o.dataDir, { recursive: true });
  const file = path.join(o.dataDir, "profiles.db");
  if (o.worker === false) return new EmbeddedProfileStore({ path: file });
  return new WorkerProfileStore({ path: file, ...(o.onWorkerCrash ? { onCrash: o.onWorkerCrash } : {}) });
}
