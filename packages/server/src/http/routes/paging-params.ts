/**
 * The numeric query parameters of list routes (start, offset, page, limit,
 * version, epoch-millisecond times) as querystring JSON schemas with both
 * bounds. Both matter: the query Ajv coerces "1e309" to Infinity and "1e21"
 * to 1e21, and without `strictNumbers` it takes both for integers (Infinity % 1
 * is NaN, which is falsy), so a schema with only a minimum let them through to
 * SQLite ("datatype mismatch") and PostgreSQL (out of range) as 500s. With a
 * maximum, Ajv refuses them with the usual 400 naming the parameter and the
 * bound, before any store is called. docs/reliability.md lists the bounds.
 */

/** Largest `start`/`offset`: far past any real list, and offset + limit stays an exact integer. */
export const MAX_QUERY_OFFSET = 1_000_000_000;
/** Largest 0-based `page` number (also the hygiene lists' bound). */
export const MAX_QUERY_PAGE = 1_000_000;
/** Largest `limit` where larger values are clamped to the page size: any exact (safe) integer. */
export const MAX_QUERY_INTEGER = Number.MAX_SAFE_INTEGER;
/** Largest value of a parameter compared with a PostgreSQL INTEGER column (merge policy `version`). */
export const MAX_QUERY_INT32 = 2_147_483_647;
/** Largest epoch-millisecond time: the last instant a JavaScript Date can hold (+275760-09-13). */
export const MAX_QUERY_EPOCH_MS = 8_640_000_000_000_000;

interface IntegerParam {
  type: "integer";
  minimum: number;
  maximum: number;
  description?: string;
}

function integer(minimum: number, maximum: number, description?: string): IntegerParam {
  return description === undefined ? { type: "integer", minimum, maximum } : { type: "integer", minimum, maximum, description };
}

/** `start` / `offset`: 0..MAX_QUERY_OFFSET. */
export const offsetParam = (description?: string): IntegerParam => integer(0, MAX_QUERY_OFFSET, description);

/** `page`: 0..MAX_QUERY_PAGE. */
export const pageParam = (description?: string): IntegerParam => integer(0, MAX_QUERY_PAGE, description);

/** `limit`: 1..max; without max, 1..MAX_QUERY_INTEGER for routes that clamp larger values to their page size. */
export const limitParam = (max: number = MAX_QUERY_INTEGER, description?: string): IntegerParam => integer(1, max, description);

/** An epoch-millisecond time (`startTime`, `endTime`): 0..MAX_QUERY_EPOCH_MS. */
export const epochMsParam = (description?: string): IntegerParam => integer(0, MAX_QUERY_EPOCH_MS, description);
