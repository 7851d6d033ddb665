/** `segmentd pql …` run in-process through commander, with captured output. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Command } from "commander";
import { toPqlJson } from "@segmentd/pql";
import { registerPqlCommands, type PqlCliIo } from "../src/cli/pql-command.js";

interface Run {
  out: string[];
  err: string[];
  exitCode: number | undefined;
}

async function run(args: string[], io: Partial<PqlCliIo> = {}): Promise<Run> {
  const result: Run = { out: [], err: [], exitCode: undefined };
  const program = new Command();
  program.exitOverride();
  program.configureOutput({ writeOut: (s) => result.out.push(s), writeErr: (s) => result.err.push(s) });
  registerPqlCommands(program, {
    out: (line) => result.out.push(line),
    err: (line) => result.err.push(line),
    setExitCode: (code) => {
      result.exitCode = code;
    },
    readStdin: async () => {
      throw new Error("stdin not expected");
    },
    readFile: async (path) => {
      throw new Error(`ENOENT: no such file, open '${path}'`);
    },
    ...io,
  });
  await program.parseAsync(args, { from: "user" });
  return result;
}

const INPUT = JSON.stringify({
  profile: { person: { age: 30, name: "Ada" } },
  events: [
    { eventType: "view", timestamp: "2024-04-30T10:00:00Z" },
    { eventType: "purchase", timestamp: "2024-04-30T11:00:00Z" },
  ],
});
const withInput = { readFile: async (path: string) => (path === "in.json" ? INPUT : Promise.reject(new Error("ENOENT"))) };

test("pql format prints the canonical text", async () => {
  const r = await run(["pql", "format", "NOT(a) AND b.COUNT()>2"]);
  assert.deepEqual(r, { out: ["not a and b.count() > 2"], err: [], exitCode: undefined });
});

test("pql format - reads the expression from standard input", async () => {
  const r = await run(["pql", "format", "-"], { readStdin: async () => "x  =  1\n" });
  assert.deepEqual(r.out, ["x = 1"]);
});

test("pql format converts pql/json to text", async () => {
  const json = JSON.stringify({
    nodeType: "fnApply",
    fnName: "NOT",
    params: [{ nodeType: "fieldLookup", fieldName: "vip" }],
  });
  const r = await run(["pql", "format", json]);
  assert.deepEqual(r.out, ["not vip"]);
});

test("a syntax error is printed as line:column severity code message, with exit code 1", async () => {
  const r = await run(["pql", "format", "a == 1"]);
  assert.deepEqual(r, { out: [], err: ["1:3 error PQL_DOUBLE_EQUALS '==' is not PQL; use '=' for equality"], exitCode: 1 });
  const j = await run(["pql", "json", "a and"]);
  assert.deepEqual(j.err, ["1:6 error PQL_EXPECTED_EXPRESSION Expected an expression after 'and' but found end of input"]);
  assert.equal(j.exitCode, 1);
});

test("pql json pretty-prints the pql/json form", async () => {
  const r = await run(["pql", "json", 'city in ["Oslo"]']);
  assert.deepEqual(r.out, [JSON.stringify(toPqlJson('city in ["Oslo"]'), null, 2)]);
  assert.ok(r.out[0]!.includes('\n  "fnName": "in"'));
});

test("pql check: ok for a clean query, diagnostics and exit 1 for errors", async () => {
  const ok = await run(["pql", "check", 'person.name = "Ada"']);
  assert.deepEqual(ok, { out: ["ok"], err: [], exitCode: undefined });
  const bad = await run(["pql", "check", "a = 1 and\n  b == 2"]);
  assert.deepEqual(bad.out, ["2:5 error PQL_DOUBLE_EQUALS '==' is not PQL; use '=' for equality"]);
  assert.equal(bad.exitCode, 1);
  const unknown = await run(["pql", "check", "x.noSuchMethod()"]);
  assert.equal(unknown.exitCode, 1);
  assert.match(unknown.out[0]!, /^1:\d+ error PQL_UNKNOWN_METHOD /);
});

test("pql eval prints the value as JSON", async () => {
  const yes = await run(["pql", "eval", "person.age >= 21", "--now", "2024-05-01T00:00:00Z", "--input", "in.json"], withInput);
  assert.deepEqual(yes, { out: ["true"], err: [], exitCode: undefined });
  const count = await run(["pql", "eval", 'xEvent[eventType = "purchase"].count()', "--now", "2024-05-01T00:00:00Z", "--input", "in.json"], withInput);
  assert.deepEqual(count.out, ["1"]);
  const recent = await run(
    ["pql", "eval", "xEvent[timestamp occurs <= 1 day before now].count()", "--now", "2024-05-01T00:00:00Z", "--input", "in.json"],
    withInput,
  );
  assert.deepEqual(recent.out, ["2"]);
  const name = await run(["pql", "eval", "person.name", "--now", "2024-05-01T00:00:00Z", "--input", "in.json"], withInput);
  assert.deepEqual(name.out, ['"Ada"']);
});

test("pql eval reports bad options and input files without a stack trace", async () => {
  const badNow = await run(["pql", "eval", "true", "--now", "yesterday-ish", "--input", "in.json"], withInput);
  assert.deepEqual(badNow, { out: [], err: ["--now: not an ISO 8601 instant: yesterday-ish"], exitCode: 1 });
  const missing = await run(["pql", "eval", "true", "--now", "2024-05-01T00:00:00Z", "--input", "nope.json"]);
  assert.deepEqual(missing.err, ["--input: cannot read nope.json: ENOENT: no such file, open 'nope.json'"]);
  assert.equal(missing.exitCode, 1);
  const notJson = await run(["pql", "eval", "true", "--now", "2024-05-01T00:00:00Z", "--input", "x"], {
    readFile: async () => "{oops",
  });
  assert.match(notJson.err[0]!, /^--input: x is not JSON: /);
  const badEvents = await run(["pql", "eval", "true", "--now", "2024-05-01T00:00:00Z", "--input", "x"], {
    readFile: async () => '{"events": [1]}',
  });
  assert.deepEqual(badEvents.err, ['--input: "events" in x must be an array of objects']);
});

test("pql eval requires --now and --input", async () => {
  await assert.rejects(run(["pql", "eval", "true", "--input", "in.json"], withInput), { code: "commander.missingMandatoryOptionValue" });
});
