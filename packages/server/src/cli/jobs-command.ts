/**
 * `segmentd jobs run [--all | <definition ids...>]`: runs one segment job in
 * this process, against the same stores as the service (so its memberships and
 * job record are those the API shows), with a progress bar and a summary table.
 *
 * The job goes through the same JobService/JobRunner as `POST /segment/jobs`;
 * do not run it while a server on the same embedded data directory is running
 * jobs (they would not queue behind each other).
 */
import type { Command } from "commander";
import cliProgress from "cli-progress";
import { loadConfig, type Config } from "../platform/config.js";
import { SystemClock } from "../platform/clock.js";
import { openMetadataStore } from "../stores/open-store.js";
import type { MetadataStore } from "../stores/types.js";
import { scopeOf, TenantDirectory, type TenantContext } from "../services/tenancy.js";
import { readDevCredentials, withDevTenant } from "../services/dev-bootstrap.js";
import type { ProfileStore } from "../profiles/store.js";
import { openProfileStore } from "../profiles/open.js";
import { JobRunner, type JobRunnerStore } from "../batch/jobs/job-runner.js";
import { JobService } from "../batch/jobs/job-service.js";
import type { SegmentJob } from "../batch/jobs/segment-job.js";
import { openBatchRepository } from "../batch/store/open.js";
import { DATABASE_URL_HELP } from "./serve-command.js";
import type { BatchRepository } from "../batch/store/types.js";

export interface JobsCommandStores {
  metadata: MetadataStore;
  /** The job runner's roles; the command closes the store when done. */
  profiles: JobRunnerStore & Pick<ProfileStore, "close">;
  repo: BatchRepository;
}

export interface JobsCommandDeps {
  /** Opens the stores for a configuration (tests inject theirs). */
  open?: (config: Config) => Promise<JobsCommandStores>;
  /** Where the table and messages go (default stdout). */
  write?: (text: string) => void;
  /** Show a progress bar (default: when stdout is a TTY). */
  progress?: boolean;
}

interface RunOptions {
  all?: boolean;
  org?: string;
  sandbox?: string;
  config?: string;
  dataDir?: string;
  databaseUrl?: string;
  backend?: string;
}

async function defaultOpen(config: Config): Promise<JobsCommandStores> {
  const metadata = await openMetadataStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  const profiles = openProfileStore({ dataDir: config.dataDir, worker: config.profileStore?.worker !== false, ...(config.databaseUrl === undefined ? {} : { databaseUrl: config.databaseUrl }) });
  return { metadata, profiles, repo: openBatchRepository(config) };
}

function tenantFor(config: Config, org: string | undefined, sandbox: string | undefined): TenantContext {
  let cfg = config;
  if (cfg.organizations.length === 0) {
    const dev = readDevCredentials(cfg.dataDir);
    if (dev === undefined) throw new Error("no organization is configured and no development tenant exists in the data directory; pass --config");
    cfg = withDevTenant(cfg, dev);
  }
  const dir = new TenantDirectory(cfg);
  const orgId = org ?? cfg.organizations[0]!.id;
  const t = sandbox === undefined ? dir.defaultSandbox(orgId) : dir.resolve(orgId, sandbox);
  if (t === undefined) throw new Error(`unknown organization or sandbox: ${orgId} / ${sandbox ?? "(default)"}`);
  return t;
}

/** The summary: one row per definition (its name, then its id) with the job's counters. */
export function summaryTable(job: SegmentJob, names: ReadonlyMap<string, string> = new Map()): string {
  const m = job.metrics;
  const ids = Object.keys(m.segmentedProfileCounter ?? {});
  const rows = ids.map((id) => {
    const s = m.segmentedProfileByStatusCounter?.[id];
    return [names.get(id) ?? "", id, String(m.segmentedProfileCounter?.[id] ?? 0), String(s?.realized ?? 0), String(s?.existing ?? 0), String(s?.exited ?? 0), m.evaluation?.[id] ?? ""];
  });
  const header = ["name", "definition", "qualified", "realized", "existing", "exited", "evaluated by"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i >= 2 && i <= 5 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ").trimEnd();
  const t = m.totalTime.totalTimeInMs ?? 0;
  return [
    line(header),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map(line),
    "",
    `job ${job.id} ${job.status}: ${m.totalProfiles ?? 0} profiles in ${(t / 1000).toFixed(1)} s`,
  ].join("\n");
}

export function registerJobsCommands(program: Command, deps: JobsCommandDeps = {}): void {
  const jobs = program.command("jobs").description("batch segmentation jobs");
  jobs
    .command("run")
    .description("run one segment job over the given definitions (or --all batch definitions) and print a summary")
    .argument("[ids...]", "segment definition ids")
    .option("--all", "every batch-enabled definition of the sandbox")
    .option("--org <id>", "organization (default: the first configured, or the development tenant)")
    .option("--sandbox <name>", "sandbox (default: the organization's default sandbox)")
    .option("--backend <columnar|sql|js>", "evaluation back end (default columnar: the columnar snapshot; sql: SQL where covered, in-memory otherwise; js: in-memory over a full scan)")
    .option("-c, --config <file>", "config file (env SEGMENTD_CONFIG)")
    .option("-d, --data-dir <dir>", "data directory (env SEGMENTD_DATA_DIR)")
    .option("--database-url <url>", DATABASE_URL_HELP)
    .action(async (ids: string[], o: RunOptions) => {
      const write = deps.write ?? ((s: string) => process.stdout.write(s + "\n"));
      if (o.all === true && ids.length > 0) throw new Error("pass either --all or definition ids, not both");
      if (o.all !== true && ids.length === 0) throw new Error("pass definition ids, or --all");
      if (o.backend !== undefined && o.backend !== "columnar" && o.backend !== "sql" && o.backend !== "js") throw new Error("--backend must be columnar, sql or js");
      const config = loadConfig({
        configFile: o.config,
        overrides: { ...(o.dataDir === undefined ? {} : { dataDir: o.dataDir }), ...(o.databaseUrl === undefined ? {} : { databaseUrl: o.databaseUrl }) },
      });
      const tenant = tenantFor(config, o.org, o.sandbox);
      const stores = await (deps.open ?? defaultOpen)(config);
      let barRef: cliProgress.SingleBar | null = null;
      const showBar = deps.progress ?? process.stdout.isTTY === true;
      try {
        // The bar and the table name the audiences, not only their ids.
        const selected = o.all === true
          ? (await stores.metadata.definitions.list(scopeOf(tenant), { filters: { batch: true }, sort: [], offset: 0, limit: 100 })).items
          : [...(await stores.metadata.definitions.getMany(scopeOf(tenant), ids)).values()];
        const names = new Map(selected.map((d) => [d.definition.id, d.definition.name]));
        const label = abbreviate([...names.values()].join(", "), 60);
        const bar = showBar ? new cliProgress.SingleBar({ format: `evaluating ${label.replace(/[{}]/g, "")} [{bar}] {value}/{total} profiles`, hideCursor: true }, cliProgress.Presets.shades_classic) : null;
        barRef = bar;
        const total = await stores.profiles.countProfiles(scopeOf(tenant));
        bar?.start(total, 0);
        const runner = new JobRunner({
          metadata: stores.metadata,
          profiles: stores.profiles,
          repo: stores.repo,
          clock: new SystemClock(),
          progressIntervalMs: 500,
          ...(o.backend === "columnar" || o.backend === "sql" || o.backend === "js" ? { backend: o.backend } : {}),
          // Several merge policies mean several scans: the bar grows to fit.
          onProgress: (_id, n) => {
            if (bar === null) return;
            if (n > bar.getTotal()) bar.setTotal(n);
            bar.update(n);
          },
        });
        const service = new JobService(stores.metadata, stores.repo, runner, new SystemClock());
        const created = await service.create(tenant, { segmentIds: o.all === true ? ["*"] : ids, source: "api", requestId: `cli-${Date.now()}` });
        await runner.idle();
        bar?.stop();
        const job = await service.get(tenant, created.id);
        write(summaryTable(job, await namesOf(stores.metadata, tenant, Object.keys(job.metrics.segmentedProfileCounter ?? {}), names)));
        if (job.status !== "SUCCEEDED") {
          for (const e of job.errors ?? []) write(`error ${e.code}: ${e.msg}`);
          process.exitCode = 1;
        }
      } finally {
        barRef?.stop();
        await stores.repo.close();
        await stores.profiles.close();
        await stores.metadata.close();
      }
    });
}

function abbreviate(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max - 1) + "…";
}

/** Names of the job's definitions: those already read, the rest from the store. */
async function namesOf(metadata: MetadataStore, tenant: TenantContext, ids: string[], known: Map<string, string>): Promise<Map<string, string>> {
  const missing = ids.filter((id) => !known.has(id));
  if (missing.length > 0) for (const [id, d] of await metadata.definitions.getMany(scopeOf(tenant), missing)) known.set(id, d.definition.name);
  return known;
}
