/**
 * Differential test: for generated data and generated conditions inside the
 * SQL back end's coverage, the compiled SQL and the reference interpreter
 * `evaluate` agree on every profile. Runs the SQLite dialect on the embedded
 * suite and the PostgreSQL dialect on the pg suite (SEGMENTD_TEST_STORE).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import pg from "pg";
import { evaluate, parse, toBoolean } from "@segmentd/pql";
import { SqlCompiler } from "../../src/batch/sql/compile-sql.js";
import { PostgresDialect, SqliteDialect } from "../../src/batch/sql/dialect.js";
import { SqliteChunkEvaluator, eventInstant, type StagedEntry } from "../../src/batch/sql/staging.js";
import { NOW, coveredQuery, profileWithEvents } from "./pql-gen.js";
import { pgConnectionString } from "./batch-harness.js";

const STORE = (process.env["SEGMENTD_TEST_STORE"] ?? "embedded") === "postgres" ? "postgres" : "embedded";
const RUNS = 200;

type Row = { profile: Record<string, unknown>; events: Record<string, unknown>[] };

function expected(text: string, rows: readonly Row[]): boolean[] {
  const q = parse(text);
  return rows.map((r) => toBoolean(evaluate(q, { profile: r.profile, events: r.events, now: NOW })));
}

function staged(rows: readonly Row[]): StagedEntry[] {
  return rows.map((r) => ({ doc: JSON.stringify(r.profile), events: r.events.map((e) => ({ ts: eventInstant(e), doc: JSON.stringify(e) })) }));
}

/** Runs `predicates` over `rows` in the dialect under test. */
interface Backend {
  run(predicates: string[], rows: readonly Row[]): Promise<boolean[][]>;
  compiler: SqlCompiler;
}

function sqliteBackend(): Backend {
  return {
    compiler: new SqlCompiler(new SqliteDialect(), { events: "ev" }, NOW),
    async run(predicates, rows) {
      const ev = new SqliteChunkEvaluator(predicates);
      try {
        const flags = ev.evaluate(staged(rows));
        return rows.map((_, i) => predicates.map((__, j) => flags[i * predicates.length + j] === 1));
      } finally {
        ev.close();
      }
    },
  };
}

function postgresBackend(client: pg.Client): Backend {
  return {
    compiler: new SqlCompiler(new PostgresDialect(), { events: "pg_temp.ev" }, NOW),
    async run(predicates, rows) {
      await client.query("TRUNCATE pg_temp.p, pg_temp.ev");
      const s = staged(rows);
      for (let rid = 0; rid < s.length; rid++) {
        await client.query("INSERT INTO pg_temp.p (rid, doc) VALUES ($1, $2::jsonb)", [rid, s[rid]!.doc]);
        for (const e of s[rid]!.events) await client.query("INSERT INTO pg_temp.ev (rid, ts, doc) VALUES ($1, $2, $3::jsonb)", [rid, e.ts, e.doc]);
      }
      const cols = predicates.map((sql, j) => `(${new PostgresDialect().asFlag(sql)}) AS d${j}`).join(", ");
      const res = await client.query<Record<string, number>>(`SELECT ${cols} FROM pg_temp.p p ORDER BY rid`);
      return res.rows.map((r) => predicates.map((_, j) => Number(r[`d${j}`]) === 1));
    },
  };
}

describe(`SQL back end agrees with evaluate (${STORE === "postgres" ? "PostgreSQL" : "SQLite"} dialect)`, () => {
  let backend: Backend;
  let client: pg.Client | undefined;

  before(async () => {
    if (STORE === "postgres") {
      client = new pg.Client({ connectionString: pgConnectionString() });
      await client.connect();
      await client.query("CREATE TEMP TABLE p (rid integer PRIMARY KEY, doc jsonb NOT NULL); CREATE TEMP TABLE ev (rid integer NOT NULL, ts double precision, doc jsonb NOT NULL)");
      backend = postgresBackend(client);
    } else {
      backend = sqliteBackend();
    }
  });
  after(async () => {
    await client?.end();
  });

  it("every generated covered condition compiles and matches evaluate profile by profile", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(coveredQuery, { minLength: 1, maxLength: 4 }), fc.array(profileWithEvents, { minLength: 1, maxLength: 12 }), async (texts, rows) => {
        const sqls = texts.map((t) => {
          const r = backend.compiler.compile(parse(t));
          assert.ok(r.ok, `${t} should be covered: ${r.ok ? "" : r.reason}`);
          return r.sql;
        });
        const got = await backend.run(sqls, rows);
        texts.forEach((t, j) => {
          const want = expected(t, rows);
          rows.forEach((row, i) => {
            assert.equal(got[i]![j], want[i], `query ${t}\nprofile ${JSON.stringify(row.profile)}\nevents ${JSON.stringify(row.events)}`);
          });
        });
      }),
      { numRuns: RUNS },
    );
  });

  it("reports constructs outside its coverage instead of guessing", () => {
    for (const text of ['inSegment("x")', "person.age + 1 > 3", 'person.name.matches("a.*")', "chain(xEvent, timestamp, [A: WHAT(eventType = \"a\"), B: WHAT(eventType = \"b\")])", "xEvent[timestamp occurs before person.birthDate].count() > 0"]) {
      const r = backend.compiler.compile(parse(text));
      assert.equal(r.ok, false, text);
    }
  });
});
