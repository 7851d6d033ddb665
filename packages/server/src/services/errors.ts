/**
 * Service errors. A service throws `ApiError` with the HTTP status it maps to
 * and an error code; the HTTP layer renders it in the UPS error shape
 * (segmentation-api.md §1.4 B). Codes Adobe documents are used where one fits
 * (UPAPI-*, UPLIB-*); the others are segmentd's own (`SEGMENTD-*`), listed in
 * docs/architecture.md.
 */

export interface ErrorItem {
  code: string | number;
  message: string;
  [extra: string]: unknown;
}

export class ApiError extends Error {
  readonly items: ErrorItem[];

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    items?: ErrorItem[],
  ) {
    super(message);
    this.items = items ?? [{ code, message }];
  }
}

export const ErrorCodes = {
  /** Adobe: bulk-get with 0 or more than 100 ids. */
  bulkIdCount: "UPAPI-113015-400",
  /** Adobe: none of the bulk-get ids exist. */
  bulkNoneFound: "UPAPI-113000-404",
  /** Adobe: cannot delete, other audiences depend on it (Adobe returns it with status 400). */
  hasDependents: "UPAPI-113631-403",
  /** Adobe: JSON extraction failure, e.g. a missing or mistyped field (returned with status 400). */
  badJson: "UPLIB-101206-500",
  /** Adobe: an audience body breaks a rule (lifecycle, immutable namespace...). */
  audienceValidation: "UPAPI-113434-400",
  /** Adobe: no audience with this id. */
  audienceNotFound: "UPAPI-113430-404",
  /** Adobe: the audience's dataset is not in the catalog (returned with status 400). */
  audienceDataset: "UPLIB-101554-503",
  audienceDuplicate: "SEGMENTD-AUDIENCE-409",
  invalidPql: "SEGMENTD-PQL-400",
  ineligible: "SEGMENTD-ELIGIBILITY-400",
  limit: "SEGMENTD-LIMIT-400",
  duplicateName: "SEGMENTD-DUPLICATE-422",
  notFound: "SEGMENTD-NOT-FOUND-404",
  immutable: "SEGMENTD-IMMUTABLE-400",
  badRequest: "SEGMENTD-BAD-REQUEST-400",
  unknownSandbox: "SEGMENTD-SANDBOX-403",
  bodyTooLarge: "SEGMENTD-BODY-TOO-LARGE-413",
  mergePolicy: "SEGMENTD-MERGE-POLICY-400",
  mergePolicyConflict: "SEGMENTD-MERGE-POLICY-409",
  operatorOnly: "SEGMENTD-OPERATOR-403",
  internal: "SEGMENTD-INTERNAL-500",
  unavailable: "SEGMENTD-UNAVAILABLE-503",
} as const;

export function notFound(what: string, id: string): ApiError {
  return new ApiError(404, ErrorCodes.notFound, `${what} with id '${id}' was not found`);
}

export function badRequest(message: string, code: string = ErrorCodes.badRequest, items?: ErrorItem[]): ApiError {
  return new ApiError(400, code, message, items);
}
