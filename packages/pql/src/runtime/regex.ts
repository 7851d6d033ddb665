/**
 * `matches` and `regexGroup`: Java (`java.util.regex`) syntax, find semantics
 * (the pattern may match anywhere; anchor with ^/$), pql.md §7.5 / OQ-17.
 *
 * Safety strategy (hostile patterns and subjects must never hang the process):
 * segmentd does NOT hand patterns to a backtracking engine. It parses the Java
 * pattern itself and runs it on a Pike VM (Thompson NFA simulation with
 * captures), whose time is O(pattern size × subject length) whatever the
 * pattern: `(a+)+$`, `(a|a)*b` or `.*.*.*x` cost the same as `a`. Consequently:
 * - constructs a linear-time engine cannot run are rejected: backreferences
 *   (`\1`, `\k<n>`) and lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`);
 * - Java-only syntax is rejected with a clear message: possessive quantifiers,
 *   atomic groups `(?>`, `\A \Z \z \G \R \X \h \H \v \V`, `\p{javaLowerCase}` and
 *   other `java*` / `In*` classes, character-class union/intersection, inline
 *   flags anywhere but the start, flags other than i, m, s, u;
 * - the compiled program is capped at MAX_PROGRAM instructions (counted
 *   repetitions are expanded) and subjects longer than MAX_SUBJECT UTF-16 code
 *   units are not searched (matches → false, regexGroup → null);
 * - O(pattern × subject) at those maxima is still seconds of one event loop,
 *   so each match has a budget of MAX_STEPS units of work: a match that needs
 *   more gives up with the same answer as an unsearched subject. For
 *   `matches`, ordinary patterns need 1–15 units per subject character, so
 *   they finish inside the budget for any subject up to MAX_SUBJECT;
 *   regexGroup's capturing VM needs 10–60, so it may give up on subjects of
 *   more than ~4,000 characters. ~5 ms is the most one match can cost.
 * Compiled patterns are cached (bounded LRU), so a field-valued pattern is
 * parsed once per distinct value.
 */

import { MAX_PATTERN, Parser, RegexSyntaxError, type RegexValidation } from "./regex-parse.js";
import { PikeRegex, compileProgram, literalText, toJs } from "./regex-vm.js";

export { MAX_PATTERN, MAX_PROGRAM, MAX_STEPS, MAX_SUBJECT } from "./regex-parse.js";
export type { RegexErrorCode, RegexValidation, SafeRegex } from "./regex-parse.js";

const cache = new Map<string, RegexValidation>();
const CACHE_LIMIT = 500;

/**
 * Validate a Java-syntax pattern and compile it for linear-time matching.
 * The result is cached; `check` uses the same function to report diagnostics.
 */
export function validateJavaRegex(pattern: string): RegexValidation {
  const hit = cache.get(pattern);
  if (hit !== undefined) {
    // Refresh its position so the cache evicts the least recently used pattern.
    cache.delete(pattern);
    cache.set(pattern, hit);
    return hit;
  }
  const result = compilePattern(pattern);
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  cache.set(pattern, result);
  return result;
}

function compilePattern(pattern: string): RegexValidation {
  if (pattern.length > MAX_PATTERN)
    return { ok: false, code: "PQL_REGEX_TOO_LARGE", message: `pattern longer than ${MAX_PATTERN} characters`, offset: 0 };
  try {
    const parser = new Parser(pattern);
    const tree = parser.parse();
    const prog = compileProgram(tree);
    const flags = parser.flags;
    const jsFlags = `u${flags.i ? "i" : ""}${flags.m ? "m" : ""}${flags.s ? "s" : ""}`;
    const regex = new PikeRegex(pattern, toJs(tree), jsFlags, parser.groupCount, prog, flags.m, literalText(tree, flags, pattern));
    return { ok: true, regex };
  } catch (e) {
    if (e instanceof RegexSyntaxError) return { ok: false, code: e.code, message: `invalid regular expression: ${e.message}`, offset: e.offset };
    throw e;
  }
}
