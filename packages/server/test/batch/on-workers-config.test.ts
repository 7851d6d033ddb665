/**
 * `batch.onWorkers` (#44): segment jobs on the worker fleet of a hub with `--workers`. A boolean;
 * anything else is refused naming the key, and nothing else of the batch section changes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyConfigFile, ConfigError, defaultConfig } from "../../src/platform/config.js";

test("batch.onWorkers is true or false; other values are refused naming the key", () => {
  assert.deepEqual(applyConfigFile(defaultConfig(), { batch: { onWorkers: true } }, "f.json").batch, { onWorkers: true });
  assert.deepEqual(applyConfigFile(defaultConfig(), { batch: { onWorkers: false, backfillChunk: 500 } }, "f.json").batch, { onWorkers: false, backfillChunk: 500 });
  assert.equal(defaultConfig().batch?.onWorkers, undefined, "unset by default: on a hub with --workers, jobs run on the workers");
  for (const bad of ["true", 1, null, {}]) {
    assert.throws(() => applyConfigFile(defaultConfig(), { batch: { onWorkers: bad } }, "f.json"), new ConfigError("f.json: batch.onWorkers must be true or false"));
  }
  assert.throws(() => applyConfigFile(defaultConfig(), { batch: { onworkers: true } }, "f.json"), new ConfigError('f.json: unknown key "batch.onworkers"'));
});
