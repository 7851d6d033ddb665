/**
 * `segmentd jobs run`: runs a job through the same service as the API and
 * prints the summary table; argument errors are refused before anything runs.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Command } from "commander";
import { createLogger, createServices, openSqliteStore, type MetadataStore } from "../../src/index.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { loadConfig } from "../../src/platform/config.js";
import { demoProfile } from "../../src/profiles/demo.js";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { SqliteBatchRepository } from "../../src/batch/store/sqlite-repository.js";
import { registerJobsCommands } from "../../src/cli/jobs-command.js";

const ORG = "CCCCCCCCCCCCCCCCCCCCCCCC@AdobeOrg";
const NOW = Date.now();

describe("segmentd jobs run", () => {
  let dir: string;
  let configFile: string;
  let gold: string;
  let goldCount: number;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "segmentd-cli-jobs-"));
    configFile = path.join(dir, "segmentd.config.json");
    writeFileSync(configFile, JSON.stringify({ dataDir: dir, organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }] }));
    const config = loadConfig({ configFile });
    const metadata = openSqliteStore(dir);
    const services = createServices({ config, store: metadata, clock: { now: () => NOW }, bus: new InProcessBus(() => {}), logger: createLogger("silent") });
    const tenant = services.tenants.resolve(ORG, "prod")!;
    await services.mergePolicies.ensureDefault(tenant);
    gold = (await services.definitions.create(tenant, { name: "gold", expression: { type: "PQL", format: "pql/text", value: 'loyalty.tier = "gold"' }, schema: { name: "_xdm.context.profile" } })).id;
    await metadata.close();
    const profiles = new EmbeddedProfileStore({ path: path.join(dir, "profiles.db") });
    const scope = { orgId: ORG, sandboxName: "prod" };
    const ds = (await profiles.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    const records = Array.from({ length: 80 }, (_, i) => demoProfile(i, { now: NOW, seed: 2 }));
    await ingestRecords(profiles, scope, ds, records.map((value, index) => ({ index, value })), { now: NOW });
    goldCount = records.filter((r) => {
      const c = r["consents"] as { marketing: { preferred: string }; collect: { val: string } };
      return (r["loyalty"] as { tier: string }).tier === "gold" && c.marketing.preferred !== "n" && c.collect.val !== "n";
    }).length;
    await profiles.close();
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function program(lines: string[]): Command {
    const p = new Command().exitOverride();
    registerJobsCommands(p, {
      write: (s) => lines.push(s),
      progress: false,
      open: async () => ({
        metadata: openSqliteStore(dir) as MetadataStore,
        profiles: new EmbeddedProfileStore({ path: path.join(dir, "profiles.db") }),
        repo: new SqliteBatchRepository(path.join(dir, "batch.db")),
      }),
    });
    return p;
  }

  it("runs every batch definition and prints the summary table", async () => {
    const lines: string[] = [];
    await program(lines).parseAsync(["node", "segmentd", "jobs", "run", "--all", "-c", configFile]);
    const out = lines.join("\n").split("\n");
    assert.match(out[0]!, /^name +definition +qualified +realized +existing +exited +evaluated by$/);
    const row = out.find((l) => l.includes(gold))!.split(/ {2,}/);
    assert.deepEqual(row, ["gold", gold, String(goldCount), String(goldCount), "0", "0", "columnar"]);
    assert.ok(goldCount > 0);
    assert.match(out[out.length - 1]!, /^job [0-9a-f-]{36} SUCCEEDED: 80 profiles in \d+\.\d s$/);
  });

  it("a second run reports the members as existing", async () => {
    const lines: string[] = [];
    await program(lines).parseAsync(["node", "segmentd", "jobs", "run", gold, "-c", configFile]);
    const row = lines.join("\n").split("\n").find((l) => l.includes(gold))!.split(/ {2,}/);
    assert.deepEqual(row, ["gold", gold, String(goldCount), "0", String(goldCount), "0", "columnar"]);
  });

  it("refuses --all together with ids, and no selection at all", async () => {
    await assert.rejects(program([]).parseAsync(["node", "segmentd", "jobs", "run", "--all", gold, "-c", configFile]), { message: "pass either --all or definition ids, not both" });
    await assert.rejects(program([]).parseAsync(["node", "segmentd", "jobs", "run", "-c", configFile]), { message: "pass definition ids, or --all" });
  });
});
