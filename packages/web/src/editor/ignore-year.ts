/**
 * The builder's "ignore year" helper: a condition that matches a date field
 * on today's month and day, whatever its year (birthdays, anniversaries).
 * decisions.md §1: such a constraint is written with getMonth() /
 * getDayOfMonth() against currentMonth() / currentDayOfMonth(), and makes the
 * audience batch-only — the builder then shows that reason next to Edge.
 */

/** Date fields of the XDM profile a marketer most often uses this way. */
export const COMMON_DATE_FIELDS: readonly string[] = ["person.birthDate", "loyalty.joinDate", "person.anniversaryDate"];

const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

export function isFieldPath(text: string): boolean {
  return PATH.test(text);
}

export function ignoreYearCondition(field: string): string {
  if (!isFieldPath(field)) throw new Error(`"${field}" is not a field path such as person.birthDate`);
  return `${field}.getMonth() = currentMonth() and ${field}.getDayOfMonth() = currentDayOfMonth()`;
}

/** The expression with the condition added: alone when empty, else joined with `and` (the existing text parenthesised). */
export function withIgnoreYear(expression: string, field: string): string {
  const cond = ignoreYearCondition(field);
  const current = expression.trim();
  return current === "" ? cond : `(${current}) and ${cond}`;
}
