/**
 * The Pike VM behind validateJavaRegex (regex.ts): compiles a parsed pattern
 * to a program and runs it within the MAX_STEPS budget (see regex.ts).
 */

import {
  MAX_PROGRAM,
  MAX_STEPS,
  MAX_SUBJECT,
  RegexSyntaxError,
  isLineTerminator,
  isWordCp,
  type CharTest,
  type Flags,
  type RNode,
  type SafeRegex,
} from "./regex-parse.js";

// A step of the capturing VM allocates threads and copies captures.
const EXEC_STEP_COST = 6;
// ASCII answer tables per pattern (128 bytes each).
const MAX_TABLES = 64;


const enum Op {
  Char,
  Split,
  Jmp,
  Save,
  Assert,
  Match,
}

type CharInst = { op: Op.Char; test: CharTest; cost: number };
export type Inst =
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
export function toJs(n: RNode): string {
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

export class PikeRegex implements SafeRegex {
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
    if (s.length > MAX_SUBJECT) {
      this.steps = MAX_STEPS + 1;
      return false;
    }
    if (this.literal !== null) {
      this.steps = s.length;
      return s.includes(this.literal);
    }
    return this.runTest(s);
  }

  get lastSteps(): number {
    return this.steps;
  }

  exec(s: string): (string | null)[] | null {
    if (s.length > MAX_SUBJECT) {
      this.steps = MAX_STEPS + 1;
      return null;
    }
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

export function literalText(n: RNode, flags: Flags, src: string): string | null {
  if (flags.i) return null;
  // Only plain characters with no regex meaning (a pattern such as "smith").
  return /^[^\\^$.|?*+()[\]{}]+$/.test(src) && n.t !== "assert" ? src : null;
}

// ---------------------------------------------------------------------------
// Public API and cache

/** The VM program of a parsed pattern, wrapped in the implicit whole-match group. */
export function compileProgram(tree: RNode): Inst[] {
  const c = new Compiler();
  c.gen({ t: "group", index: null, body: tree });
  c.prog.push({ op: Op.Match });
  return c.prog;
}
