/**
 * The profile store's schema set-up beside a running writer (a killed worker restarting while the
 * others write): a transaction writes a late table of the schema, the set-up runs and waits on it
 * (`CREATE INDEX IF NOT EXISTS` takes a share lock even when the index exists), then the same
 * transaction writes an early table. Sent as one string, the set-up held the early table's lock
 * while waiting: PostgreSQL killed one of the two ("deadlock detected", the worker exited). Run
 * statement by statement (`runSchema`), both finish.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { PG_SCHEMA } from "../../src/profiles/postgres/schema.js";
import { runSchema } from "../../src/storage-kit/postgres.js";
import { freshSchema, withUser } from "../helpers/test-store.js";

describe("schema set-up beside a writer (PostgreSQL)", () => {
  let fresh: Awaited<ReturnType<typeof freshSchema>>;
  const clients: pg.Client[] = [];
  const client = async () => {
    const c = new pg.Client({ connectionString: withUser(fresh.databaseUrl) });
    await c.connect();
    clients.push(c);
    return c;
  };

  before(async () => {
    fresh = await freshSchema("t_ddl");
    await runSchema(await client(), PG_SCHEMA);
  });
  after(async () => {
    for (const c of clients) await c.end().catch(() => {});
    await fresh.drop();
  });

  it("a set-up waiting on a late table holds no earlier table's lock: the writer and the set-up both finish", async () => {
    const writer = await client();
    const setup = await client();
    const pid = (await setup.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    await writer.query("BEGIN");
    await writer.query("INSERT INTO batch_records (tid, batch, meta, body) VALUES (1, 'b', '{}', '{}')");
    const running = runSchema(setup, PG_SCHEMA).then(() => "done", (e: Error) => e.message);
    // The set-up is waiting for the writer's lock on batch_records.
    for (const t = Date.now(); ; await new Promise((r) => setTimeout(r, 20))) {
      const w = await writer.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [pid]);
      if (w.rows[0]!.n === 1) break;
      assert.ok(Date.now() - t < 10_000, "the set-up waits on the writer");
    }
    // The writer now needs an early table of the schema.
    const wrote = await writer.query("INSERT INTO profiles (tid, size, created) VALUES (1, 0, 0)").then(() => "done", (e: Error) => e.message);
    await writer.query(wrote === "done" ? "COMMIT" : "ROLLBACK");
    assert.deepEqual([wrote, await running], ["done", "done"]);
  });
});
