/**
 * An evaluation worker (issue #37): rebuilds snapshot parts from their descriptors (views on
 * the main thread's shared memory, cached by key), compiles the expression it is sent and runs
 * it over a part under the request's budget, writing one flag per entry row into shared memory.
 * Errors go back as status, code and message (the budget's 422/503 keep theirs).
 */
import { setPriority } from "node:os";
import { parentPort } from "node:worker_threads";
import { ApiError } from "../../services/errors.js";
import { EvaluationBudget } from "../../services/evaluation-budget.js";
import type { Column } from "../columnar/layout.js";
import { compileDefinition } from "../columnar/predicate.js";
import { partFromDescriptor } from "../columnar/snapshot-file.js";
import type { SnapshotPart } from "../columnar/snapshot.js";
import type { ListChunk, PartMessage, RunReply, RunRequest } from "./protocol.js";

/**
 * The worker thread yields the CPU to the main thread (nice 10; on Linux the nice value is a
 * thread's): with two cores, the event loop serving /healthz, the edge and other tenants keeps its
 * core while evaluations share what is left.
 */
try {
  setPriority(0, 10);
} catch {
  // Not permitted on this platform: evaluation still runs off the event loop.
}

const parts = new Map<number, SnapshotPart>();
/** Parts being handed over: arrays received, string lists arriving in chunks. */
const arriving = new Map<number, { buffers: PartMessage["buffers"]; part: PartMessage["part"]; lists: string[][] }>();

function run(m: RunRequest): RunReply {
  const t0 = performance.now();
  for (const k of m.drop) {
    parts.delete(k);
    arriving.delete(k);
  }
  const handed = arriving.get(m.part);
  if (handed !== undefined) {
    arriving.delete(m.part);
    parts.set(m.part, partFromDescriptor(handed));
  }
  const part = parts.get(m.part);
  if (part === undefined) return { id: m.id, ok: false, message: `evaluation worker: part ${m.part} is not held` };
  const budget = new EvaluationBudget(m.limits, m.deadlineInMs === null ? { deadline: false } : { deadline: true, deadlineInMs: m.deadlineInMs });
  const compiled = compileDefinition(m.query, m.now);
  const overrides = new Map<string, Column>(m.overrides.map((o) => [o.path, { kind: "string", codes: o.codes, dict: o.dict }]));
  budget.run(() => compiled.run(part.data(overrides), m.out));
  return { id: m.id, ok: true, ms: performance.now() - t0, columnar: compiled.columnar };
}

parentPort!.on("message", (m: PartMessage | ListChunk | RunRequest) => {
  if (m.type === "part") {
    arriving.set(m.key, { buffers: m.buffers, part: m.part, lists: Array.from({ length: m.lists }, () => []) });
    return;
  }
  if (m.type === "list") {
    const list = arriving.get(m.key)?.lists[m.list];
    if (list !== undefined) for (const x of m.strings) list.push(x);
    return;
  }
  let reply: RunReply;
  try {
    reply = run(m);
  } catch (e) {
    reply = e instanceof ApiError ? { id: m.id, ok: false, status: e.status, code: e.code, message: e.message } : { id: m.id, ok: false, message: e instanceof Error ? e.message : String(e) };
  }
  parentPort!.postMessage(reply);
});
