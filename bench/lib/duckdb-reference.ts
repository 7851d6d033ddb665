/**
 * DuckDB as the batch bench's reference (#42): the same 100 audiences, written by hand in SQL,
 * over the same data in typed columns. Runs in a child process of its own so that its memory and
 * CPU are not the measured job's:
 *
 *   node --import tsx bench/lib/duckdb-reference.ts <request.json>
 *
 * The request names the SQLite store and the tenant, the hand-written conditions (over `f`, the
 * profile attributes, and `ev`, the event measures) and the measures (aggregates over `e0`). The
 * data is copied into DuckDB first (timed apart, as the snapshot build is apart from a job); the
 * evaluation is one statement that writes every profile's 100 memberships into a table, then the
 * counts are read from it. The last stdout line is the result as JSON.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { DuckDBInstance, type DuckDBAppender, type DuckDBConnection } from "@duckdb/node-api";

export interface DuckRequest {
  file: string;
  tid: number;
  /** Profile attribute column → JSON path in a fragment's body. */
  fColumns: Record<string, string>;
  /** Event column → JSON path in an event's body. */
  eColumns: Record<string, string>;
  /** Columns of `f` and `e0` read as numbers (the rest are text). */
  numeric: string[];
  /** Per audience, its condition over f and ev (SQLite's dialect; `total(` is read as `sum(`). */
  conditions: string[];
  measures: string[];
  /** Added to every condition (the opt-out exclusion of a job). */
  always: string;
}

export interface DuckResult {
  version: string;
  threads: number;
  loadMs: number;
  rows: { profiles: number; fragments: number; events: number };
  /** The membership table's statement: every profile × every audience. */
  evalMs: number;
  evalCpuMs: number;
  countMs: number;
  counts: number[];
  rssBytes: number;
}

/** Runs the reference in its own process; resolves with its result. */
export async function runDuckReference(request: DuckRequest): Promise<DuckResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-duck-"));
  const file = path.join(dir, "request.json");
  writeFileSync(file, JSON.stringify(request));
  try {
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), file], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    if (code !== 0) throw new Error(`the DuckDB reference exited with ${code}: ${out.slice(-500)}`);
    return JSON.parse(out.trim().split("\n").at(-1)!) as DuckResult;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Appends rows read from SQLite: text or number per column, NULL when absent. */
function append(appender: DuckDBAppender, rows: Iterable<unknown[]>, numericAt: boolean[]): number {
  let n = 0;
  for (const row of rows) {
    appender.appendInteger(row[0] as number);
    for (let i = 1; i < row.length; i++) {
      const v = row[i];
      if (v === null || v === undefined) appender.appendNull();
      else if (numericAt[i]) appender.appendDouble(Number(v));
      else appender.appendVarchar(String(v));
    }
    appender.endRow();
    n++;
  }
  appender.closeSync();
  return n;
}

async function load(con: DuckDBConnection, r: DuckRequest): Promise<DuckResult["rows"]> {
  const db = new Database(r.file, { readonly: true });
  try {
    const num = new Set(r.numeric);
    const fNames = Object.keys(r.fColumns);
    const eNames = ["ts", ...Object.keys(r.eColumns)];
    const type = (c: string) => (num.has(c) || c === "ts" ? "DOUBLE" : "VARCHAR");
    await con.run("CREATE TABLE profiles (pid INTEGER)");
    await con.run(`CREATE TABLE f (pid INTEGER, ${fNames.map((c) => `${c} ${type(c)}`).join(", ")})`);
    await con.run(`CREATE TABLE e0 (pid INTEGER, ${eNames.map((c) => `${c} ${type(c)}`).join(", ")})`);
    const extract = (cols: Record<string, string>) => Object.values(cols).map((p) => `json_extract(body, '${p}')`).join(", ");
    const profiles = append(await con.createAppender("profiles"),
      db.prepare(`SELECT pid FROM profiles WHERE tid = ${r.tid}`).raw(true).iterate() as Iterable<unknown[]>, [false]);
    const fragments = append(await con.createAppender("f"),
      db.prepare(`SELECT pid, ${extract(r.fColumns)} FROM fragments WHERE tid = ${r.tid}`).raw(true).iterate() as Iterable<unknown[]>,
      [false, ...fNames.map((c) => num.has(c))]);
    const events = append(await con.createAppender("e0"),
      db.prepare(`SELECT pid, ts, ${extract(r.eColumns)} FROM events WHERE tid = ${r.tid}`).raw(true).iterate() as Iterable<unknown[]>,
      [false, ...eNames.map((c) => num.has(c) || c === "ts")]);
    return { profiles, fragments, events };
  } finally {
    db.close();
  }
}

async function main(requestFile: string): Promise<void> {
  const { readFileSync } = await import("node:fs");
  const r = JSON.parse(readFileSync(requestFile, "utf8")) as DuckRequest;
  const instance = await DuckDBInstance.create(":memory:");
  const con = await instance.connect();
  const info = (await con.runAndReadAll("SELECT version(), current_setting('threads')")).getRows()[0]!;
  const t0 = performance.now();
  const rows = await load(con, r);
  const loadMs = performance.now() - t0;
  // SQLite's total() is sum() that never yields NULL; every measure is read through coalesce.
  const measures = r.measures.map((m, i) => `${m.replaceAll("total(", "sum(")} AS m${i}`);
  const cols = r.conditions.map((c, i) => `coalesce((${c}) AND ${r.always}, false) AS c${i}`);
  const sql = `CREATE TABLE members AS
    WITH ev AS (SELECT pid, ${measures.join(", ")} FROM e0 GROUP BY pid)
    SELECT p.pid, ${cols.join(", ")} FROM profiles p LEFT JOIN f ON f.pid = p.pid LEFT JOIN ev ON ev.pid = p.pid`;
  const cpu0 = process.cpuUsage();
  const t1 = performance.now();
  await con.run(sql);
  const evalMs = performance.now() - t1;
  const cpu = process.cpuUsage(cpu0);
  const t2 = performance.now();
  const counts = (await con.runAndReadAll(`SELECT ${r.conditions.map((_, i) => `count(*) FILTER (WHERE c${i})`).join(", ")} FROM members`)).getRows()[0]!.map(Number);
  const countMs = performance.now() - t2;
  const result: DuckResult = {
    version: String(info[0]), threads: Number(info[1]), loadMs, rows, evalMs, evalCpuMs: (cpu.user + cpu.system) / 1000, countMs, counts,
    rssBytes: process.resourceUsage().maxRSS * 1024,
  };
  con.closeSync();
  instance.closeSync();
  console.log(JSON.stringify(result));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(process.argv[2]!);
