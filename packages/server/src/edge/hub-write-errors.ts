/**
 * Which hub write failures are the store's (retry the same write later) rather than the
 * data's (the same write fails again). The hub forwarder retries the first kind with backoff
 * and bisects a batch on the second to find the events the hub refuses (hub-forwarder.ts).
 * An error not recognized here is treated as the data's: bisection then tells, since a
 * failing store fails every part of the batch and a refused event only the parts holding it.
 * An event found refused is dead-lettered; its forward() caller gets a DeadLetteredError.
 */

/** Node's network errors: the connection to PostgreSQL failed or was lost. */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN"]);

/**
 * PostgreSQL SQLSTATE classes of a server or connection in trouble: 08 connection exception,
 * 40 transaction rollback (serialization failure, deadlock), 53 insufficient resources,
 * 57 operator intervention (shutdown, statement timeout), 58 system error. Data errors
 * (22: NUL, invalid Unicode; 23: integrity) are not among them.
 */
const PG_TRANSIENT_CLASSES = new Set(["08", "40", "53", "57", "58"]);

/** SQLite result codes of a store that cannot write now (not of the data). */
const SQLITE_TRANSIENT = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|NOMEM|INTERRUPT|PROTOCOL)/;

/** Messages of a store that is not there: the embedded store's worker, pg's pool. */
const UNAVAILABLE = /profile store worker failed|worker thread exited|profile store is (closed|unavailable)|Connection terminated|connection error|timeout exceeded when trying to connect|Cannot use a pool after calling end/i;

function transientOne(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const e = err as { name?: unknown; code?: unknown; status?: unknown; transient?: unknown; message?: unknown };
  if (e.transient === true) return true;
  // The store's own "unavailable" error (a 503 ApiError: its worker is restarting).
  if (e.name === "StoreUnavailableError" || e.status === 503) return true;
  if (typeof e.code === "string") {
    if (NETWORK_CODES.has(e.code) || SQLITE_TRANSIENT.test(e.code)) return true;
    if (/^[0-9A-Z]{5}$/.test(e.code) && PG_TRANSIENT_CLASSES.has(e.code.slice(0, 2))) return true;
  }
  return typeof e.message === "string" && UNAVAILABLE.test(e.message);
}

/** True when the failure (or an error it was caused by) is the store's, not the written data's. */
export function isTransientHubError(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && e !== undefined && e !== null; depth++) {
    if (transientOne(e)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The hub refused an event the forwarder was asked to write (it is dead-lettered). */
export class DeadLetteredError extends Error {
  constructor(
    readonly eventId: string | null,
    readonly reason: string,
  ) {
    super(`the hub refused edge event ${eventId ?? "(no _id)"}: ${reason}`);
    this.name = "DeadLetteredError";
  }
}
