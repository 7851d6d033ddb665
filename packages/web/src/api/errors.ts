/**
 * Turn whatever an API answered into one sentence a marketer can read. The
 * server speaks several error dialects (Adobe's gateway `{error_code,
 * message}`, UPS `{errors: {"400": [{code, message}]}, title}`, problem
 * bodies `{title, detail}`); a page must never show a blank or "[object
 * Object]", so every shape ends up as words.
 */

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Each item of a multi-error answer, already in words. */
    readonly details: string[] = [],
  ) {
    super(message);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function itemMessages(errors: unknown): string[] {
  if (!isRecord(errors)) return [];
  const out: string[] = [];
  for (const list of Object.values(errors)) {
    if (!Array.isArray(list)) continue;
    for (const item of list) if (isRecord(item) && typeof item.message === "string") out.push(item.message);
  }
  return out;
}

/** Where a valid token comes from, said with every refused token (the gateway's own message names none). */
export const TOKEN_HINT = "Print this server's development token with `npm run segmentd -- token` in the segmentd folder (or open the sign-in page on the server's machine, where it is filled in), or use a token your identity provider issued for this organization.";

/** What a status means when the body says nothing useful. */
export function statusWords(status: number): string {
  switch (status) {
    case 0: return "The server could not be reached. Check that segmentd is running.";
    case 401: return "The token was refused.";
    case 403: return "This token may not use that organization or sandbox.";
    case 404: return "Not found: the server does not know this resource (or this feature is not enabled on it).";
    case 413: return "The request is too large for the server.";
    case 429: return "Too many requests; wait a moment and try again.";
    default:
      return status >= 500 ? `The server failed (HTTP ${status}). Try again; if it persists, check the server's log.` : `The request was refused (HTTP ${status}).`;
  }
}

export function describeFailure(status: number, body: unknown): ApiFailure {
  const f = describeBody(status, body);
  if (status !== 401) return f;
  const said = f.message.trim();
  return new ApiFailure(status, `${said}${/[.!?]$/.test(said) ? "" : "."} ${TOKEN_HINT}`, f.details);
}

function describeBody(status: number, body: unknown): ApiFailure {
  if (isRecord(body)) {
    const items = itemMessages(body.errors);
    if (items.length > 0) {
      // UPS puts the full sentence in `title` (e.g. naming the dependents that
      // block a delete) and the per-item detail in `errors`: show both, once.
      const title = typeof body.title === "string" && body.title.trim() !== "" ? body.title : items[0]!;
      return new ApiFailure(status, title, items.filter((i) => i !== title));
    }
    for (const key of ["message", "detail", "title"] as const) {
      const v = body[key];
      if (typeof v === "string" && v.trim() !== "") return new ApiFailure(status, v);
    }
  }
  if (typeof body === "string" && body.trim() !== "" && body.length < 300 && !body.trimStart().startsWith("<")) return new ApiFailure(status, body.trim());
  return new ApiFailure(status, statusWords(status));
}

/** The extra sentences of a multi-error answer (empty for other errors). */
export function detailsOf(err: unknown): string[] {
  return err instanceof ApiFailure ? err.details : [];
}

export function messageOf(err: unknown): string {
  if (err instanceof ApiFailure) return err.message;
  if (err instanceof Error && err.message) return err.message;
  return "Something went wrong.";
}
