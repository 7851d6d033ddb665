/**
 * The Java-syntax pattern parser behind validateJavaRegex (regex.ts): turns a
 * pattern into a tree of RNode, rejecting what a linear-time engine cannot run.
 * The limits and result types live here so that the VM and the API share them.
 */

/** The most VM instructions a compiled pattern may have (PQL_REGEX_TOO_LARGE, see regex.ts). */
export const MAX_PROGRAM = 2000;
/** The longest subject searched, UTF-16 code units: a longer one never matches. */
export const MAX_SUBJECT = 16_384;
/** The longest pattern, UTF-16 code units (PQL_REGEX_TOO_LARGE, see regex.ts). */
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
  /** Units of work (MAX_STEPS' units) the last test or exec spent; over MAX_STEPS when it gave up. */
  readonly lastSteps: number;
  /** The capture groups of the first (leftmost) match, or null. Index 0 is the whole match. */
  exec(s: string): (string | null)[] | null;
}

export type RegexValidation =
  | { ok: true; regex: SafeRegex }
  | { ok: false; code: RegexErrorCode; message: string; offset: number };

// ---------------------------------------------------------------------------
// Parsing

export type CharTest = (cp: number) => boolean;

export type RNode =
  | { t: "char"; test: CharTest; js: string; cost: number }
  | { t: "assert"; kind: "^" | "$" | "b" | "B" }
  | { t: "group"; index: number | null; body: RNode }
  | { t: "alt"; alts: RNode[] }
  | { t: "seq"; items: RNode[] }
  | { t: "rep"; body: RNode; min: number; max: number; lazy: boolean };

export class RegexSyntaxError extends Error {
  constructor(
    readonly code: RegexErrorCode,
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

export interface Flags {
  i: boolean;
  m: boolean;
  s: boolean;
}

export const isWordCp = (c: number) =>
  (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isDigitCp = (c: number) => c >= 48 && c <= 57;
// Java's \s without UNICODE_CHARACTER_CLASS: [ \t\n\x0B\f\r]
const isSpaceCp = (c: number) => c === 32 || (c >= 9 && c <= 13);
export const isLineTerminator = (c: number) => c === 10 || c === 13 || c === 0x85 || c === 0x2028 || c === 0x2029;

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

export class Parser {
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
