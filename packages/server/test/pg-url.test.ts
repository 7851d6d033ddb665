import assert from "node:assert/strict";
import { userInfo } from "node:os";
import { test } from "node:test";
import { moduleSchema, withDefaultUser } from "../src/platform/pg-url.js";

test("a URL without a user gets PGUSER, then USER, then the OS user (libpq's rule)", () => {
  const saved = { PGUSER: process.env.PGUSER, USER: process.env.USER };
  try {
    process.env.PGUSER = "pgu";
    process.env.USER = "osu";
    assert.equal(withDefaultUser("postgres://127.0.0.1:5432/test"), "postgres://pgu@127.0.0.1:5432/test");
    delete process.env.PGUSER;
    assert.equal(withDefaultUser("postgres://127.0.0.1:5432/test"), "postgres://osu@127.0.0.1:5432/test");
    delete process.env.USER;
    assert.equal(withDefaultUser("postgres://127.0.0.1:5432/test"), `postgres://${userInfo().username}@127.0.0.1:5432/test`);
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

test("a URL that names a user, or is not a URL, is left as it is", () => {
  assert.equal(withDefaultUser("postgres://alice:pw@db:5432/x?sslmode=disable"), "postgres://alice:pw@db:5432/x?sslmode=disable");
  assert.equal(withDefaultUser("host=db dbname=x"), "host=db dbname=x");
});

test("module schemas follow the URL's search_path, else segmentd_<module>", () => {
  assert.equal(moduleSchema("postgres://db/x", "profiles"), "segmentd_profiles");
  assert.equal(moduleSchema("postgres://db/x?options=-c%20search_path%3Dt_abc", "profiles"), "t_abc_profiles");
  assert.equal(moduleSchema("postgres://db/x?options=-c search_path=Bad-Name", "batch"), "segmentd_batch");
  assert.equal(moduleSchema("not a url", "batch"), "segmentd_batch");
});
