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

/** The most VM instructions a compiled pattern may have (PQL_REGEX_TOO_LARGE above). */
export const MAX_PROGRAM = 2000;
/** The longest subject searched, UTF-16 code units: a longer one never matches. */
export const MAX_SUBJECT = 16_384;
/** The longest pattern, UTF-16 code units (PQL_REGEX_TOO_LARGE above). */
export const MAX_PATTERN = 4096;
/**
 * The work one match may do, in units of about one VM thread step: a thread
 * visiting an instruction is 1 (6 when capturing groups for regexGroup), a
 * character test 1 to a few hundred by its kind (classes, Unicode properties
 * and case folding cost more). A match that would need more gives up:
 * matches → false, regexGroup → null. Chosen so that one match stays under
 * ~5 ms whatever the pattern and subject.
 */
export const MAX_STEPS = 250_000;
// A step of the capturing VM allocates threads and copies captures.
const EXEC_STEP_COST = 6;
// ASCII answer tables per pattern (128 bytes each).
const MAX_TABLES = 64;

export type RegexErrorCode = "PQL_REGEX_INVALID" | "PQL_REGEX_UNSUPPORTED" | "PQL_REGEX_TOO_LARGE";

export interface SafeRegex {
  /** The pattern as written (Java syntax). */
  readonly pattern: string;
  /** An equivalent JavaScript RegExp source and flags (for display and other engines). */
  readonly jsSource: string;
  readonly jsFlags: string;
  /** Number of capture groups. */
  readonly groups: number;
  /** Find semantics: does the pattern match somewhere in s? */
  test(s: string): boolean;
  /** The capture groups of the first (leftmost) match, or null. Index 0 is the whole match. */
  exec(s: string): (string | null)[] | null;
}

export type RegexValidation =
  | { ok: true; regex: SafeRegex }
  | { ok: false; code: RegexErrorCode; message: string; offset: number };

// ---------------------------------------------------------------------------
// Parsing

type CharTest = (cp: number) => boolean;

type RNode =
  | { t: "char"; test: CharTest; js: string; cost: number }
  | { t: "assert"; kind: "^" | "$" | "b" | "B" }
  | { t: "group"; index: number | null; body: RNode }
  | { t: "alt"; alts: RNode[] }
  | { t: "seq"; items: RNode[] }
  | { t: "rep"; body: RNode; min: number; max: number; lazy: boolean };

class RegexSyntaxError extends Error {
  constructor(
    readonly code: RegexErrorCode,
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

interface Flags {
  i: boolean;
  m: boolean;
  s: boolean;
}

const isWordCp = (c: number) =>
  (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isDigitCp = (c: number) => c >= 48 && c <= 57;
// Java's \s without UNICODE_CHARACTER_CLASS: [ \t\n\x0B\f\r]
const isSpaceCp = (c: number) => c === 32 || (c >= 9 && c <= 13);
const isLineTerminator = (c: number) => c === 10 || c === 13 || c === 0x85 || c === 0x2028 || c === 0x2029;

const POSIX: Record<string, [CharTest, string]> = {
  Lower: [(c) => c >= 97 && c <= 122, "a-z"],
  Upper: [(c) => c >= 65 && c <= 90, "A-Z"],
  ASCII: [(c) => c <= 0x7f, "\\x00-\\x7F"],
  Alpha: [(c) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90), "a-zA-Z"],
  Digit: [isDigitCp, "0-9"],
  Alnum: [(c) => isDigitCp(c) || (c >= 97 && c <= 122) || (c >= 65 && c <= 90), "a-zA-Z0-9"],
  Punct: [(c) => (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126), "!-\\/:-@\\[-`{-~"],
  Graph: [(c) => c >= 33 && c <= 126, "!-~"],
  Print: [(c) => c >= 32 && c <= 126, " -~"],
  Blank: [(c) => c === 32 || c === 9, " \\t"],
  Cntrl: [(c) => c < 32 || c === 127, "\\x00-\\x1F\\x7F"],
  XDigit: [(c) => isDigitCp(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102), "0-9a-fA-F"],
  Space: [isSpaceCp, " \\t\\n\\x0B\\f\\r"],
};

function hex(cp: number): string {
  return `\\u{${cp.toString(16)}}`;
}

// Step-budget units of one character test (one unit ≈ one VM thread step):
// a Unicode property is a RegExp call; case folding converts the code point
// both ways and runs the test up to three times.
const PROPERTY_COST = 8;
const FOLD_COST = 12;
const foldCost = (cost: number) => 3 * cost + FOLD_COST;

/** Case-insensitive test: the code point or its simple lower/upper case variants. */
function foldTest(test: CharTest): CharTest {
  return (cp) => {
    if (test(cp)) return true;
    // ASCII case variants are ASCII: no string conversion needed.
    if (cp < 128) return (cp >= 65 && cp <= 90 && test(cp + 32)) || (cp >= 97 && cp <= 122 && test(cp - 32));
    const ch = String.fromCodePoint(cp);
    const lo = ch.toLowerCase();
    const up = ch.toUpperCase();
    return (lo.length <= 2 && test(lo.codePointAt(0)!)) || (up.length <= 2 && test(up.codePointAt(0)!));
  };
}

class Parser {
  private pos = 0;
  groupCount = 0;
  readonly flags: Flags = { i: false, m: false, s: false };

  constructor(private readonly src: string) {}

  private err(code: RegexErrorCode, msg: string, at = this.pos): never {
    throw new RegexSyntaxError(code, msg, at);
  }

  parse(): RNode {
    this.leadingFlags();
    const node = this.alternation();
    if (this.pos < this.src.length) this.err("PQL_REGEX_INVALID", "unmatched ')'");
    return node;
  }

  private leadingFlags(): void {
    const re = /^\(\?([a-zA-Z]+)\)/;
    for (;;) {
      const m = re.exec(this.src.slice(this.pos));
      if (m === null) return;
      for (const f of m[1]!) {
        if (f === "i" || f === "m" || f === "s") this.flags[f] = true;
        else if (f === "u") continue; // UNICODE_CASE: case folding is already Unicode-aware
        else this.err("PQL_REGEX_UNSUPPORTED", `inline flag '${f}' is not supported (only i, m, s, u)`, this.pos + 2);
      }
      this.pos += m[0].length;
    }
  }

  private peek(): string | undefined {
    return this.src[this.pos];
  }

  private alternation(): RNode {
    const alts = [this.sequence()];
    while (this.peek() === "|") {
      this.pos++;
      alts.push(this.sequence());
    }
    return alts.length === 1 ? alts[0]! : { t: "alt", alts };
  }

  private sequence(): RNode {
    const items: RNode[] = [];
    for (;;) {
      const c = this.peek();
      if (c === undefined || c === "|" || c === ")") break;
      const atomStart = this.pos;
      const atom = this.atom();
      if (atom === null) continue;
      items.push(this.quantified(atom, atomStart));
    }
    return items.length === 1 ? items[0]! : { t: "seq", items };
  }

  private quantified(atom: RNode, atomStart: number): RNode {
    let node = atom;
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number;
      if (c === "*") [min, max] = [0, Infinity];
      else if (c === "+") [min, max] = [1, Infinity];
      else if (c === "?") [min, max] = [0, 1];
      else if (c === "{") {
        const m = /^\{(\d{1,6})(?:(,)(\d{0,6}))?\}/.exec(this.src.slice(this.pos));
        if (m === null) this.err("PQL_REGEX_INVALID", "'{' does not start a valid repetition such as {2} or {2,5}");
        min = Number(m[1]);
        max = m[2] === undefined ? min : m[3] === "" ? Infinity : Number(m[3]);
        if (max < min) this.err("PQL_REGEX_INVALID", "repetition maximum is smaller than its minimum");
        if (min > MAX_PROGRAM || (max !== Infinity && max > MAX_PROGRAM))
          this.err("PQL_REGEX_TOO_LARGE", `repetition count above ${MAX_PROGRAM}`);
        this.pos += m[0].length - 1;
      } else return node;
      if (node.t === "assert") this.err("PQL_REGEX_INVALID", "nothing to repeat", atomStart);
      if (node.t === "rep") this.err("PQL_REGEX_INVALID", "a quantifier cannot follow another quantifier");
      this.pos++;
      let lazy = false;
      if (this.peek() === "?") {
        lazy = true;
        this.pos++;
      } else if (this.peek() === "+") {
        this.err("PQL_REGEX_UNSUPPORTED", "possessive quantifiers (such as a*+) are Java-only and not supported");
      }
      node = { t: "rep", body: node, min, max, lazy };
    }
  }

  private charNode(test: CharTest, js: string, cost = 1): RNode {
    return this.flags.i ? { t: "char", test: foldTest(test), js, cost: foldCost(cost) } : { t: "char", test, js, cost };
  }

  private literal(cp: number): RNode {
    return this.charNode((c) => c === cp, hex(cp));
  }

  /** One atom, or null for constructs that produce nothing (`\Q\E`). */
  private atom(): RNode | null {
    const c = this.src[this.pos]!;
    const start = this.pos;
    switch (c) {
      case "(":
        return this.group();
      case "[":
        return this.charClass();
      case ".": {
        this.pos++;
        const dotAll = this.flags.s;
        return { t: "char", test: dotAll ? () => true : (cp) => !isLineTerminator(cp), js: dotAll ? "[^]" : ".", cost: 1 };
      }
      case "^":
        this.pos++;
        return { t: "assert", kind: "^" };
      case "$":
        this.pos++;
        return { t: "assert", kind: "$" };
      case "*":
      case "+":
      case "?":
        this.err("PQL_REGEX_INVALID", "nothing to repeat");
        break;
      case "{":
        this.err("PQL_REGEX_INVALID", "nothing to repeat");
        break;
      case "\\":
        return this.escape(false);
    }
    const cp = this.src.codePointAt(start)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return this.literal(cp);
  }

  private group(): RNode {
    const start = this.pos;
    this.pos++;
    let index: number | null = null;
    if (this.src.startsWith("?", this.pos)) {
      const rest = this.src.slice(this.pos + 1);
      if (rest.startsWith(":")) this.pos += 2;
      else if (rest.startsWith(">"))
        this.err("PQL_REGEX_UNSUPPORTED", "atomic groups (?>...) are Java-only and not supported", start);
      else if (/^(=|!|<=|<!)/.test(rest))
        this.err("PQL_REGEX_UNSUPPORTED", "lookaround is not supported (segmentd matches regexes in linear time)", start);
      else if (/^<[A-Za-z][A-Za-z0-9]*>/.test(rest)) {
        this.pos += rest.indexOf(">") + 2;
        index = ++this.groupCount;
      } else if (/^[a-zA-Z-]*[:)]/.test(rest))
        this.err("PQL_REGEX_UNSUPPORTED", "inline flags are supported only at the very start of the pattern", start);
      else this.err("PQL_REGEX_INVALID", "unknown group construct '(?'", start);
    } else index = ++this.groupCount;
    const body = this.alternation();
    if (this.peek() !== ")") this.err("PQL_REGEX_INVALID", "unclosed group", start);
    this.pos++;
    return { t: "group", index, body };
  }

  private charClass(): RNode {
    const start = this.pos;
    this.pos++;
    let negated = false;
    if (this.peek() === "^") {
      negated = true;
      this.pos++;
    }
    const tests: CharTest[] = [];
    const js: string[] = [];
    let cost = 1;
    let first = true;
    for (;;) {
      const c = this.peek();
      if (c === undefined) this.err("PQL_REGEX_INVALID", "unclosed character class", start);
      if (c === "]" && !first) break;
      first = false;
      if (c === "[") this.err("PQL_REGEX_UNSUPPORTED", "nested character classes (Java union) are not supported");
      if (c === "&" && this.src[this.pos + 1] === "&")
        this.err("PQL_REGEX_UNSUPPORTED", "character class intersection (&&) is Java-only and not supported");
      const lo = this.classAtom();
      if (typeof lo !== "number") {
        tests.push(lo.test);
        js.push(lo.js);
        cost += lo.cost;
        continue;
      }
      cost++;
      if (this.peek() === "-" && this.src[this.pos + 1] !== "]" && this.src[this.pos + 1] !== undefined) {
        this.pos++;
        const hi = this.classAtom();
        if (typeof hi !== "number") this.err("PQL_REGEX_INVALID", "invalid character range");
        if (hi < lo) this.err("PQL_REGEX_INVALID", "character range out of order");
        tests.push((cp) => cp >= lo && cp <= hi);
        js.push(`${hex(lo)}-${hex(hi)}`);
      } else {
        tests.push((cp) => cp === lo);
        js.push(hex(lo));
      }
    }
    this.pos++;
    const any: CharTest = (cp) => {
      for (const t of tests) if (t(cp)) return true;
      return false;
    };
    const folded = this.flags.i ? foldTest(any) : any;
    return {
      t: "char",
      test: negated ? (cp) => !folded(cp) : folded,
      js: `[${negated ? "^" : ""}${js.join("")}]`,
      cost: this.flags.i ? foldCost(cost) : cost,
    };
  }

  /** A code point, or a predefined class, inside [...]. */
  private classAtom(): number | { test: CharTest; js: string; cost: number } {
    if (this.peek() === "\\") {
      const n = this.escape(true);
      if (n === null || n.t !== "char") this.err("PQL_REGEX_INVALID", "invalid escape in character class");
      const single = /^\\u\{([0-9a-f]+)\}$/.exec(n.js);
      if (single) return parseInt(single[1]!, 16);
      return { test: n.test, js: n.js.startsWith("[") ? n.js.slice(1, -1) : n.js, cost: n.cost };
    }
    const cp = this.src.codePointAt(this.pos)!;
    this.pos += cp > 0xffff ? 2 : 1;
    return cp;
  }

  /** A backslash escape; inClass limits it to character escapes. Returns null for `\Q\E` (empty). */
  private escape(inClass: boolean): RNode | null {
    const start = this.pos;
    this.pos++;
    const c = this.src[this.pos];
    if (c === undefined) this.err("PQL_REGEX_INVALID", "trailing backslash", start);
    this.pos++;
    const raw = (cp: number): RNode => ({ t: "char", test: (x) => x === cp, js: hex(cp), cost: 1 });
    const lit = (cp: number): RNode => (inClass ? raw(cp) : this.literal(cp));
    const cls = (test: CharTest, js: string): RNode => ({ t: "char", test, js, cost: 1 });
    switch (c) {
      case "d":
        return cls(isDigitCp, "[0-9]");
      case "D":
        return cls((x) => !isDigitCp(x), "[^0-9]");
      case "w":
        return cls(isWordCp, "[A-Za-z0-9_]");
      case "W":
        return cls((x) => !isWordCp(x), "[^A-Za-z0-9_]");
      case "s":
        return cls(isSpaceCp, "[ \\t\\n\\x0B\\f\\r]");
      case "S":
        return cls((x) => !isSpaceCp(x), "[^ \\t\\n\\x0B\\f\\r]");
      case "t":
        return lit(9);
      case "n":
        return lit(10);
      case "r":
        return lit(13);
      case "f":
        return lit(12);
      case "a":
        return lit(7);
      case "e":
        return lit(27);
      case "0": {
        const m = /^[0-7]{1,3}/.exec(this.src.slice(this.pos));
        if (m === null) this.err("PQL_REGEX_INVALID", "\\0 must be followed by octal digits", start);
        const v = parseInt(m[0].length === 3 && m[0][0]! > "3" ? m[0].slice(0, 2) : m[0], 8);
        this.pos += m[0].length === 3 && m[0][0]! > "3" ? 2 : m[0].length;
        return lit(v);
      }
      case "x": {
        const m = /^(?:([0-9a-fA-F]{2})|\{([0-9a-fA-F]{1,6})\})/.exec(this.src.slice(this.pos));
        if (m === null) this.err("PQL_REGEX_INVALID", "invalid \\x escape", start);
        this.pos += m[0].length;
        const v = parseInt(m[1] ?? m[2]!, 16);
        if (v > 0x10ffff) this.err("PQL_REGEX_INVALID", "code point out of range", start);
        return lit(v);
      }
      case "u": {
        const m = /^[0-9a-fA-F]{4}/.exec(this.src.slice(this.pos));
        if (m === null) this.err("PQL_REGEX_INVALID", "invalid \\u escape", start);
        this.pos += 4;
        return lit(parseInt(m[0], 16));
      }
      case "c": {
        const ch = this.src.charCodeAt(this.pos);
        if (Number.isNaN(ch)) this.err("PQL_REGEX_INVALID", "invalid \\c escape", start);
        this.pos++;
        return lit(ch ^ 64);
      }
      case "p":
      case "P":
        return this.property(c === "P", start);
      case "b":
      case "B":
        if (inClass) this.err("PQL_REGEX_INVALID", `\\${c} is not allowed in a character class`, start);
        return { t: "assert", kind: c };
      case "Q": {
        if (inClass) this.err("PQL_REGEX_UNSUPPORTED", "\\Q inside a character class is not supported", start);
        const end = this.src.indexOf("\\E", this.pos);
        const text = end < 0 ? this.src.slice(this.pos) : this.src.slice(this.pos, end);
        this.pos = end < 0 ? this.src.length : end + 2;
        const items = [...text].map((ch) => this.literal(ch.codePointAt(0)!));
        return items.length === 0 ? null : items.length === 1 ? items[0]! : { t: "seq", items };
      }
      case "A":
      case "Z":
      case "z":
      case "G":
        this.err("PQL_REGEX_UNSUPPORTED", `\\${c} is Java-only and not supported; use ^ and $`, start);
        break;
      case "R":
      case "X":
      case "h":
      case "H":
      case "v":
      case "V":
      case "N":
      case "K":
        this.err("PQL_REGEX_UNSUPPORTED", `\\${c} is not supported`, start);
        break;
      case "k":
        this.err("PQL_REGEX_UNSUPPORTED", "backreferences are not supported (segmentd matches regexes in linear time)", start);
        break;
    }
    if (/[1-9]/.test(c))
      this.err("PQL_REGEX_UNSUPPORTED", "backreferences are not supported (segmentd matches regexes in linear time)", start);
    if (/[A-Za-z0-9]/.test(c)) this.err("PQL_REGEX_INVALID", `unknown escape \\${c}`, start);
    // Java lets any other character be escaped to stand for itself.
    const cp = this.src.codePointAt(this.pos - 1)!;
    if (cp > 0xffff) this.pos++;
    return lit(cp);
  }

  private property(negated: boolean, start: number): RNode {
    let name: string;
    if (this.peek() === "{") {
      const end = this.src.indexOf("}", this.pos);
      if (end < 0) this.err("PQL_REGEX_INVALID", "unclosed \\p{...}", start);
      name = this.src.slice(this.pos + 1, end);
      this.pos = end + 1;
    } else {
      name = this.src[this.pos] ?? "";
      this.pos++;
    }
    let test: CharTest;
    let js: string;
    let cost = PROPERTY_COST;
    const posix = POSIX[name];
    if (posix !== undefined) [test, js, cost] = [posix[0], `[${posix[1]}]`, 1];
    else if (name.startsWith("java") || name.startsWith("In"))
      this.err("PQL_REGEX_UNSUPPORTED", `\\p{${name}} is Java-only and not supported`, start);
    else {
      const jsName = name.startsWith("Is") ? `Script=${name.slice(2)}` : name;
      let re: RegExp;
      try {
        if (!/^[A-Za-z_=]+$/.test(jsName)) throw new Error("bad name");
        re = new RegExp(`^\\p{${jsName}}$`, "u");
      } catch {
        this.err("PQL_REGEX_INVALID", `unknown character property \\p{${name}}`, start);
      }
      test = (cp) => re.test(String.fromCodePoint(cp));
      js = `\\p{${jsName}}`;
    }
    if (negated) {
      const inner = test;
      test = (cp) => !inner(cp);
      js = js.startsWith("[") ? `[^${js.slice(1)}` : `\\P${js.slice(2)}`;
    }
    return this.flags.i ? { t: "char", test: foldTest(test), js, cost: foldCost(cost) } : { t: "char", test, js, cost };
  }
}

// ---------------------------------------------------------------------------
// Compilation to a Pike VM program

const enum Op {
  Char,
  Split,
  Jmp,
  Save,
  Assert,
  Match,
}

type CharInst = { op: Op.Char; test: CharTest; cost: number };
type Inst =
  | CharInst
  | { op: Op.Split; x: number; y: number }
  | { op: Op.Jmp; x: number }
  | { op: Op.Save; slot: number }
  | { op: Op.Assert; kind: "^" | "$" | "b" | "B" }
  | { op: Op.Match };

class Compiler {
  readonly prog: Inst[] = [];

  private emit(i: Inst): number {
    if (this.prog.length >= MAX_PROGRAM)
      throw new RegexSyntaxError("PQL_REGEX_TOO_LARGE", `pattern is too large (over ${MAX_PROGRAM} instructions)`, 0);
    this.prog.push(i);
    return this.prog.length - 1;
  }

  // Recursion depth is bounded by the pattern's nesting, itself bounded by MAX_PATTERN.
  gen(n: RNode): void {
    switch (n.t) {
      case "char":
        this.emit({ op: Op.Char, test: n.test, cost: n.cost });
        return;
      case "assert":
        this.emit({ op: Op.Assert, kind: n.kind });
        return;
      case "group":
        if (n.index !== null) this.emit({ op: Op.Save, slot: 2 * n.index });
        this.gen(n.body);
        if (n.index !== null) this.emit({ op: Op.Save, slot: 2 * n.index + 1 });
        return;
      case "seq":
        for (const it of n.items) this.gen(it);
        return;
      case "alt": {
        const jumps: number[] = [];
        for (let i = 0; i < n.alts.length; i++) {
          if (i < n.alts.length - 1) {
            const split = this.emit({ op: Op.Split, x: 0, y: 0 });
            (this.prog[split] as { x: number }).x = split + 1;
            this.gen(n.alts[i]!);
            jumps.push(this.emit({ op: Op.Jmp, x: 0 }));
            (this.prog[split] as { y: number }).y = this.prog.length;
          } else this.gen(n.alts[i]!);
        }
        for (const j of jumps) (this.prog[j] as { x: number }).x = this.prog.length;
        return;
      }
      case "rep": {
        for (let i = 0; i < n.min; i++) this.gen(n.body);
        if (n.max === Infinity) {
          const split = this.emit({ op: Op.Split, x: 0, y: 0 });
          this.gen(n.body);
          this.emit({ op: Op.Jmp, x: split });
          this.setSplit(split, split + 1, this.prog.length, n.lazy);
        } else {
          const splits: number[] = [];
          for (let i = n.min; i < n.max; i++) {
            splits.push(this.emit({ op: Op.Split, x: 0, y: 0 }));
            this.gen(n.body);
          }
          for (const s of splits) this.setSplit(s, s + 1, this.prog.length, n.lazy);
        }
        return;
      }
    }
  }

  private setSplit(at: number, body: number, exit: number, lazy: boolean): void {
    const s = this.prog[at] as { x: number; y: number };
    s.x = lazy ? exit : body;
    s.y = lazy ? body : exit;
  }
}

/** JavaScript source equivalent of a parsed node (for display / other engines). */
function toJs(n: RNode): string {
  switch (n.t) {
    case "char":
      return n.js;
    case "assert":
      return n.kind === "^" ? "^" : n.kind === "$" ? "$" : `\\${n.kind}`;
    case "group":
      return `(${n.index === null ? "?:" : ""}${toJs(n.body)})`;
    case "seq":
      return n.items.map(toJs).join("");
    case "alt":
      return n.alts.map(toJs).join("|");
    case "rep": {
      const q = n.min === 0 && n.max === Infinity ? "*" : n.min === 1 && n.max === Infinity ? "+" : n.min === 0 && n.max === 1 ? "?" : `{${n.min},${n.max === Infinity ? "" : n.max}}`;
      const body = n.body.t === "seq" || n.body.t === "alt" ? `(?:${toJs(n.body)})` : toJs(n.body);
      return body + q + (n.lazy ? "?" : "");
    }
  }
}

// ---------------------------------------------------------------------------
// The Pike VM

class PikeRegex implements SafeRegex {
  private readonly nslots: number;
  private readonly mark: Int32Array;
  private generation = 0;
  /** Per Char instruction, its ASCII answers: 0 not yet known, 1 no, 2 yes. */
  private readonly tables: (Uint8Array | undefined)[] = [];
  /** Budget units spent by the current match (see MAX_STEPS). */
  private steps = 0;
  /** Budget units of allocating or copying one set of captures. */
  private readonly copyCost: number;

  constructor(
    readonly pattern: string,
    readonly jsSource: string,
    readonly jsFlags: string,
    readonly groups: number,
    private readonly prog: Inst[],
    private readonly multiline: boolean,
    /** A pattern that is one literal string: searched with indexOf. */
    private readonly literal: string | null,
  ) {
    this.nslots = 2 * (groups + 1);
    // Remembered ASCII answers of the costlier tests (classes, properties, case
    // folding), one table per distinct test, a bounded number per pattern.
    const byTest = new Map<CharTest, Uint8Array>();
    prog.forEach((inst, pc) => {
      if (inst.op !== Op.Char || inst.cost <= 1) return;
      let table = byTest.get(inst.test);
      if (table === undefined && byTest.size < MAX_TABLES) byTest.set(inst.test, (table = new Uint8Array(128)));
      if (table !== undefined) this.tables[pc] = table;
    });
    // V8 keeps typed arrays of up to 64 bytes on its heap; larger ones cost an external allocation.
    this.copyCost = this.nslots <= 16 ? 4 : 40 + (this.nslots >>> 1);
    this.mark = new Int32Array(prog.length);
    this.bufA = new Int32Array(prog.length);
    this.bufB = new Int32Array(prog.length);
    this.bufStack = new Int32Array(prog.length * 2 + 2);
  }

  test(s: string): boolean {
    if (s.length > MAX_SUBJECT) return false;
    if (this.literal !== null) return s.includes(this.literal);
    return this.runTest(s);
  }

  exec(s: string): (string | null)[] | null {
    if (s.length > MAX_SUBJECT) return null;
    const caps = this.run(s, true);
    if (caps === null) return null;
    const out: (string | null)[] = [];
    for (let g = 0; g <= this.groups; g++) {
      const a = caps[2 * g]!;
      const b = caps[2 * g + 1]!;
      out.push(a >= 0 && b >= 0 ? s.slice(a, b) : null);
    }
    return out;
  }

  /**
   * Does Char instruction pc accept cp? Charges the test's cost to the budget,
   * twice for an astral code point (the test converts a surrogate pair); an
   * ASCII answer already in the instruction's table costs two units.
   */
  private accepts(pc: number, inst: CharInst, cp: number, width: number): boolean {
    const table = this.tables[pc];
    if (table !== undefined && cp < 128) {
      const known = table[cp]!;
      if (known !== 0) {
        this.steps += 2;
        return known === 2;
      }
      this.steps += inst.cost;
      const yes = inst.test(cp);
      table[cp] = yes ? 2 : 1;
      return yes;
    }
    this.steps += width * inst.cost;
    return inst.test(cp);
  }

  private assertHolds(kind: "^" | "$" | "b" | "B", s: string, i: number): boolean {
    switch (kind) {
      case "^":
        return i === 0 || (this.multiline && isLineTerminator(s.charCodeAt(i - 1)));
      case "$":
        if (i === s.length) return true;
        if (this.multiline) return isLineTerminator(s.charCodeAt(i));
        // Java: $ also matches before a final line terminator.
        return i === s.length - 1 && s.charCodeAt(i) === 10;
      default: {
        const before = i > 0 && isWordCp(s.charCodeAt(i - 1));
        const after = i < s.length && isWordCp(s.charCodeAt(i));
        return (before !== after) === (kind === "b");
      }
    }
  }

  /**
   * Add the thread (pc, caps) and everything reachable from it without consuming
   * input to `list`, in priority order. An explicit stack replaces recursion.
   */
  private addThread(list: { pc: number; caps: Int32Array }[], pc0: number, caps0: Int32Array, s: string, i: number): void {
    const stack: [number, Int32Array][] = [[pc0, caps0]];
    while (stack.length > 0) {
      const [pc, caps] = stack.pop()!;
      this.steps += EXEC_STEP_COST;
      if (this.mark[pc] === this.generation) continue;
      this.mark[pc] = this.generation;
      const inst = this.prog[pc]!;
      switch (inst.op) {
        case Op.Jmp:
          stack.push([inst.x, caps]);
          break;
        case Op.Split:
          stack.push([inst.y, caps], [inst.x, caps]);
          break;
        case Op.Save: {
          this.steps += this.copyCost;
          const c = caps.slice();
          c[inst.slot] = i;
          stack.push([pc + 1, c]);
          break;
        }
        case Op.Assert:
          if (this.assertHolds(inst.kind, s, i)) stack.push([pc + 1, caps]);
          break;
        default:
          list.push({ pc, caps });
      }
    }
  }

  // Buffers of the capture-free matcher, allocated once per pattern.
  private readonly bufA: Int32Array;
  private readonly bufB: Int32Array;
  private readonly bufStack: Int32Array;

  /** Add pc and its epsilon closure to list (pcs only); returns the new length. */
  private addPc(list: Int32Array, len: number, pc0: number, s: string, i: number): number {
    const stack = this.bufStack;
    let sp = 0;
    stack[sp++] = pc0;
    while (sp > 0) {
      const pc = stack[--sp]!;
      this.steps++;
      if (this.mark[pc] === this.generation) continue;
      this.mark[pc] = this.generation;
      const inst = this.prog[pc]!;
      switch (inst.op) {
        case Op.Jmp:
          stack[sp++] = inst.x;
          break;
        case Op.Split:
          stack[sp++] = inst.y;
          stack[sp++] = inst.x;
          break;
        case Op.Save:
          stack[sp++] = pc + 1;
          break;
        case Op.Assert:
          if (this.assertHolds(inst.kind, s, i)) stack[sp++] = pc + 1;
          break;
        default:
          list[len++] = pc;
      }
    }
    return len;
  }

  /**
   * Does the pattern match anywhere? The capture-free VM: thread lists are
   * arrays of program counters, so a step allocates nothing.
   */
  private runTest(s: string): boolean {
    let clist = this.bufA;
    let nlist = this.bufB;
    this.steps = 0;
    this.generation++;
    let clen = this.addPc(clist, 0, 0, s, 0);
    let i = 0;
    for (;;) {
      const cp = i < s.length ? s.codePointAt(i)! : -1;
      const width = cp > 0xffff ? 2 : 1;
      this.generation++;
      let nlen = 0;
      for (let k = 0; k < clen; k++) {
        const pc = clist[k]!;
        const inst = this.prog[pc]!;
        if (inst.op === Op.Match) return true;
        if (inst.op === Op.Char && cp >= 0) {
          if (this.steps > MAX_STEPS) return false;
          if (this.accepts(pc, inst, cp, width)) nlen = this.addPc(nlist, nlen, pc + 1, s, i + width);
        }
      }
      if (i >= s.length) return false;
      i += width;
      nlen = this.addPc(nlist, nlen, 0, s, i);
      if (this.steps > MAX_STEPS) return false;
      const t = clist;
      clist = nlist;
      nlist = t;
      clen = nlen;
    }
  }

  private run(s: string, wantCaps: boolean): Int32Array | null {
    type Thread = { pc: number; caps: Int32Array };
    const startCaps = (i: number) => {
      this.steps += this.copyCost;
      const c = new Int32Array(this.nslots).fill(-1);
      c[0] = i;
      return c;
    };
    let matched: Int32Array | null = null;
    this.steps = 0;
    this.generation++;
    let clist: Thread[] = [];
    this.addThread(clist, 0, startCaps(0), s, 0);
    let i = 0;
    for (;;) {
      const cp = i < s.length ? s.codePointAt(i)! : -1;
      const width = cp > 0xffff ? 2 : 1;
      this.generation++;
      const nlist: Thread[] = [];
      for (const t of clist) {
        const inst = this.prog[t.pc]!;
        if (inst.op === Op.Match) {
          this.steps += this.copyCost;
          const caps = t.caps.slice();
          caps[1] = i;
          matched = caps;
          if (!wantCaps) return matched;
          break; // threads of lower priority are cut off (leftmost-first)
        }
        if (inst.op === Op.Char && cp >= 0) {
          if (this.steps > MAX_STEPS) return null;
          if (this.accepts(t.pc, inst, cp, width)) this.addThread(nlist, t.pc + 1, t.caps, s, i + width);
        }
      }
      if (i >= s.length) break;
      i += width;
      // Find semantics: a new attempt starts at every position, with the lowest priority.
      if (matched === null) this.addThread(nlist, 0, startCaps(i), s, i);
      else if (nlist.length === 0) break;
      if (this.steps > MAX_STEPS) return null;
      clist = nlist;
    }
    return matched;
  }
}

function literalText(n: RNode, flags: Flags, src: string): string | null {
  if (flags.i) return null;
  // Only plain characters with no regex meaning (a pattern such as "smith").
  return /^[^\\^$.|?*+()[\]{}]+$/.test(src) && n.t !== "assert" ? src : null;
}

// ---------------------------------------------------------------------------
// Public API and cache

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
    const c = new Compiler();
    c.gen({ t: "group", index: null, body: tree });
    c.prog.push({ op: Op.Match });
    const flags = parser.flags;
    const jsFlags = `u${flags.i ? "i" : ""}${flags.m ? "m" : ""}${flags.s ? "s" : ""}`;
    const regex = new PikeRegex(pattern, toJs(tree), jsFlags, parser.groupCount, c.prog, flags.m, literalText(tree, flags, pattern));
    return { ok: true, regex };
  } catch (e) {
    if (e instanceof RegexSyntaxError) return { ok: false, code: e.code, message: `invalid regular expression: ${e.message}`, offset: e.offset };
    throw e;
  }
}
