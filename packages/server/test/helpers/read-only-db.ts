// Reads a store file on a read-only connection of its own, closed after `read` (what tests check
// straight from a file, apart from the store under test).
import Database from "better-sqlite3";

export function readOnlyDb<T>(file: string, read: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}
