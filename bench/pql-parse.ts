/**
 * PQL parse bench (`npm run bench:pql-parse`, #42): the current parser against a reference
 * parser — by default the one of the commit before the parser was split into classes — in the
 * same process, on the same corpus (bench/corpus), in alternating rounds. Prints each one's
 * parses per CPU-second and per wall-second (median and best of the rounds), bytes allocated per
 * parse, the ratio, and `target … met|MISSED` for #42's two targets. Before timing, it checks
 * that both parsers give the same AST (as JSON) or the same error for every corpus expression.
 *
 *   npm run bench:pql-parse
 *   npm run bench:pql-parse -- --old <dir or parser.ts>   (or SEGMENTD_PQL_OLD_PARSER=…)
 *   npm run bench:pql-parse -- --rev <commit>             (the reference read from git; default below)
 *   npm run bench:pql-parse -- --rounds 12 --round-ms 250
 *
 * Instruction counts (a fair figure on a shared machine): `--only new|old --passes N` runs a
 * fixed warm-up then N passes of one parser and prints nothing else; run it under
 * `valgrind --tool=callgrind` with N = 0 and N = 100 and divide the difference by
 * 100 × the corpus size (docs/performance.md gives the command).
 *
 * The reference is loaded from a directory holding its `packages/pql/src`, `src` or
 * `parser.ts`; by default `git show` writes the pre-split commit's packages/pql into a temp dir
 * (needs the history: on a shallow clone, `git fetch --unshallow` or pass --old).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parse as parseNew } from "../packages/pql/src/parser.js";
import { PQL_CORPUS } from "./corpus/pql-corpus.js";
import { AllocationMeter } from "./lib/alloc-meter.js";
import { target } from "./lib/cost.js";

/** The last commit whose parser is one class in one file (db0987d split it). */
const PRE_SPLIT = "173d13a77b0353c6500221807e1af9383272197d";
const QUIET_HOST_TARGET = 1_000_000;

type Parse = (text: string) => unknown;

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");

/** Writes packages/pql of `rev` into a temp dir with `git show` (the checkout is not touched). */
function extract(rev: string): { dir: string; cleanup: () => void } {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20 });
  try {
    git("cat-file", "-e", `${rev}^{commit}`);
  } catch {
    throw new Error(`commit ${rev} is not in this clone (shallow? run 'git fetch --unshallow' or pass --old <dir>)`);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-pql-ref-"));
  const files = git("ls-tree", "-r", "--name-only", rev, "--", "packages/pql/src", "packages/pql/package.json")
    .split("\n")
    .filter((f) => f !== "");
  for (const f of files) {
    mkdirSync(path.join(dir, path.dirname(f)), { recursive: true });
    writeFileSync(path.join(dir, f), git("show", `${rev}:${f}`));
  }
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The parser module under a path: a parser.ts, a src dir, a package dir or a checkout. */
function parserFile(p: string): string {
  const abs = path.resolve(p);
  if (statSync(abs).isFile()) return abs;
  for (const rel of ["parser.ts", "src/parser.ts", "packages/pql/src/parser.ts"]) {
    if (existsSync(path.join(abs, rel))) return path.join(abs, rel);
  }
  throw new Error(`no parser.ts under ${abs}`);
}

async function loadReference(): Promise<{ parse: Parse; label: string; cleanup: () => void }> {
  const given = option("old") ?? process.env.SEGMENTD_PQL_OLD_PARSER;
  if (given) {
    const mod = (await import(pathToFileURL(parserFile(given)).href)) as { parse: Parse };
    return { parse: mod.parse, label: given, cleanup: () => undefined };
  }
  const rev = option("rev") ?? PRE_SPLIT;
  const { dir, cleanup } = extract(rev);
  const mod = (await import(pathToFileURL(parserFile(dir)).href)) as { parse: Parse };
  return { parse: mod.parse, label: `git ${rev.slice(0, 7)}`, cleanup };
}

/** The AST as JSON, or the error's code, message and position: what must be equal. */
function outcome(parse: Parse, text: string): string {
  try {
    return JSON.stringify(parse(text));
  } catch (e) {
    const err = e as { code?: string; message?: string; start?: number; end?: number };
    return `error ${err.code} ${err.start}-${err.end} ${err.message}`;
  }
}

/** Strings as a server sees them (read from JSON: flat, not the template literals' cons strings). */
const CORPUS: string[] = JSON.parse(JSON.stringify(PQL_CORPUS)) as string[];

function passes(parse: Parse, n: number): void {
  for (let i = 0; i < n; i++) for (const q of CORPUS) parse(q);
}

interface Round {
  cpuRate: number;
  wallRate: number;
}

/** One round: whole passes over the corpus for about `ms` of wall time. */
function round(parse: Parse, ms: number): Round {
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    passes(parse, 10);
    n += 10 * CORPUS.length;
    t = performance.now();
  }
  const cpu = process.cpuUsage(c0);
  return { cpuRate: n / ((cpu.user + cpu.system) / 1e6), wallRate: n / ((t - t0) / 1000) };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");

async function main(): Promise<void> {
  const only = option("only");
  if (only === "new") {
    // Fixed work for instruction counting: warm-up, then N passes, no output.
    passes(parseNew, 300);
    passes(parseNew, Number(option("passes") ?? 100));
    return;
  }
  const ref = await loadReference();
  try {
    if (only === "old") {
      passes(ref.parse, 300);
      passes(ref.parse, Number(option("passes") ?? 100));
      return;
    }
    const rounds = Number(option("rounds") ?? 10);
    const roundMs = Number(option("round-ms") ?? 250);
    const cpus = os.cpus();
    console.log(`cpu: ${cpus[0]?.model ?? "unknown"} × ${cpus.length}, node ${process.version}, load ${os.loadavg()[0]!.toFixed(2)}`);
    console.log(`reference: ${ref.label}; corpus: ${CORPUS.length} expressions, ${rounds} alternating rounds of ${roundMs} ms each`);

    let differ = 0;
    for (const q of CORPUS) {
      if (outcome(ref.parse, q) !== outcome(parseNew, q)) {
        if (differ++ === 0) console.log(`differs: ${q}`);
      }
    }
    console.log(differ === 0 ? "outcomes: identical on the corpus" : `outcomes: ${differ} expression(s) differ`);

    const sides = [
      { name: "current", parse: parseNew, rounds: [] as Round[], bytes: 0 },
      { name: "reference", parse: ref.parse, rounds: [] as Round[], bytes: 0 },
    ];
    for (const s of sides) passes(s.parse, 200);
    for (let r = 0; r < rounds; r++) {
      // Alternate which goes first, so neither always follows the other's garbage.
      const order = r % 2 === 0 ? sides : [sides[1]!, sides[0]!];
      for (const s of order) s.rounds.push(round(s.parse, roundMs));
    }
    // Allocation last: the meter's GC profiler stays on once started.
    for (const s of sides) {
      const meter = new AllocationMeter();
      const before = meter.allocated();
      passes(s.parse, 50);
      s.bytes = (meter.allocated() - before) / (50 * CORPUS.length);
    }
    const cpuMedian = (s: (typeof sides)[number]) => median(s.rounds.map((x) => x.cpuRate));
    for (const s of sides) {
      const cpu = s.rounds.map((x) => x.cpuRate);
      const wall = s.rounds.map((x) => x.wallRate);
      console.log(
        `${s.name.padEnd(9)}: ${fmt(median(cpu))} parses per CPU-second (best ${fmt(Math.max(...cpu))}, ` +
          `${(1e6 / median(cpu)).toFixed(2)} µs a parse), wall ${fmt(median(wall))}/s (best ${fmt(Math.max(...wall))}), ` +
          `${fmt(s.bytes)} B allocated a parse`,
      );
    }
    const cur = cpuMedian(sides[0]!);
    const old = cpuMedian(sides[1]!);
    const ratios = sides[0]!.rounds.map((x, i) => x.cpuRate / sides[1]!.rounds[i]!.cpuRate);
    console.log(`ratio current / reference: ${(cur / old).toFixed(2)}× (per round: ${ratios.map((x) => x.toFixed(2)).join(" ")})`);
    console.log(target("parses/s ≥ the pre-split parser's in the same run", `${fmt(cur)}/s`, cur >= old, `reference ${fmt(old)}/s`));
    console.log(target("parses/s ≥ 1,000,000 (per CPU-second; quiet host)", `${fmt(cur)}/s`, cur >= QUIET_HOST_TARGET));
    if (differ !== 0) process.exitCode = 1;
  } finally {
    ref.cleanup();
  }
}

await main();
