/** Configuration: file, environment and overrides in that order; bad files are clear errors. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ConfigError, loadConfig } from "../src/platform/config.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-config-"));

test("defaults: 127.0.0.1:8080, ./.data under the cwd, AEP limits", () => {
  const c = loadConfig({ cwd: dir, env: {} });
  assert.deepEqual([c.host, c.port, c.dataDir, c.databaseUrl], ["127.0.0.1", 8080, path.join(dir, ".data"), undefined]);
  assert.deepEqual(c.limits, {
    definitions: 4000,
    streaming: 500,
    edge: 150,
    expressionBytes: 65536,
    eventsPerProfile: 10_000,
    evaluationCost: 1_000_000_000,
    evaluationMsPerProfile: 50,
    evaluationDeadlineMs: 10_000,
  });
  assert.equal(c.bodyLimitBytes, 1048576);
});

test("file < environment < overrides", () => {
  writeFileSync(path.join(dir, "segmentd.config.json"), JSON.stringify({
    port: 9000, host: "0.0.0.0", limits: { edge: 10, eventsPerProfile: 2000, evaluationMsPerProfile: 20 },
    organizations: [{ id: "o@AdobeOrg", sandboxes: [{ name: "prod", type: "production", default: true, limits: { definitions: 5, evaluationCost: 1000, evaluationDeadlineMs: 500 } }] }],
  }));
  const c = loadConfig({ cwd: dir, env: { SEGMENTD_PORT: "9100", SEGMENTD_DATABASE_URL: "postgres://x/y" }, overrides: { host: "::1" } });
  assert.deepEqual([c.port, c.host, c.databaseUrl, c.limits.edge, c.limits.eventsPerProfile, c.limits.evaluationMsPerProfile], [9100, "::1", "postgres://x/y", 10, 2000, 20]);
  assert.deepEqual(c.organizations[0]!.sandboxes[0]!.limits, { definitions: 5, evaluationCost: 1000, evaluationDeadlineMs: 500 });
});

test("bad files and values are ConfigErrors that say what is wrong", () => {
  const bad = path.join(dir, "bad.json");
  for (const [content, message] of [
    ["{", /not valid JSON/],
    [JSON.stringify({ prot: 1 }), /unknown key "prot"/],
    [JSON.stringify({ port: "80" }), /port must be a non-negative integer/],
    [JSON.stringify({ organizations: [{ id: "o", sandboxes: [{ name: "s", type: "staging" }] }] }), /type must be "production" or "development"/],
  ] as const) {
    writeFileSync(bad, content);
    assert.throws(() => loadConfig({ cwd: dir, env: {}, configFile: bad }), (e: unknown) => e instanceof ConfigError && message.test(e.message));
  }
  assert.throws(() => loadConfig({ cwd: dir, env: { SEGMENTD_PORT: "http" } }), /SEGMENTD_PORT must be an integer/);
  assert.throws(() => loadConfig({ cwd: dir, env: {}, configFile: "nope.json" }), /config file not found/);
});

test("edge memory bounds come from the file; names default to one location; bad values are ConfigErrors", () => {
  const f = path.join(dir, "edge-bounds.json");
  writeFileSync(f, JSON.stringify({ edge: { maxProfiles: 5000, profileIdleMs: 0, streamingMaxProfiles: 7000 } }));
  const c = loadConfig({ cwd: dir, env: {}, configFile: f });
  assert.deepEqual(c.edge, { names: ["edge"], maxProfiles: 5000, profileIdleMs: 0, streamingMaxProfiles: 7000 });
  for (const [edge, message] of [
    [{ maxProfiles: 0 }, /edge\.maxProfiles must be a positive integer/],
    [{ streamingMaxProfiles: 1.5 }, /edge\.streamingMaxProfiles must be a non-negative integer/],
    [{ maxProfile: 10 }, /unknown key "edge\.maxProfile"/],
  ] as const) {
    writeFileSync(f, JSON.stringify({ edge }));
    assert.throws(() => loadConfig({ cwd: dir, env: {}, configFile: f }), (e: unknown) => e instanceof ConfigError && message.test(e.message));
  }
});

test("streaming workers: partitions from the file or the environment, default 64; NATS and PostgreSQL required; bad values are ConfigErrors", () => {
  const f = path.join(dir, "workers.json");
  const both = { natsUrl: "nats://127.0.0.1:4222", databaseUrl: "postgres://127.0.0.1:5432/test" };
  writeFileSync(f, JSON.stringify({ ...both, streamingWorkers: {} }));
  assert.deepEqual(loadConfig({ cwd: dir, env: {}, configFile: f }).streamingWorkers, { partitions: 64 });
  writeFileSync(f, JSON.stringify({ ...both, streamingWorkers: { partitions: 8 } }));
  assert.deepEqual(loadConfig({ cwd: dir, env: {}, configFile: f }).streamingWorkers, { partitions: 8 });
  assert.deepEqual(loadConfig({ cwd: dir, env: { SEGMENTD_STREAM_PARTITIONS: "16" }, configFile: f }).streamingWorkers, { partitions: 16 });
  assert.equal(loadConfig({ cwd: dir, env: {}, overrides: both }).streamingWorkers, undefined, "off unless asked for");
  for (const [raw, message] of [
    [{ ...both, streamingWorkers: { partitions: 0 } }, /streamingWorkers\.partitions must be an integer from 1 to 1024, got 0$/],
    [{ ...both, streamingWorkers: { partitions: 2000 } }, /streamingWorkers\.partitions must be an integer from 1 to 1024, got 2000$/],
    [{ ...both, streamingWorkers: { partition: 8 } }, /unknown key "streamingWorkers\.partition"/],
    [{ ...both, streamingWorkers: true }, /streamingWorkers must be an object/],
    [{ natsUrl: both.natsUrl, streamingWorkers: {} }, /^streaming workers need NATS and PostgreSQL: give natsUrl \(--nats\) and databaseUrl \(--database-url\) as well$/],
    [{ databaseUrl: both.databaseUrl, streamingWorkers: {} }, /^streaming workers need NATS and PostgreSQL/],
  ] as const) {
    writeFileSync(f, JSON.stringify(raw));
    assert.throws(() => loadConfig({ cwd: dir, env: {}, configFile: f }), (e: unknown) => e instanceof ConfigError && message.test(e.message), JSON.stringify(raw));
  }
  assert.throws(() => loadConfig({ cwd: dir, env: { SEGMENTD_STREAM_PARTITIONS: "many" }, overrides: both }), /SEGMENTD_STREAM_PARTITIONS must be an integer from 1 to 1024, got "many"/);
});
