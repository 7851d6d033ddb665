/**
 * Error codes of the edge interact and datastream APIs (segmentd's own; the
 * Edge Network's public EXEG codes are not documented in the references).
 * They render in the UPS error shape like every other service error.
 */
export const EdgeErrorCodes = {
  primaryIdentity: "SEGMENTD-EDGE-PRIMARY-IDENTITY-400",
  badRequest: "SEGMENTD-EDGE-BAD-REQUEST-400",
  datastreamUnknown: "SEGMENTD-EDGE-DATASTREAM-400",
  locationUnknown: "SEGMENTD-EDGE-LOCATION-404",
  invalidEvent: "SEGMENTD-EDGE-INVALID-EVENT-400",
  /** The hub forwarder's queue is full (backpressure); nothing was stored, the client may retry. */
  busy: "SEGMENTD-EDGE-BUSY-503",
  /** The hub refused to store a valid-looking event (dead-lettered); sent again unchanged it is refused again. */
  eventRefused: "SEGMENTD-EDGE-EVENT-REFUSED-422",
  datastreamInvalid: "SEGMENTD-DATASTREAM-400",
  datastreamNotFound: "SEGMENTD-DATASTREAM-404",
} as const;
