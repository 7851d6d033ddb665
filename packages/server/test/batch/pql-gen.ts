/**
 * fast-check generators for the batch tests: profiles and events whose fields
 * take every JSON kind (so that type mismatches, nulls, missing fields and
 * arrays are exercised), and PQL conditions built only from the constructs the
 * SQL back end claims to cover (compile-sql.ts).
 */
import fc from "fast-check";

export const NOW = Date.UTC(2026, 10, 21, 13, 30, 0);
const DAY = 86_400_000;
const MIDNIGHT = Date.UTC(2026, 10, 21);

const scalar = fc.oneof(
  fc.integer({ min: -3, max: 60 }),
  fc.constantFrom(1.5, 18, 30, 0),
  fc.constantFrom("30", "18", "abc", "Abc", "ab", "", "true", "false", "2026-11-20", "x'y", "héllo", "a%b"),
  fc.boolean(),
  fc.constant(null),
);

const jsonValue = fc.oneof(
  { weight: 6, arbitrary: scalar },
  { weight: 1, arbitrary: fc.array(scalar, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.record({ b: scalar }) },
  { weight: 1, arbitrary: fc.array(fc.record({ b: scalar }), { maxLength: 2 }) },
);

/** A record whose listed keys may be missing. */
function sparse(keys: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(Object.fromEntries(keys.map((k) => [k, jsonValue])), { requiredKeys: [] });
}

export const profileArb = fc.record(
  {
    person: sparse(["age", "name", "vip"]),
    a: jsonValue,
    tier: jsonValue,
  },
  { requiredKeys: [] },
);

export const eventArb = fc.record(
  {
    eventType: fc.constantFrom("purchase", "view", "click", 5, null),
    value: scalar,
    timestamp: fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: -20 * 24, max: 3 * 24 }).map((h) => new Date(NOW + h * 3_600_000 + (h % 7) * 60_000).toISOString()) },
      // Exactly on window bounds: midnights and whole days/hours from now.
      { weight: 3, arbitrary: fc.integer({ min: -10, max: 2 }).map((d) => new Date(MIDNIGHT + d * DAY).toISOString()) },
      { weight: 3, arbitrary: fc.integer({ min: -10 * 24, max: 2 * 24 }).map((h) => new Date(NOW + h * 3_600_000).toISOString()) },
      { weight: 1, arbitrary: fc.constant("not a time") },
      { weight: 1, arbitrary: fc.integer({ min: -10, max: 2 }).map((d) => NOW + d * DAY) },
    ),
  },
  { requiredKeys: ["timestamp"] },
);

export const profileWithEvents = fc.record({ profile: profileArb, events: fc.array(eventArb, { maxLength: 5 }) });

const literal = fc.oneof(
  fc.constantFrom("18", "30", "1.5", "0", "-3"),
  fc.constantFrom('"30"', '"abc"', '"ab"', '""', '"true"', '"x\'y"', '"héllo"', '"2026-11-20"'),
  fc.constantFrom("true", "false"),
);
const profilePath = fc.constantFrom("person.age", "person.name", "person.vip", "a", "a.b", "tier", "person");
const eventPath = fc.constantFrom("eventType", "value");
const cmp = fc.constantFrom("=", "!=", "<", "<=", ">", ">=");
const strMethod = fc.constantFrom("startsWith", "endsWith", "contains", "doesNotStartWith", "doesNotEndWith", "doesNotContain", "equals", "notEqualTo");
const strArg = fc.constantFrom('"a"', '"ab"', '""', '"c"', '"é"', '"3"');
const tail = fc.constantFrom(
  "< 7 days before now",
  "<= 2 days before today",
  "> 3 days before now",
  ">= 1 week before now",
  "= 2 days before today",
  "!= 1 days before today",
  "today",
  "yesterday",
  "before today",
  "after yesterday",
  "between yesterday and today",
  "< 12 hours after yesterday",
  "= 1 days after yesterday",
  "< 30 minutes before now",
  // Calendar periods and dates (month lengths, ISO weeks, leap days) — the SQL
  // compiler takes their bounds from @segmentd/pql's occursBounds.
  "this month",
  "last month",
  "this week",
  "last year",
  "<= 2 months before today",
  "= 1 months before today",
  "on date(2026, 2, 28)",
  "between date(2026, 1, 1) and date(2026, 2, 29)",
  "before date(2026, 3, 1)",
);

function orderable([, o, l]: [string, string, string]): boolean {
  return o === "=" || o === "!=" || !l.startsWith('"2026');
}

function leaf(path: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    // Ordering against a string that reads as a timestamp compares instants: outside SQL coverage.
    fc.tuple(path, cmp, literal).filter(orderable).map(([p, o, l]) => `${p} ${o} ${l}`),
    fc.tuple(path, cmp, literal).filter(orderable).map(([p, o, l]) => `${l} ${o} ${p}`),
    fc.tuple(path, fc.constantFrom("in", "notIn"), fc.array(literal, { minLength: 1, maxLength: 3 })).map(([p, o, ls]) => `${p} ${o} [${ls.join(", ")}]`),
    fc.tuple(path, fc.constantFrom("isNull", "isNotNull")).map(([p, m]) => `${p}.${m}()`),
    fc.tuple(path, strMethod, strArg).map(([p, m, a]) => `${p}.${m}(${a})`),
  );
}

function combine(base: fc.Arbitrary<string>, depth: number): fc.Arbitrary<string> {
  if (depth === 0) return base;
  const sub = combine(base, depth - 1);
  return fc.oneof(
    { weight: 3, arbitrary: base },
    { weight: 1, arbitrary: fc.tuple(sub, fc.constantFrom("and", "or"), sub).map(([a, o, b]) => `(${a} ${o} ${b})`) },
    { weight: 1, arbitrary: sub.map((a) => `not (${a})`) },
  );
}

const eventCond = combine(
  fc.oneof({ weight: 3, arbitrary: leaf(eventPath) }, { weight: 2, arbitrary: tail.map((t) => `timestamp occurs ${t}`) }),
  1,
);

const eventCondition = fc.oneof(
  fc.tuple(eventCond, cmp, fc.integer({ min: 0, max: 3 })).map(([c, o, n]) => `xEvent[${c}].count() ${o} ${n}`),
  eventCond.map((c) => `xEvent[${c}]`),
  fc.tuple(eventCond.map((c) => c.replace(/\b(eventType|value|timestamp)\b/g, "X.$1")), fc.constantFrom(":", "where")).map(([c, sep]) => `exists X from xEvent ${sep} ${c}`),
  fc.tuple(eventCond, fc.option(tail, { nil: undefined }), fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined })).map(
    ([c, t, n]) => `chain(xEvent, timestamp, [A: WHAT(${c})${t ? ` WHEN(${t})` : ""}${n ? ` COUNT(${n})` : ""}])`,
  ),
  fc.tuple(cmp, fc.integer({ min: 0, max: 4 })).map(([o, n]) => `xEvent.count() ${o} ${n}`),
);

/** A PQL condition inside the SQL back end's coverage. */
export const coveredQuery = combine(fc.oneof({ weight: 3, arbitrary: leaf(profilePath) }, { weight: 2, arbitrary: eventCondition }), 2);
