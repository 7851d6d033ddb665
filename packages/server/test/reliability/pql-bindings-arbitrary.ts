/**
 * PQL with several bindings over events (#37, item 2), for the fuzz suite: `exists` / `forall`
 * with 1–4 `V from xEvent` bindings, nested up to `maxNesting` quantifiers deep, their conditions
 * made of timestamp comparisons between the bound events, eventType tests and profile tests,
 * joined by and/or/not. Every text parses and checks (variables are unique and only used in
 * scope). With each text comes its `eventDegree`: the deepest nesting of loops over xEvent (the
 * bindings of a quantifier plus those of the quantifiers around it), which is what the cost model
 * multiplies — at the default 10,000 events per profile and bound of 10^9 units, a degree of 3 or
 * more is refused (400 SEGMENTD-PQL-400 / PQL_TOO_COSTLY) and 2 or less accepted.
 */
import fc from "fast-check";

export interface PqlBindingsOptions {
  /** Most bindings of one quantifier (1–4; default 4). */
  maxBindings?: number;
  /** Most quantifiers nested in one another (default 3). */
  maxNesting?: number;
  /** Event types to test (default view, buy, zz). */
  eventTypes?: readonly string[];
}

export interface PqlBindingsCase {
  text: string;
  /** The deepest nesting of loops over xEvent. */
  eventDegree: number;
}

interface Part {
  text: string;
  degree: number;
}

const CMP = ["<", "<=", ">", ">=", "=", "!="] as const;

export function pqlBindingsExpression(options: PqlBindingsOptions = {}): fc.Arbitrary<PqlBindingsCase> {
  const maxBindings = Math.min(Math.max(options.maxBindings ?? 4, 1), 4);
  const maxNesting = Math.max(options.maxNesting ?? 3, 1);
  const types = options.eventTypes ?? ["view", "buy", "zz"];
  let fresh = 0;

  /** A condition over the variables in scope, possibly holding a quantifier `nesting` levels deep at most. */
  const condition = (vars: readonly string[], nesting: number, outer: number): fc.Arbitrary<Part> => {
    const leaves: fc.Arbitrary<Part>[] = [fc.constantFrom('person.name = "x"', "person.age > 30").map((text) => ({ text, degree: 0 }))];
    if (vars.length > 0) {
      const v = fc.constantFrom(...vars);
      leaves.push(fc.tuple(v, fc.constantFrom(...types)).map(([x, t]) => ({ text: `${x}.eventType = "${t}"`, degree: 0 })));
      leaves.push(fc.tuple(v, fc.constantFrom(...CMP), v).map(([x, op, y]) => ({ text: `${x}.timestamp ${op} ${y}.timestamp`, degree: 0 })));
      leaves.push(v.map((x) => ({ text: `${x}.timestamp occurs <= 30 days before now`, degree: 0 })));
    }
    const leaf = fc.oneof(...leaves);
    const options: fc.Arbitrary<Part>[] = [leaf, leaf, fc.tuple(leaf, fc.constantFrom("and", "or"), leaf).map(([a, op, b]) => ({ text: `(${a.text} ${op} ${b.text})`, degree: 0 }))];
    if (nesting > 0) {
      const inner = fc.constant(null).chain(() => quantifier(vars, nesting, outer));
      options.push(inner, fc.tuple(leaf, fc.constantFrom("and", "or"), inner).map(([a, op, q]) => ({ text: `(${a.text} ${op} ${q.text})`, degree: q.degree })));
      options.push(inner.map((q) => ({ text: `not (${q.text})`, degree: q.degree })));
    }
    return fc.oneof(...options);
  };

  /** `exists|forall V1 from xEvent, …, Vk from xEvent : condition` inside `outer` event loops. */
  const quantifier = (vars: readonly string[], nesting: number, outer: number): fc.Arbitrary<Part> =>
    fc.tuple(fc.constantFrom("exists", "forall"), fc.integer({ min: 1, max: maxBindings })).chain(([q, k]) => {
      const names = Array.from({ length: k }, () => `E${fresh++}`);
      const depth = outer + k;
      return condition([...vars, ...names], nesting - 1, depth).map((c) => ({
        text: `${q} ${names.map((n) => `${n} from xEvent`).join(", ")} : ${c.text}`,
        degree: Math.max(depth, c.degree),
      }));
    });

  return fc
    .tuple(quantifier([], maxNesting, 0), fc.option(condition([], 0, 0), { nil: undefined }))
    .map(([q, extra]) => ({ text: extra === undefined ? q.text : `${extra.text} and ${q.text}`, eventDegree: Math.max(q.degree, extra?.degree ?? 0) }));
}
