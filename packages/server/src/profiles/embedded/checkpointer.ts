// WAL checkpoints of the embedded store on a thread of their own.
//
// In WAL mode every commit appends pages to the -wal file, and SQLite's automatic
// checkpoint copies them back into the database file inside the COMMIT that crosses
// wal_autocheckpoint (1,000 pages): the writer that happens to commit then waits for
// the copy and its fsync, and so does every write queued behind it. Streaming and
// edge writes are small and continuous, so that wait is their tail latency (the
// streaming bench: append p99 ~40 ms with the automatic checkpoint, ~22 ms without).
//
// Here the writer's connection has the automatic checkpoint switched off and a second
// connection, on a worker thread, runs PASSIVE checkpoints every `intervalMs`. A
// PASSIVE checkpoint never blocks the writer or readers (it copies what no reader
// still needs and leaves the rest for the next round), and once a round has copied
// everything the writer starts the WAL over from its beginning, so the file stays
// small. Durability is unchanged: a commit is durable in the WAL before its promise
// resolves, checkpointed or not.
//
// The worker is a few lines of plain JavaScript evaluated from a string, so that it
// runs the same from the TypeScript sources (tests) and from the build.
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

export interface CheckpointerOptions {
  /** Database file (never ":memory:"). */
  path: string;
  /** The writer's synchronous setting: the checkpoint's fsyncs follow it. */
  synchronous: "full" | "normal";
  /** Milliseconds between checkpoint rounds (default 100). */
  intervalMs?: number;
  /** Called once if the worker fails or exits on its own: the store goes back to automatic checkpoints. */
  onStopped: (error: Error) => void;
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("synchronous = " + workerData.synchronous);
let rounds = 0;
const timer = setInterval(() => {
  db.pragma("wal_checkpoint(PASSIVE)");
  rounds++;
}, workerData.intervalMs);
parentPort.on("message", (m) => {
  if (m === "stop") {
    clearInterval(timer);
    db.close();
    parentPort.postMessage({ stopped: true, rounds });
    parentPort.close();
  }
});
parentPort.postMessage({ ready: true });
`;

const DRIVER = createRequire(import.meta.url).resolve("better-sqlite3");

export class BackgroundCheckpointer {
  private readonly worker: Worker;
  private stopping: Promise<void> | null = null;
  private failed = false;
  private exited = false;
  /** Resolves once the worker's connection is open (tests wait for it). */
  readonly ready: Promise<void>;

  constructor(private readonly opts: CheckpointerOptions) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { driver: DRIVER, path: opts.path, synchronous: opts.synchronous === "normal" ? "NORMAL" : "FULL", intervalMs: opts.intervalMs ?? 100 },
    });
    // The store's close stops it; it must never keep a process alive on its own.
    this.worker.unref();
    let markReady!: () => void;
    this.ready = new Promise((resolve) => { markReady = resolve; });
    this.worker.on("message", (m: { ready?: boolean }) => {
      if (m.ready === true) markReady();
    });
    this.worker.on("error", (e) => this.fail(e));
    this.worker.on("exit", (code) => {
      this.exited = true;
      markReady();
      if (this.stopping === null) this.fail(new Error(`the checkpoint thread exited (code ${code})`));
    });
  }

  private fail(error: Error): void {
    if (this.failed) return;
    this.failed = true;
    this.opts.onStopped(error);
  }

  /** Stops the rounds and closes the worker's connection (before the store closes its own, so that the last close checkpoints). */
  stop(): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      if (this.exited) return resolve();
      this.worker.once("exit", () => resolve());
      // Unreferenced, the worker would let the process end while close() still waits for it.
      this.worker.ref();
      this.worker.postMessage("stop");
    });
    return this.stopping;
  }
}
