/**
 * PostgreSQL connection URLs. libpq (psql) connects as the OS user when a URL
 * names none; node-postgres only reads $USER, which service managers and CI
 * often leave unset, and then fails. Every store builds its pool from
 * `withDefaultUser(url)` so that `postgres://127.0.0.1:5432/db` means what it
 * means to psql. The user goes into the URL because pg lets a parsed
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
