/**
 * The one regex rule `check` adds to the runtime's validator
 * (runtime/regex.ts `validateJavaRegex`, which decides what is invalid or
 * Java-only): a repeated group that itself contains an unbounded repetition,
 * such as `(a+)+` or `(\w+\s?)*`. segmentd's own matcher runs those in linear
 * time, but the batch engine's SQL dialects use backtracking engines where they
 * can take exponential time, so a definition must not contain them.
 *
 * This is a scanner, not a regex parser: it follows escapes, character
 * classes, groups and quantifiers, which is all the rule needs. It is only run
 * on patterns the runtime validator accepted.
 */

/** Does `pattern` repeat, without bound, a group that contains an unbounded repetition? */
export function hasNestedUnboundedRepetition(pattern: string): boolean {
  // Per open group: does it contain an unbounded quantifier (at any depth)?
  const stack: boolean[] = [false];
  // The atom a following quantifier would repeat: does it contain an unbounded quantifier?
  let last: boolean | null = null;
  let i = 0;
  const n = pattern.length;
  while (i < n) {
    const c = pattern[i]!;
    if (c === "\\") {
      const e = pattern[i + 1];
      if ((e === "p" || e === "P") && pattern[i + 2] === "{") {
        const close = pattern.indexOf("}", i);
        i = close < 0 ? n : close + 1;
      } else if (e === "Q") {
        const close = pattern.indexOf("\\E", i + 2);
        i = close < 0 ? n : close + 2;
      } else {
        i += 2;
      }
      last = false;
      continue;
    }
    if (c === "[") {
      i = classEnd(pattern, i) + 1;
      last = false;
      continue;
    }
    if (c === "(") {
      let j = i + 1;
      if (pattern[j] === "?") {
        // `(?i)`: inline flags, not a group; `(?:`, `(?<name>`, `(?i:` ...: group prefixes.
        const flags = /^\?[a-zA-Z-]*\)/.exec(pattern.slice(j, j + 20));
        if (flags) {
          i = j + flags[0].length;
          last = null;
          continue;
        }
        const prefix = /^\?(<[A-Za-z][A-Za-z0-9]*>|<=|<!|[:=!>]|[a-zA-Z-]+:)/.exec(pattern.slice(j, j + 40));
        j += prefix ? prefix[0].length : 1;
      }
      stack.push(false);
      last = null;
      i = j;
      continue;
    }
    if (c === ")") {
      const inner = stack.length > 1 ? stack.pop()! : false;
      stack[stack.length - 1] ||= inner;
      last = inner;
      i++;
      continue;
    }
    if (c === "|") {
      last = null;
      i++;
      continue;
    }
    const q = quantifierAt(pattern, i);
    if (q) {
      if (q.unbounded && last === true) return true;
      stack[stack.length - 1] ||= q.unbounded;
      i += q.length;
      // Lazy (`?`) and possessive (`+`) suffixes do not change what is repeated.
      if (pattern[i] === "?" || pattern[i] === "+") i++;
      last = null;
      continue;
    }
    last = false;
    i++;
  }
  return false;
}

/** Index of the `]` closing the class opened at `start` (Java classes may nest), or the last index. */
function classEnd(p: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < p.length) {
    const c = p[i]!;
    if (c === "\\") {
      i += 2;
      continue;
    }
    if (c === "[") {
      depth++;
      i++;
      // A `]` right after `[` or `[^` is a literal member.
      if (p[i] === "^") i++;
      if (p[i] === "]") i++;
      continue;
    }
    if (c === "]" && --depth === 0) return i;
    i++;
  }
  return p.length - 1;
}

/** The quantifier at `i`: its length and whether it is unbounded. */
function quantifierAt(p: string, i: number): { length: number; unbounded: boolean } | undefined {
  const c = p[i];
  if (c === "*" || c === "+") return { length: 1, unbounded: true };
  if (c === "?") return { length: 1, unbounded: false };
  if (c !== "{") return undefined;
  const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(i, i + 40));
  if (!m) return undefined;
  return { length: m[0].length, unbounded: m[2] !== undefined && m[3] === "" };
}
