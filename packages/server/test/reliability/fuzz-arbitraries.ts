/**
 * Generators of the two kinds of request whose cost grows with data (issue #37): Lucene queries for
 * segment search and PQL with several bindings over events. Valid or nearly valid on purpose — a
 * query the parser refuses costs nothing; the expensive ones are those it accepts.
 */
import fc from "fast-check";
import { pqlBindingsExpression } from "./pql-bindings-arbitrary.js";

const letters = fc.string({ unit: fc.constantFrom("a", "b", "q", "e", "z", "1"), minLength: 1, maxLength: 12 });
const longWord = fc.nat({ max: 256 }).map((n) => "a".repeat(Math.max(1, n)));
const word = fc.oneof(letters, longWord);

/** One Lucene clause: plain, fuzzy, wildcard, regex, range, phrase, with or without a field. */
const clause: fc.Arbitrary<string> = fc.oneof(
  word,
  fc.tuple(word, fc.constantFrom("~", "~1", "~2")).map(([w, d]) => `${w}${d}`),
  fc.tuple(fc.constantFrom("*", "?", ""), word, fc.constantFrom("*", "?", "")).map(([a, w, b]) => `${a}${w}${b}`),
  fc.constantFrom("/(.*a){20}/", "/(a+)+b/", "/[a-z]*q[a-z]*/", "/.*/", "/(a|aa)*c/", "/a{1,500}/"),
  fc.tuple(word, word, fc.constantFrom("[", "{"), fc.constantFrom("]", "}")).map(([a, b, o, c]) => `${o}${a} TO ${b}${c}`),
  fc.tuple(fc.array(letters, { minLength: 1, maxLength: 6 }), fc.nat({ max: 5 })).map(([ws, slop]) => `"${ws.join(" ")}"~${slop}`),
).chain((c) => fc.constantFrom("", "segmentName:", "segmentDescription:", "segmentId:", "name:", "+", "-").map((p) => `${p}${c}`));

/** A Lucene `s` query: up to 150 clauses joined by operators, sometimes grouped. */
export const luceneQuery: fc.Arbitrary<string> = fc.oneof(
  fc.array(clause, { minLength: 1, maxLength: 150 }).chain((cs) =>
    fc.array(fc.constantFrom(" ", " AND ", " OR ", " NOT ", " && ", " || "), { minLength: cs.length, maxLength: cs.length })
      .map((ops) => cs.map((c, i) => (i === 0 ? c : `${ops[i]}${c}`)).join(""))),
  fc.array(clause, { minLength: 1, maxLength: 8 }).map((cs) => `(${cs.join(" OR ")}) AND (${cs.join(" ")})`),
  fc.nat({ max: 150 }).map((n) => Array.from({ length: Math.max(1, n) }, () => "qqqq~2").join(" ")),
);

const eventTest = fc.constantFrom('eventType = "zz"', 'eventType = "commerce.purchases"', "timestamp occurs < 7 days before now", 'commerce.order.priceTotal > 10');

/**
 * `exists`/`forall` over 1–4 bindings of xEvent, nested up to three deep, chaining timestamps;
 * and pql-bindings-arbitrary.ts's richer trees (and/or/not, `occurs`, profile tests), half of them
 * with at most two bindings so that accepted expressions are evaluated too.
 */
export const pqlBindings: fc.Arbitrary<string> = fc.oneof(
  pqlBindingsExpression().map((c) => c.text),
  pqlBindingsExpression({ maxBindings: 2, maxNesting: 1 }).map((c) => c.text),
  fc.tuple(fc.integer({ min: 1, max: 4 }), fc.constantFrom("exists", "forall"), eventTest).map(([n, q, t]) => {
    const vars = ["X", "Y", "Z", "W"].slice(0, n);
    const order = vars.slice(1).map((v, i) => `${vars[i]}.timestamp < ${v}.timestamp`);
    return `${q} ${vars.map((v) => `${v} from xEvent`).join(", ")} : ${[...order, `${vars[n - 1]}.${t}`].join(" and ")}`;
  }),
  fc.tuple(fc.integer({ min: 1, max: 3 }), eventTest).map(([depth, t]) => {
    const vars = ["X", "Y", "Z"].slice(0, depth);
    let body = `${vars[depth - 1]}.${t}`;
    for (let i = depth - 1; i >= 0; i--) body = `exists ${vars[i]} from xEvent : (${i > 0 ? `${vars[i - 1]}.timestamp < ${vars[i]}.timestamp and ` : ""}${body})`;
    return body;
  }),
  fc.tuple(fc.integer({ min: 1, max: 3 }), eventTest).map(([n, t]) => `xEvent[${t}].count() > ${n} and exists X from xEvent, Y from xEvent : X.timestamp < Y.timestamp`),
);
