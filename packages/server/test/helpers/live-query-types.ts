/** One of each query type, with windows under 24 hours (what streaming and edge evaluate): the worked examples' kinds. */
export const LIVE_QUERY_TYPES: Record<string, string> = {
  "profile-only": "person.age > 30",
  "single event": 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 6 hours before now)])',
  "event with profile": 'person.age > 20 and chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 20 hours before now)])',
  "multiple events": 'chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews") WHEN(<= 20 hours before now)]) and chain(xEvent, timestamp, [B: WHAT(eventType = "commerce.purchases") WHEN(<= 20 hours before now)])',
  "chain": 'chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews") WHEN(<= 20 hours before now), B: WHAT(eventType = "commerce.purchases")])',
  "count in a window": 'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 12 hours before now].count() >= 2',
  "sum in a window": 'xEvent[eventType = "commerce.purchases" and timestamp occurs <= 20 hours before now].sum(commerce.order.priceTotal) > 100',
};
