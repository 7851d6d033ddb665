/** Pick the hygiene store like the metadata store: PostgreSQL when a URL is set, else embedded SQLite in the data directory. */
import type { HygieneStore } from "./types.js";
import { openSqliteHygieneStore } from "./sqlite-store.js";
import { openPgHygieneStore } from "./pg-store.js";

export async function openHygieneStore(options: { dataDir: string; databaseUrl?: string }): Promise<HygieneStore> {
  if (options.databaseUrl) return openPgHygieneStore(options.databaseUrl);
  return openSqliteHygieneStore(options.dataDir);
}
