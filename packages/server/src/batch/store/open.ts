/**
 * Opens the batch repository the configuration asks for: PostgreSQL (schema
 * `segmentd_batch`, or `<search_path>_batch`: see moduleSchema) when a database URL is
 * set, otherwise a SQLite file `batch.db` in the data directory.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { PgBatchRepository } from "./pg-repository.js";
import { SqliteBatchRepository } from "./sqlite-repository.js";
import type { BatchRepository } from "./types.js";
import { moduleSchema } from "../../platform/pg-url.js";

export function openBatchRepository(config: { dataDir: string; databaseUrl?: string | undefined }): BatchRepository {
  if (config.databaseUrl !== undefined && config.databaseUrl !== "") return new PgBatchRepository({ connectionString: config.databaseUrl, schema: moduleSchema(config.databaseUrl, "batch") });
  mkdirSync(config.dataDir, { recursive: true });
  return new SqliteBatchRepository(path.join(config.dataDir, "batch.db"));
}
