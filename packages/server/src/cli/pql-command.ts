/**
 * `segmentd pql …`: the PQL language tools on the command line.
 *
 *   segmentd pql check  <expr>                          diagnostics, exit 1 on any error
 *   segmentd pql format <expr>                          canonical pql/text
 *   segmentd pql json   <expr>                          pql/json, pretty-printed
 *   segmentd pql eval   <expr> --now <iso> --input <f>  the value, as JSON
 *
 * `<expr>` is the query text, or `-` to read it from standard input. `format`
 * also accepts pql/json (a JSON object with a `nodeType`), which makes it the
 * json → text converter. Input and output go through an injectable `PqlCliIo`
 * so that tests run the commands in-process.
 */
import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { check, evaluate, format, fromPqlJson, PqlError, toPqlJson, type Diagnostic, type Query } from "@segmentd/pql";

export interface PqlCliIo {
  /** Writes one line of normal output. */
  out: (line: string) => void;
  /** Writes one line of diagnostics / errors. */
  err: (line: string) => void;
  readStdin: () => Promise<string>;
  readFile: (path: string) => Promise<string>;
  setExitCode: (code: number) => void;
}

const defaultIo: PqlCliIo = {
  out: (line) => process.stdout.write(line + "\n"),
  err: (line) => process.stderr.write(line + "\n"),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  },
  readFile: (path) => readFile(path, "utf8"),
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

/** `line:column severity code message`, the format editors and CI logs understand. */
export function formatDiagnostic(d: Diagnostic): string {
  return `${d.line}:${d.column} ${d.severity} ${d.code} ${d.message}`;
}

export function registerPqlCommands(program: Command, io: Partial<PqlCliIo> = {}): Command {
  const sys: PqlCliIo = { ...defaultIo, ...io };
  const pql = program.command("pql").description("check, format, convert and evaluate PQL expressions");

  const source = async (expr: string): Promise<string> => (expr === "-" ? (await sys.readStdin()).replace(/\r?\n$/, "") : expr);

  /** Runs a command body; a PqlError or a bad input file becomes a message and exit code 1. */
  const guarded =
    <A extends unknown[]>(body: (...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      try {
        await body(...args);
      } catch (e) {
        if (e instanceof PqlError) sys.err(formatDiagnostic(e.toDiagnostic()));
        else if (e instanceof CliInputError) sys.err(e.message);
        else throw e;
        sys.setExitCode(1);
      }
    };

  pql
    .command("check")
    .description("report syntax and semantic problems as 'line:column severity code message'")
    .argument("<expr>", "PQL text, or - for standard input")
    .action(
      guarded(async (expr: string) => {
        const diagnostics = check(await source(expr));
        for (const d of diagnostics) sys.out(formatDiagnostic(d));
        if (diagnostics.length === 0) sys.out("ok");
        if (diagnostics.some((d) => d.severity === "error")) sys.setExitCode(1);
      }),
    );

  pql
    .command("format")
    .description("print the canonical pql/text (also converts pql/json to text)")
    .argument("<expr>", "PQL text or pql/json, or - for standard input")
    .action(
      guarded(async (expr: string) => {
        sys.out(format(readQuery(await source(expr))));
      }),
    );

  pql
    .command("json")
    .description("print the pql/json form")
    .argument("<expr>", "PQL text, or - for standard input")
    .action(
      guarded(async (expr: string) => {
        sys.out(JSON.stringify(toPqlJson(await source(expr)), null, 2));
      }),
    );

  pql
    .command("eval")
    .description("evaluate against one profile and its events; prints the value as JSON")
    .argument("<expr>", "PQL text, or - for standard input")
    .requiredOption("--now <iso>", "the evaluation instant, e.g. 2024-05-01T12:00:00Z")
    .requiredOption("--input <file>", 'JSON file holding {"profile": {...}, "events": [...]}')
    .action(
      guarded(async (expr: string, opts: { now: string; input: string }) => {
        const now = new Date(opts.now);
        if (Number.isNaN(now.getTime())) throw new CliInputError(`--now: not an ISO 8601 instant: ${opts.now}`);
        const { profile, events } = parseInput(await readInput(sys, opts.input), opts.input);
        const query = readQuery(await source(expr));
        const value = evaluate(query, { profile, events, now });
        sys.out(JSON.stringify(value, jsonValue) ?? "null");
      }),
    );

  return pql;
}

/** Input problems that are the user's, reported without a stack trace. */
class CliInputError extends Error {}

/** pql/json when the text is a JSON object with a nodeType (pql.md §9.1: detect by content), else pql/text. */
function readQuery(text: string): Query | string {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch {
      return text;
    }
    if (typeof json === "object" && json !== null && "nodeType" in json) return fromPqlJson(json);
  }
  return text;
}

async function readInput(sys: PqlCliIo, path: string): Promise<string> {
  try {
    return await sys.readFile(path);
  } catch (e) {
    throw new CliInputError(`--input: cannot read ${path}: ${(e as Error).message}`);
  }
}

function parseInput(text: string, path: string): { profile: Record<string, unknown>; events: Record<string, unknown>[] } {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new CliInputError(`--input: ${path} is not JSON: ${(e as Error).message}`);
  }
  const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isRecord(data)) throw new CliInputError(`--input: ${path} must hold an object {"profile": …, "events": […]}`);
  const profile = data.profile ?? {};
  const events = data.events ?? [];
  if (!isRecord(profile)) throw new CliInputError(`--input: "profile" in ${path} must be an object`);
  if (!Array.isArray(events) || !events.every(isRecord)) {
    throw new CliInputError(`--input: "events" in ${path} must be an array of objects`);
  }
  return { profile, events };
}

/** JSON for runtime values: maps as objects, instants as ISO strings, missing as null. */
function jsonValue(_key: string, value: unknown): unknown {
  if (value instanceof Map) return Object.fromEntries(value);
  if (value instanceof Set) return [...value];
  if (value === undefined) return null;
  return value;
}
