/**
 * The rule model of the visual audience builder (issue #29): plain,
 * JSON-serialisable data that a UI renders and edits, and that converts to and
 * from PQL without changing meaning.
 *
 * Design note
 * - One tree of groups. A group is `include` (its children combined with
 *   `and`/`or`) or `exclude` (`not (…)` of that). The model's root, an event
 *   rule's filter and a sequence step's WHAT/WHERE are "root groups": always
 *   `include`, possibly empty (empty root = no expression yet; empty filter =
 *   any event; empty WHAT = `WHAT(true)`).
 * - Leaves are rules a marketer recognises: a condition on a field
 *   (`field`, `operator`, `operands`; operators.ts lists them per value type
 *   with labels), an event count, a sequence (chain), an audience membership,
 *   or a read-only PQL block for anything else. Blocks keep the canonical text
 *   of a sub-expression; they are edited only in the PQL tab.
 * - Every rule, group and step has an `id` unique in the model, so a UI can key
 *   and drag them; pqlToRules can reuse the ids of a previous model.
 * - Exactness is defined on the AST: `parse(rulesToPql(pqlToRules(q)))` is
 *   `astEqual` to `parse(q)` (positions ignored), which is the same as equal
 *   canonical text (`format` is injective: `parse(format(a))` equals `a`).
 *   Each recognised rule is rebuilt and compared with the sub-tree it came
 *   from, and the whole model once more at the end; a mismatch becomes a block.
 * - Canonical form: several models can write the same PQL (an empty group, a
 *   one-rule group, `≥`+`≤` on one field next to each other, the relative
 *   form that is "in the last N"). `normalize` maps a model to the one that
 *   pqlToRules returns for its PQL, so `pqlToRules(rulesToPql(m))` equals
 *   `normalize(m)`, ids aside. "At least N events" is written
 *   `xEvent[…].count() >= N`; `.count() > 0` reads back as "more than 0" and a
 *   one-step chain (Segment Builder's form) as a one-step sequence.
 * - Two rules need two PQL terms (`between`: `f >= a and f <= b`; ignore year:
 *   `f.getMonth() = currentMonth() and f.getDayOfMonth() = currentDayOfMonth()`,
 *   as the editor's helper writes it). In an `and` group their terms are
 *   spliced into the group's chain; elsewhere they are parenthesised.
 */
import type { CmpOp, Direction, TimeUnit } from "@segmentd/pql";
import type { OperatorId } from "./operators.js";

/** Bumped when the shape changes incompatibly (models may be stored by a UI). */
export const MODEL_VERSION = 1;

/** Groups nested deeper than this are kept as PQL blocks (and refused in models). */
export const MAX_GROUP_DEPTH = 32;

export type Combinator = "and" | "or";

/** Where a rule is evaluated: on the profile, or on one event (filters, chain steps). */
export type RuleContext = "profile" | "event";

export interface VisualModel {
  version: typeof MODEL_VERSION;
  /** The query's lambda head `(P) =>`, almost always empty; only blocks can refer to it. */
  params: string[];
  root: Group;
}

export interface Group {
  kind: "group";
  id: string;
  /** `exclude` writes `not (…)`. Root groups are always `include`. */
  mode: "include" | "exclude";
  combinator: Combinator;
  children: Rule[];
}

export type Rule = Group | ConditionRule | EventRule | SequenceRule | SegmentRule | PqlBlock;
/** The rules allowed inside an event filter or a chain step. */
export type EventScopeRule = Group | ConditionRule | PqlBlock;

/** A condition on one field of the profile (or of the event, inside event rules). */
export interface ConditionRule {
  kind: "condition";
  id: string;
  /** A dotted path such as `person.birthDate` or `commerce.order.priceTotal`. */
  field: string;
  operator: OperatorId;
  /** As OPERATORS[operator].operands describes (a list operator takes any number). */
  operands: Operand[];
  /** Text operators only: compare ignoring case (written as the `false` case flag). */
  ignoreCase?: boolean;
}

export type Scalar =
  | { kind: "string"; value: string }
  | { kind: "integer"; value: number }
  | { kind: "double"; value: number }
  | { kind: "boolean"; value: boolean };

/** A time reference of `occurs`: `now`/`today`/…, `this month`/`last week`/…, or `date(y, m, d)`. */
export type TimeRefOperand =
  | { kind: "time"; word: "now" | "today" | "yesterday" | "tomorrow" }
  | { kind: "period"; which: "this" | "last" | "next"; unit: TimeUnit }
  | { kind: "date"; year: number; month: number; day: number };

export type Operand =
  | Scalar
  | TimeRefOperand
  /** `N units` of "in the last / in the next". */
  | { kind: "duration"; amount: number; unit: TimeUnit }
  /** `OP N units before|after|from` of the general relative form. */
  | { kind: "offset"; cmp: CmpOp; amount: number; unit: TimeUnit; direction: Direction };

/** A time condition without its subject: a date operator and its operands (chain WHEN). */
export interface TimeCondition {
  operator: OperatorId;
  operands: Operand[];
}

/** `xEvent[filter].count() OP value`: how many of the profile's events match. */
export interface EventRule {
  kind: "event";
  id: string;
  /** Root group over event fields (`eventType`, `timestamp`, …); empty = every event. */
  filter: Group;
  count: { op: CmpOp; value: number };
}

/** `chain(xEvent, timestamp, [A: WHAT(…) WHEN(…) COUNT(n) WHERE(…), …])`: this, then that. */
export interface SequenceRule {
  kind: "sequence";
  id: string;
  /** The events' timestamp field (the chain's second argument), normally `timestamp`. */
  timestampField: string;
  steps: SequenceStep[];
}

export interface SequenceStep {
  id: string;
  /** The step's label in PQL (`A`, `C0`); not shown to marketers. */
  label: string;
  /** Root group over the event's fields; empty = any event (`WHAT(true)`). */
  what: Group;
  /** When the step's event happened (a date operator without a field). */
  when?: TimeCondition;
  /** At least this many matching events (`COUNT(n)`). */
  count?: number;
  /** An extra condition on the event (`WHERE(…)`); absent or empty = none. */
  where?: Group;
}

/** `inSegment("id")`, or `not inSegment("id")` when `member` is false. */
export interface SegmentRule {
  kind: "segment";
  id: string;
  segmentId: string;
  member: boolean;
}

/** A sub-expression the builder cannot show as rules: read-only, canonical PQL text. */
export interface PqlBlock {
  kind: "pql";
  id: string;
  pql: string;
  /** Where the text was taken from; a block moved to another context would change meaning. */
  context: RuleContext;
}

/** A new empty include group. */
export function emptyGroup(id: string): Group {
  return { kind: "group", id, mode: "include", combinator: "and", children: [] };
}

/** The model of an empty expression (what the builder starts from). */
export function emptyModel(rootId = "root"): VisualModel {
  return { version: MODEL_VERSION, params: [], root: emptyGroup(rootId) };
}

/** Every id-carrying node of the model (groups, rules, steps) in document order. */
export function nodesOf(model: VisualModel): { id: string; kind: string }[] {
  const out: { id: string; kind: string }[] = [];
  const stack: (Rule | SequenceStep)[] = [model.root];
  while (stack.length > 0) {
    const n = stack.pop()!;
    const kids: (Rule | SequenceStep)[] = [];
    if ("kind" in n) {
      out.push({ id: n.id, kind: n.kind });
      if (n.kind === "group") kids.push(...n.children);
      else if (n.kind === "event") kids.push(n.filter);
      else if (n.kind === "sequence") kids.push(...n.steps);
    } else {
      out.push({ id: n.id, kind: "step" });
      kids.push(n.what);
      if (n.where) kids.push(n.where);
    }
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!);
  }
  return out;
}

/** An id not used in the model yet (for rules the UI adds). */
export function freshId(model: VisualModel, prefix = "r"): string {
  const used = new Set(nodesOf(model).map((n) => n.id));
  let i = used.size + 1;
  while (used.has(`${prefix}${i}`)) i++;
  return `${prefix}${i}`;
}

/** How many rules (conditions, events, sequences, memberships) and read-only blocks the model holds. */
export function countRules(model: VisualModel): { rules: number; blocks: number } {
  let rules = 0;
  let blocks = 0;
  for (const n of nodesOf(model)) {
    if (n.kind === "pql") blocks++;
    else if (n.kind !== "group" && n.kind !== "step") rules++;
  }
  return { rules, blocks };
}
