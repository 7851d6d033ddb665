/**
 * PostgreSQL connection URLs. libpq (psql) connects as the OS user when a URL
 * names none; node-postgres only reads $USER, which service managers and CI
 * often leave unset, and then fails. Every store builds its pool with
 * storage-kit/postgres.ts `createPool`, which applies `withDefaultUser(url)`, so
 * that `postgres://127.0.0.1:5432/db` means what it means to psql. The user goes into the URL because pg lets a parsed
 * connection string override a separate `user` option.
 */
import { userInfo } from "node:os";

export function withDefaultUser(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url; // not a URL (e.g. a key=value string): pg reports it
  }
  if (u.username !== "") return url;
  u.username = process.env.PGUSER || process.env.USER || userInfo().username;
  return u.toString();
}

/**
 * The PostgreSQL schema a module keeps its tables in: `segmentd_<module>`, or
 * `<schema>_<module>` when the URL selects a schema through
 * `options=-c search_path=<schema>` — how a deployment (or a test) keeps several
 * segmentd instances in one database apart.
 */
export function moduleSchema(databaseUrl: string, module: string): string {
  let options: string | null = null;
  try {
    options = new URL(databaseUrl).searchParams.get("options");
  } catch {
    return `segmentd_${module}`;
  }
  const m = options ? /search_path=([a-z_][a-z0-9_]*)/.exec(options) : null;
  return m ? `${m[1]}_${module}` : `segmentd_${module}`;
}
