/** Pick the metadata store from configuration: PostgreSQL when a URL is set, else embedded SQLite. */
import type { MetadataStore } from "./types.js";
import { openSqliteStore } from "./embedded/sqlite-store.js";
import { openPgStore } from "./postgres/pg-store.js";

export async function openMetadataStore(options: { dataDir: string; databaseUrl?: string }): Promise<MetadataStore> {
  if (options.databaseUrl) return openPgStore(options.databaseUrl);
  return openSqliteStore(options.dataDir);
}
