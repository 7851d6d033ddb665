/**
 * Child process for the kill -9 test: starts a segment job over an embedded
 * data directory with a deliberately slow scan, prints `PROCESSING <jobId>`
 * once the job has evaluated its first chunk, and waits to be killed.
 *   node --conditions=source --import tsx crash-job-child.ts <dataDir> <orgId> <sandboxId> <definitionId>
 */
import path from "node:path";
import { openSqliteStore } from "../../../src/index.js";
import { EmbeddedProfileStore } from "../../../src/profiles/embedded/sqlite-store.js";
import type { ProfileStore, ScanOptions, ScannedProfile } from "../../../src/profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../../src/profiles/types.js";
import { JobRunner } from "../../../src/batch/jobs/job-runner.js";
import { JobService } from "../../../src/batch/jobs/job-service.js";
import { SqliteBatchRepository } from "../../../src/batch/store/sqlite-repository.js";

const [dataDir, orgId, sandboxId, definitionId] = process.argv.slice(2) as [string, string, string, string];
const metadata = openSqliteStore(dataDir);
const store = new EmbeddedProfileStore({ path: path.join(dataDir, "profiles.db") });
const slow = new Proxy(store, {
  get(target, prop, receiver) {
    if (prop !== "scanProfiles") return Reflect.get(target, prop, receiver) as unknown;
    return async function* (scope: TenantScope, policy: MergePolicySpec, o?: ScanOptions): AsyncIterable<ScannedProfile[]> {
      for await (const chunk of target.scanProfiles(scope, policy, o)) {
        yield chunk;
        await new Promise((r) => setTimeout(r, 2000));
      }
    };
  },
}) as ProfileStore;
const repo = new SqliteBatchRepository(path.join(dataDir, "batch.db"));
let announced = false;
const runner = new JobRunner({
  metadata,
  profiles: slow,
  repo,
  clock: { now: () => Date.now() },
  chunkSize: 10,
  progressIntervalMs: 0,
  onProgress: (id) => {
    if (announced) return;
    announced = true;
    // Give the progress write a moment to reach the file, then announce.
    setTimeout(() => process.stdout.write(`PROCESSING ${id}\n`), 200);
  },
});
const jobs = new JobService(metadata, repo, runner, { now: () => Date.now() });
await jobs.create({ orgId, sandbox: { sandboxId, sandboxName: "prod", type: "production", default: true } }, { segmentIds: [definitionId], source: "api", requestId: "crash-child" });
await new Promise(() => {});
