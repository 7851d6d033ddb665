// The events of event-index-crash.test.ts and its writer process: event k of the run, always the
// same (same _id, profile and time), so a re-sent one is a duplicate.
export function crashEvent(k: number): Record<string, unknown> {
  return { _id: `ix-${k}`, timestamp: 1_700_000_000_000 + ((k * 7919) % 100_000) * 1000, eventType: "web.webpagedetails.pageViews",
    identityMap: { ECID: [{ id: `visitor-${(k * 31) % 5000}`, primary: true }] } };
}
