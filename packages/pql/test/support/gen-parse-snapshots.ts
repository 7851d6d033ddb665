/**
 * Writes test/fixtures/parse-snapshots.json, the parser's pinned behaviour (parse-snapshots.test.ts):
 * for the bench corpus, each expression's AST as JSON; for ~1,600 generated inputs (formatted
 * random trees, token soups, mutated queries, random text — fixed seeds), each one's outcome:
 * the SHA-256 of its AST's JSON, or its error's code, message and positions.
 *
 *   node --conditions=source --import tsx packages/pql/test/support/gen-parse-snapshots.ts [--parser <parser.ts> --label <what>]
 *
 * The fixture in the repository was written by the pre-split parser (commit 173d13a, #42:
 * `--parser` pointing at that commit's packages/pql/src/parser.ts, extracted with `git show`),
 * so the test holds every later parser to it. Regenerate only for an intended change of the AST
 * or of a message, with the current parser (the default).
 */
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import fc from "fast-check";
import { format } from "../../src/format.js";
import { PQL_CORPUS } from "../../../../bench/corpus/pql-corpus.js";
import { queryArbitrary } from "./ast-arbitrary.js";

export interface ErrorOutcome {
  code: string;
  message: string;
  start: number;
  end: number;
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

/** A generated input's outcome: its AST's JSON digest, or its error. */
export type Outcome = { sha256: string } | { error: ErrorOutcome };

export interface ParseSnapshots {
  reference: string;
  corpus: { text: string; ast: unknown }[];
  generated: { text: string; outcome: Outcome }[];
}

/** What the test compares: the AST as JSON (digested), or every field of the error. */
export function outcomeOf(parse: (text: string) => unknown, text: string): Outcome {
  try {
    return { sha256: createHash("sha256").update(JSON.stringify(parse(text))).digest("hex") };
  } catch (e) {
    const err = e as ErrorOutcome & { name?: string };
    if (typeof err.code !== "string") throw new Error(`not a PqlError for ${JSON.stringify(text)}: ${String(e)}`);
    const { code, message, start, end, line, column, endLine, endColumn } = err;
    return { error: { code, message, start, end, line, column, endLine, endColumn } };
  }
}

/** Tokens to build soups and mutations from (those of syntax.property.test.ts, and a few more). */
const SOUP = [
  "and", "OR", "not", "!", "in", "notIn", "like", "matches", "occurs", "on", "between", "before", "after", "from",
  "select", "where", "exists", "forall", "let", "over", "sum", "average", "min", "max", "true", "false", "null",
  "now", "today", "yesterday", "tomorrow", "this", "last", "next", "xEvent", "chain", "WHAT", "WHEN", "COUNT", "WHERE",
  "days", "month", "date", "if", "x", "Y", "a.b", "$1", "$0", "$", "^", "^^.", "1", "-2", "3.5", ".5", "1e3", '"s"',
  "'q'", "(", ")", "[", "]", "{", "}", ",", ":", ".", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%",
  "=>", "//", "#", "\n", "\t", "&&", "||", '"a\\u00e9\\n"', '"bad\\q"', "9007199254740993", "1e999", "1.foo", "€",
];

/** The generated inputs, the same on every run (fixed seeds). */
export function generatedInputs(): string[] {
  const formatted = fc.sample(queryArbitrary({ maxDepth: 5 }).map(format), { numRuns: 500, seed: 4201 });
  const soups = fc.sample(
    fc.array(fc.constantFrom(...SOUP), { maxLength: 40 }).map((ts) => ts.join(" ")),
    { numRuns: 500, seed: 4202 },
  );
  const mutated = fc.sample(
    fc.tuple(queryArbitrary(), fc.nat(), fc.nat(), fc.constantFrom(...SOUP, "")).map(([q, a, b, insert]) => {
      const text = format(q);
      const i = a % (text.length + 1);
      return text.slice(0, i) + insert + text.slice(Math.min(text.length, i + (b % 5)));
    }),
    { numRuns: 400, seed: 4203 },
  );
  const random = fc.sample(fc.string({ unit: "grapheme-ascii", maxLength: 80 }), { numRuns: 200, seed: 4204 });
  return [...new Set([...formatted, ...soups, ...mutated, ...random])];
}

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const given = option("parser");
  const file = given !== undefined ? path.resolve(given) : path.resolve(import.meta.dirname, "../../src/parser.ts");
  const { parse } = (await import(pathToFileURL(file).href)) as { parse: (text: string) => unknown };
  const snapshots: ParseSnapshots = {
    reference: option("label") ?? given ?? "packages/pql/src/parser.ts",
    corpus: PQL_CORPUS.map((text) => ({ text, ast: JSON.parse(JSON.stringify(parse(text))) as unknown })),
    generated: generatedInputs().map((text) => ({ text, outcome: outcomeOf(parse, text) })),
  };
  const out = path.resolve(import.meta.dirname, "../fixtures/parse-snapshots.json");
  // One entry a line: diffs stay readable.
  const lines = (xs: unknown[]) => xs.map((x) => `    ${JSON.stringify(x)}`).join(",\n");
  writeFileSync(
    out,
    `{\n  "reference": ${JSON.stringify(snapshots.reference)},\n  "corpus": [\n${lines(snapshots.corpus)}\n  ],\n` +
      `  "generated": [\n${lines(snapshots.generated)}\n  ]\n}\n`,
  );
  const errors = snapshots.generated.filter((g) => "error" in g.outcome).length;
  console.log(`${out}: ${snapshots.corpus.length} corpus ASTs, ${snapshots.generated.length} generated inputs (${errors} errors)`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await main();
