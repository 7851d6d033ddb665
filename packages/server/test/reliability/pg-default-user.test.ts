// `--database-url postgres://host:port/db` names no user: every PostgreSQL
// store connects as libpq would (PGUSER, then USER, then the OS user;
// platform/pg-url.ts), also when a service manager leaves USER unset. The
// batch repository used to hand the URL to node-postgres as it was, which then
// has no user and fails at start-up. PostgreSQL only: the embedded stores take
// no URL.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { openBatchRepository } from "../../src/batch/store/open.js";
import { openPgHygieneStore } from "../../src/hygiene/store/pg-store.js";
import { withDefaultUser } from "../../src/platform/pg-url.js";
import { openPgStore } from "../../src/index.js";
import { testDatabaseUrl, testStoreKind, userlessUrl } from "../helpers/test-store.js";

if (testStoreKind() === "postgres") {
  describe("PostgreSQL stores with a URL naming no user, USER and PGUSER unset", () => {
    const schema = `t_pguser_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const saved = { USER: process.env.USER, PGUSER: process.env.PGUSER };
    const admin = () => new pg.Client({ connectionString: withDefaultUser(testDatabaseUrl()) });
    before(async () => {
      const c = admin();
      await c.connect();
      await c.query(`CREATE SCHEMA ${schema}`);
      await c.end();
      delete process.env.USER;
      delete process.env.PGUSER;
    });
    after(async () => {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
      const c = admin();
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.query(`DROP SCHEMA IF EXISTS ${schema}_batch CASCADE`);
      await c.end();
    });

    it("the batch repository connects, stores and reads a resource", async () => {
      const repo = openBatchRepository({ dataDir: "/nonexistent-unused", databaseUrl: userlessUrl(schema) });
      try {
        const scope = { orgId: "org@AdobeOrg", sandboxName: "prod" };
        await repo.insert("schedule", { scope, id: "s1", status: "active", creationTime: 1, doc: { id: "s1" } });
        assert.deepEqual((await repo.get("schedule", scope, "s1"))?.doc, { id: "s1" });
      } finally {
        await repo.close();
      }
    });

    it("so do the metadata and hygiene stores (the rule every store follows)", async () => {
      const meta = await openPgStore(userlessUrl(schema));
      await meta.close();
      const hygiene = await openPgHygieneStore(userlessUrl(schema), { schema });
      try {
        assert.equal(await hygiene.countActiveExpirations("org@AdobeOrg"), 0);
      } finally {
        await hygiene.close();
      }
    });
  });
}
