/**
 * Acceptance 2 with a real kill -9: a job is killed while PROCESSING (after it
 * evaluated part of the data); after the restart the job is FAILED and the
 * memberships are exactly those of the last complete job.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { createLogger, createServices, openSqliteStore } from "../../../src/index.js";
import { InProcessBus } from "../../../src/platform/bus.js";
import { loadConfig } from "../../../src/platform/config.js";
import { demoProfile } from "../../../src/profiles/demo.js";
import { EmbeddedProfileStore } from "../../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../../src/profiles/ingest.js";
import { JobRunner } from "../../../src/batch/jobs/job-runner.js";
import { JobService } from "../../../src/batch/jobs/job-service.js";
import type { StoredJob } from "../../../src/batch/jobs/segment-job.js";
import { SqliteBatchRepository } from "../../../src/batch/store/sqlite-repository.js";
import type { TenantContext } from "../../../src/services/tenancy.js";
import { killAll, spawnTs } from "../../helpers/spawn.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const ORG = "DDDDDDDDDDDDDDDDDDDDDDDD@AdobeOrg";
const SCOPE = { orgId: ORG, sandboxName: "prod" };

function open(dir: string) {
  const metadata = openSqliteStore(dir);
  const profiles = new EmbeddedProfileStore({ path: path.join(dir, "profiles.db") });
  const repo = new SqliteBatchRepository(path.join(dir, "batch.db"));
  const runner = new JobRunner({ metadata, profiles, repo, clock: { now: () => Date.now() } });
  const jobs = new JobService(metadata, repo, runner, { now: () => Date.now() });
  return { metadata, profiles, repo, runner, jobs, async close() { await runner.stop(); await repo.close(); await profiles.close(); await metadata.close(); } };
}

describe("kill -9 during a segment job (embedded)", () => {
  let dir: string;
  let tenant: TenantContext;
  let gold: string;
  after(() => {
    killAll();
    rmSync(dir, { recursive: true, force: true });
  });

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "segmentd-crash-job-"));
    const configFile = path.join(dir, "config.json");
    writeFileSync(configFile, JSON.stringify({ dataDir: dir, organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }] }));
    const config = loadConfig({ configFile });
    const metadata = openSqliteStore(dir);
    const services = createServices({ config, store: metadata, clock: { now: () => Date.now() }, bus: new InProcessBus(() => {}), logger: createLogger("silent") });
    tenant = services.tenants.resolve(ORG, "prod")!;
    await services.mergePolicies.ensureDefault(tenant);
    gold = (await services.definitions.create(tenant, { name: "gold", expression: { type: "PQL", format: "pql/text", value: 'loyalty.tier = "gold"' }, schema: { name: "_xdm.context.profile" } })).id;
    await metadata.close();
  });

  it("leaves the job FAILED after restart, with the last complete job's memberships", async () => {
    const now = Date.now();
    const s1 = open(dir);
    const ds = (await s1.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, now)).id;
    const people = Array.from({ length: 60 }, (_, i) => demoProfile(i, { now, seed: 21 }));
    await ingestRecords(s1.profiles, SCOPE, ds, people.map((value, index) => ({ index, value })), { now });
    const first = await s1.jobs.create(tenant, { segmentIds: [gold], source: "api", requestId: "r1" });
    await s1.runner.idle();
    assert.equal((await s1.jobs.get(tenant, first.id)).status, "SUCCEEDED");
    const snapshot = await s1.profiles.listMembers(SCOPE, gold, { limit: 1000 });
    const transitions = await s1.profiles.listTransitions(SCOPE);
    assert.ok(snapshot.length > 0);
    // Everybody becomes gold: a completed second job would add members.
    const later = now + 1000;
    await ingestRecords(s1.profiles, SCOPE, ds, people.map((p, index) => ({ index, value: { identityMap: p["identityMap"], loyalty: { tier: "gold" }, _repo: { modifyDate: new Date(later).toISOString() } } })), { now: later });
    await s1.close();

    const child = spawnTs(path.join(here, "crash-job-child.ts"), [dir, ORG, tenant.sandbox.sandboxId, gold]);
    const jobId = await new Promise<string>((resolve, reject) => {
      const t = setInterval(() => {
        const m = /PROCESSING (\S+)/.exec(child.stdout());
        if (m) {
          clearInterval(t);
          resolve(m[1]!);
        }
      }, 20);
      void child.exited.then(() => reject(new Error(`child exited early: ${child.stderr()}`)));
    });
    child.child.kill("SIGKILL");
    assert.deepEqual(await child.exited, { code: null, signal: "SIGKILL" });

    const s2 = open(dir);
    try {
      const raw = await s2.repo.get<StoredJob>("segment-job", SCOPE, jobId);
      assert.equal(raw?.status, "PROCESSING", "killed mid-job");
      assert.ok((raw?.doc.job.metrics.profilesProcessed ?? 0) > 0, "it had evaluated part of the data");
      await s2.runner.recover();
      const job = await s2.jobs.get(tenant, jobId);
      assert.equal(job.status, "FAILED");
      assert.equal(job.errors?.[0]?.code, "SEGMENTD-JOB-INTERRUPTED");
      assert.deepEqual(await s2.profiles.listMembers(SCOPE, gold, { limit: 1000 }), snapshot);
      assert.deepEqual(await s2.profiles.listTransitions(SCOPE), transitions);
    } finally {
      await s2.close();
    }
  });
});
