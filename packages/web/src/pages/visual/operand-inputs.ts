/**
 * The inputs of a condition's operands, one kind of input per operand kind:
 * text (with the field's sampled values as suggestions), numbers, true/false,
 * lists of values, time references (now, today, last month, a date),
 * durations ("7 days") and relative offsets. Inputs write into the operands
 * as the marketer types; text that is not yet a value (a number field
 * holding "1.") is reported as a problem and leaves the operand as it was.
 */
import type { CmpOp, Direction, TimeUnit } from "@segmentd/pql";
import { h } from "../../dom.js";
import type { Operand, OperatorId, Scalar, TimeRefOperand, ValueType } from "../../visual/index.js";
import { DIRECTION_LABELS, OPERATORS, TIME_UNIT_LABELS } from "../../visual/index.js";

export interface OperandEnv {
  /** A value changed in place. */
  changed(): void;
  /** An input holds text that is not a value (message), or no longer does (undefined). */
  inputProblem(inputId: string, message: string | undefined): void;
}

export interface OperandOptions {
  idBase: string;
  valueType: ValueType;
  /** Suggestions for text values (the field's sampled examples). */
  examples: (string | number | boolean)[];
  env: OperandEnv;
}

/** Something holding an operator and its operands: a condition, or a sequence step's time. */
export interface OperandHolder {
  operator: OperatorId;
  operands: Operand[];
}

const UNITS: TimeUnit[] = ["minute", "hour", "day", "week", "month", "year"];
const CMP_LABELS: Readonly<Record<CmpOp, string>> = { "<=": "at most", "<": "less than", "=": "exactly", ">=": "at least", ">": "more than", "!=": "not exactly" };
const WORDS = ["now", "today", "yesterday", "tomorrow"] as const;
const PERIOD_UNITS: TimeUnit[] = ["day", "week", "month", "year"];

/** Names of fixed operands, by operator, for labels ("From", "To"). */
function operandNames(operator: OperatorId): string[] {
  switch (operator) {
    case "between":
      return ["Minimum", "Maximum"];
    case "dateBetween":
      return ["From", "To"];
    case "dateOn":
    case "dateBefore":
    case "dateAfter":
      return ["Date"];
    case "relative":
      return ["Offset", "Reference"];
    default:
      return ["Value"];
  }
}

export function operandInputs(holder: OperandHolder, o: OperandOptions): HTMLElement {
  const box = h("span", { class: "v-operands" });
  const paint = () => {
    const spec = OPERATORS[holder.operator].operands;
    if ("list" in spec) {
      box.replaceChildren(listInputs(holder, o, paint));
      return;
    }
    const names = operandNames(holder.operator);
    box.replaceChildren(...holder.operands.map((op, i) => operandInput(op, (next) => (holder.operands[i] = next), `${o.idBase}-o${i}`, names[i] ?? `Value ${i + 1}`, o)));
  };
  paint();
  return box;
}

function operandInput(op: Operand, set: (o: Operand) => void, id: string, name: string, o: OperandOptions): HTMLElement {
  switch (op.kind) {
    case "string":
    case "integer":
    case "double":
    case "boolean":
      return scalarInput(op, set, id, name, o);
    case "time":
    case "period":
    case "date":
      return timeRefInput(op, set, id, name, o.env);
    case "duration":
      return durationInput(op, id, o.env);
    case "offset":
      return offsetInput(op, id, o.env);
  }
}

/** A number as PQL reads it: whole numbers are integers unless written with a point. */
export function parseNumber(text: string): Scalar | undefined {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) {
    const n = Number(t);
    return Number.isSafeInteger(n) ? { kind: "integer", value: n } : undefined;
  }
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? { kind: "double", value: n } : undefined;
}

function numberText(s: Scalar): string {
  if (s.kind === "double" && Number.isInteger(s.value)) return `${s.value}.0`;
  return String(s.value);
}

function labelled(id: string, name: string, control: HTMLElement): HTMLElement {
  return h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, name), control);
}

/** An error line under an input, tied to it with aria-describedby. */
function withProblem(input: HTMLInputElement, id: string, env: OperandEnv): (message: string | undefined) => HTMLElement {
  const err = h("span", { class: "v-input-error", id: `${id}-error`, role: "alert" });
  return (message) => {
    err.textContent = message ?? "";
    input.setAttribute("aria-invalid", String(message !== undefined));
    if (message) input.setAttribute("aria-describedby", err.id);
    else input.removeAttribute("aria-describedby");
    env.inputProblem(id, message);
    return err;
  };
}

function scalarInput(s: Scalar, set: (o: Operand) => void, id: string, name: string, o: OperandOptions): HTMLElement {
  if (s.kind === "boolean") {
    const select = h("select", { id }, h("option", { value: "true", selected: s.value }, "true"), h("option", { value: "false", selected: !s.value }, "false"));
    select.addEventListener("change", () => {
      set({ kind: "boolean", value: select.value === "true" });
      o.env.changed();
    });
    return labelled(id, name, select);
  }
  const numeric = s.kind === "integer" || s.kind === "double";
  const listId = `${id}-examples`;
  const examples = o.examples.filter((x) => (numeric ? typeof x === "number" : typeof x === "string"));
  const input = h("input", {
    id,
    type: "text",
    value: numeric ? numberText(s) : s.value,
    autocomplete: "off",
    spellcheck: "false",
    inputmode: numeric ? "decimal" : undefined,
    list: examples.length > 0 ? listId : undefined,
    class: numeric ? "v-number" : "v-text",
  });
  const report = withProblem(input, id, o.env);
  const err = report(undefined);
  input.addEventListener("input", () => {
    if (!numeric) {
      set({ kind: "string", value: input.value });
      o.env.changed();
      return;
    }
    const n = parseNumber(input.value);
    report(n ? undefined : "Enter a number, such as 3 or 2.5.");
    if (n) {
      set(n);
      o.env.changed();
    }
  });
  return h("span", { class: "v-input" },
    h("label", { for: id, class: "v-input-label" }, name),
    input,
    examples.length > 0 ? h("datalist", { id: listId }, ...examples.map((x) => h("option", { value: String(x) }))) : null,
    err);
}

function listInputs(holder: OperandHolder, o: OperandOptions, repaint: () => void): HTMLElement {
  const items = holder.operands.map((op, i) => {
    const id = `${o.idBase}-o${i}`;
    const remove = h("button", { type: "button", class: "button-ghost v-mini", "aria-label": `Remove value ${i + 1}`, disabled: holder.operands.length <= 1 }, "✕");
    remove.addEventListener("click", () => {
      holder.operands.splice(i, 1);
      o.env.inputProblem(id, undefined);
      repaint();
      o.env.changed();
      document.getElementById(`${o.idBase}-add`)?.focus();
    });
    return h("span", { class: "v-list-item" }, operandInput(op, (next) => (holder.operands[i] = next), id, `Value ${i + 1}`, o), remove);
  });
  const add = h("button", { type: "button", class: "button-secondary v-mini", id: `${o.idBase}-add` }, "+ Value");
  add.addEventListener("click", () => {
    const last = holder.operands[holder.operands.length - 1];
    holder.operands.push(last ? blankLike(last) : { kind: "string", value: "" });
    repaint();
    o.env.changed();
    document.getElementById(`${o.idBase}-o${holder.operands.length - 1}`)?.focus();
  });
  return h("span", { class: "v-list" }, ...items, add);
}

function blankLike(op: Operand): Operand {
  if (op.kind === "integer" || op.kind === "double") return { kind: "integer", value: 0 };
  if (op.kind === "boolean") return { kind: "boolean", value: true };
  return { kind: "string", value: "" };
}

function refKey(r: TimeRefOperand): string {
  switch (r.kind) {
    case "time":
      return `time:${r.word}`;
    case "period":
      return `period:${r.which}:${r.unit}`;
    case "date":
      return "date";
  }
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

function timeRefInput(r: TimeRefOperand, set: (o: Operand) => void, id: string, name: string, env: OperandEnv): HTMLElement {
  const options: [string, string][] = [...WORDS.map((w): [string, string] => [`time:${w}`, w])];
  for (const which of ["this", "last", "next"] as const) for (const unit of PERIOD_UNITS) options.push([`period:${which}:${unit}`, `${which} ${unit}`]);
  options.push(["date", "a date…"]);
  if (!options.some(([k]) => k === refKey(r))) options.push([refKey(r), refKey(r).split(":").slice(1).join(" ")]);
  const select = h("select", { id }, ...options.map(([k, label]) => h("option", { value: k, selected: k === refKey(r) }, label)));
  const dateId = `${id}-date`;
  const today = new Date();
  const d = r.kind === "date" ? r : { year: today.getUTCFullYear(), month: today.getUTCMonth() + 1, day: today.getUTCDate() };
  const date = h("input", { id: dateId, type: "date", value: `${pad(d.year, 4)}-${pad(d.month, 2)}-${pad(d.day, 2)}`, hidden: r.kind !== "date" });
  const dateLabel = h("label", { for: dateId, class: "visually-hidden" }, `${name}: date`);
  const fromDate = (): Operand | undefined => {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date.value);
    return m ? { kind: "date", year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) } : undefined;
  };
  select.addEventListener("change", () => {
    const [kind, a, b] = select.value.split(":");
    date.hidden = kind !== "date";
    if (kind === "time") set({ kind: "time", word: a as (typeof WORDS)[number] });
    else if (kind === "period") set({ kind: "period", which: a as "this" | "last" | "next", unit: b as TimeUnit });
    else set(fromDate() ?? { kind: "date", ...d });
    env.changed();
  });
  date.addEventListener("change", () => {
    const v = fromDate();
    env.inputProblem(dateId, v ? undefined : "Choose a date.");
    if (v) {
      set(v);
      env.changed();
    }
  });
  return h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, name), select, dateLabel, date);
}

function unitSelect(id: string, unit: TimeUnit, onChange: (u: TimeUnit) => void): HTMLSelectElement {
  const units = UNITS.includes(unit) ? UNITS : [...UNITS, unit];
  const select = h("select", { id }, ...units.map((u) => h("option", { value: u, selected: u === unit }, TIME_UNIT_LABELS[u])));
  select.addEventListener("change", () => onChange(select.value as TimeUnit));
  return select;
}

/** A labelled input of a whole number ≥ `min`: `set` gets each valid value; other text is reported. */
export function wholeNumberInput(id: string, label: string, value: number, min: number, env: OperandEnv, set: (n: number) => void): HTMLElement {
  const input = h("input", { id, type: "text", inputmode: "numeric", value: String(value), autocomplete: "off", class: "v-number" });
  const report = withProblem(input, id, env);
  const err = report(undefined);
  const message = min === 0 ? "Enter a whole number." : `Enter a whole number from ${min}.`;
  input.addEventListener("input", () => {
    const t = input.value.trim();
    const n = /^\d+$/.test(t) ? Number(t) : NaN;
    const ok = Number.isSafeInteger(n) && n >= min;
    report(ok ? undefined : message);
    if (ok) set(n);
  });
  return h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, label), input, err);
}

function amountInput(id: string, amount: number, env: OperandEnv, set: (n: number) => void): HTMLElement {
  return wholeNumberInput(id, "Amount", amount, 0, env, (n) => {
    set(n);
    env.changed();
  });
}

function durationInput(op: Operand & { kind: "duration" }, id: string, env: OperandEnv): HTMLElement {
  return h("span", { class: "v-inline" },
    amountInput(`${id}-amount`, op.amount, env, (n) => (op.amount = n)),
    labelled(`${id}-unit`, "Unit", unitSelect(`${id}-unit`, op.unit, (u) => {
      op.unit = u;
      env.changed();
    })));
}

function offsetInput(op: Operand & { kind: "offset" }, id: string, env: OperandEnv): HTMLElement {
  const cmp = h("select", { id: `${id}-cmp` }, ...(Object.keys(CMP_LABELS) as CmpOp[]).map((c) => h("option", { value: c, selected: c === op.cmp }, CMP_LABELS[c])));
  cmp.addEventListener("change", () => {
    op.cmp = cmp.value as CmpOp;
    env.changed();
  });
  const dir = h("select", { id: `${id}-dir` }, ...(Object.keys(DIRECTION_LABELS) as Direction[]).map((d) => h("option", { value: d, selected: d === op.direction }, DIRECTION_LABELS[d])));
  dir.addEventListener("change", () => {
    op.direction = dir.value as Direction;
    env.changed();
  });
  return h("span", { class: "v-inline" },
    labelled(`${id}-cmp`, "Comparison", cmp),
    amountInput(`${id}-amount`, op.amount, env, (n) => (op.amount = n)),
    labelled(`${id}-unit`, "Unit", unitSelect(`${id}-unit`, op.unit, (u) => {
      op.unit = u;
      env.changed();
    })),
    labelled(`${id}-dir`, "Direction", dir));
}
