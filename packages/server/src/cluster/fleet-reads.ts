/**
 * Previews, the builder's estimates and edit impact over the worker fleet (#44; what is asked and
 * how answers merge: batch/previews/fleet-reads.ts). The hub publishes a read on a core NATS
 * subject every worker listens to, with its own inbox as the reply subject; each worker answers
 * over its shard, one answer per partition it holds (in pieces under NATS's payload limit), then
 * says which partitions it answered for. The hub keeps the first answer of each partition; when
 * every live worker has answered and a partition is still missing (it moved between two workers'
 * reads), or a live worker has not acknowledged the read (it subscribed a moment after it was
 * sent), it asks again. A worker's error ends the read with it (an API error keeps its status
 * and code); no worker alive, or the deadline passed, ends it saying so.
 */
import { randomUUID } from "node:crypto";
import { createInbox, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { FleetReads, ShardReadAnswer, ShardReadRequest } from "../batch/previews/fleet-reads.js";
import { answerOnShard } from "../batch/shards/shard-reads.js";
import type { WorkerShard } from "../batch/shards/worker-shard.js";
import type { TenantScope } from "../profiles/types.js";
import { ApiError } from "../services/errors.js";
import type { TenantDirectory } from "../services/tenancy.js";
import { SHARD_READ_SUBJECT } from "./subjects.js";

interface ReadMessage {
  v: 1;
  id: string;
  orgId: string;
  sandboxName: string;
  partitions: number;
  request: ShardReadRequest;
}

type Reply =
  /** Sent on receipt, before the evaluation: a worker that heard the read is not asked again. */
  | { id: string; worker: string; ack: true }
  | { id: string; worker: string; partition: number; seq: number; of: number; data: string }
  | { id: string; worker: string; done: number[] }
  | { id: string; worker: string; error: { status?: number; code?: string; message: string } };

/** Characters of an answer's JSON per message: escaped and UTF-8 encoded, still under NATS's default 1 MiB payload. */
const PIECE = 128 * 1024;
const text = new TextDecoder();

export interface FleetReadsOptions {
  nc: NatsConnection;
  partitions: number;
  /** The workers alive (their lease heartbeats). */
  liveWorkers: () => Promise<ReadonlySet<string>>;
  /** How long a read may take (default 10 min: a worker's first read of a sandbox builds its shard). */
  deadlineMs?: number;
  /** How long a read waits for a worker to start when none is alive (default 10 s). */
  idleMs?: number;
}

export class FleetReadsClient implements FleetReads {
  constructor(private readonly o: FleetReadsOptions) {}

  async read(scope: TenantScope, request: ShardReadRequest): Promise<Map<number, ShardReadAnswer>> {
    const { nc, partitions } = this.o;
    const id = randomUUID();
    const inbox = createInbox();
    const answers = new Map<number, ShardReadAnswer>();
    const pieces = new Map<string, string[]>();
    const done = new Set<string>();
    /** Workers that acknowledged the read (a live one that did not, e.g. subscribed a moment after it was sent, is asked again). */
    const heard = new Set<string>();
    let failure: Error | null = null;
    let wake: () => void = () => undefined;
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err !== null) failure ??= err;
        else failure ??= receive(msg);
        wake();
      },
    });
    const receive = (msg: Msg): Error | null => {
      // No subscriber at all answers with an empty status message (no responders): nothing to read.
      if (msg.data.length === 0) return null;
      let r: Reply;
      try {
        r = JSON.parse(text.decode(msg.data)) as Reply;
      } catch {
        return null;
      }
      if (r?.id !== id) return null;
      heard.add(r.worker);
      if ("ack" in r) return null;
      if ("error" in r) return r.error.status !== undefined && r.error.code !== undefined ? new ApiError(r.error.status, r.error.code, r.error.message) : new Error(`worker ${r.worker}: ${r.error.message}`);
      if ("done" in r) {
        done.add(r.worker);
        return null;
      }
      if (answers.has(r.partition)) return null;
      const k = `${r.worker}\u0000${r.partition}`;
      let got = pieces.get(k);
      if (got === undefined) pieces.set(k, (got = []));
      got[r.seq] = r.data;
      if (got.filter((x) => x !== undefined).length < r.of) return null;
      pieces.delete(k);
      answers.set(r.partition, JSON.parse(got.join("")) as ShardReadAnswer);
      return null;
    };
    const ask = () => nc.publish(SHARD_READ_SUBJECT, JSON.stringify({ v: 1, id, orgId: scope.orgId, sandboxName: scope.sandboxName, partitions, request } satisfies ReadMessage), { reply: inbox });
    const started = Date.now();
    const deadline = started + (this.o.deadlineMs ?? 10 * 60_000);
    try {
      ask();
      let asked = Date.now();
      for (;;) {
        if (failure !== null) throw failure;
        if (answers.size >= partitions) return answers;
        if (Date.now() > deadline) throw new Error(`the workers answered for ${answers.size} of ${partitions} partitions within ${Math.round((deadline - started) / 1000)} s`);
        const live = await this.o.liveWorkers();
        if (live.size === 0 && Date.now() - started > (this.o.idleMs ?? 10_000)) {
          throw new Error(`no worker is running: with batch.onWorkers, previews, estimates and edit impact are evaluated by \`segmentd worker\` processes (${partitions - answers.size} of ${partitions} partitions not answered)`);
        }
        // Every live worker answered and some partition is not in any answer: it moved meanwhile.
        // Or a live worker has not heard the read at all: it is sent again (a worker evaluating it only acknowledges).
        const all = live.size > 0 && [...live].every((w) => done.has(w));
        const unheard = [...live].some((w) => !heard.has(w));
        if ((all || unheard) && Date.now() - asked > 1_000) {
          if (all) done.clear();
          ask();
          asked = Date.now();
        }
        await new Promise<void>((res) => {
          const t = setTimeout(res, 250);
          wake = () => {
            clearTimeout(t);
            res();
          };
        });
      }
    } finally {
      sub.unsubscribe();
    }
  }
}

export interface ShardReadServerOptions {
  nc: NatsConnection;
  shard: WorkerShard;
  tenants: TenantDirectory;
  workerId: string;
  partitions: number;
  onError(err: unknown): void;
}

/** A worker answers the hub's reads over its shard; resolves, once the server has the subscription, to the unsubscribe. */
export async function serveShardReads(o: ShardReadServerOptions): Promise<() => void> {
  /** Reads being evaluated here: the same read asked again meanwhile is only acknowledged. */
  const inFlight = new Set<string>();
  const sub = o.nc.subscribe(SHARD_READ_SUBJECT, {
    callback: (err, msg) => {
      if (err !== null) return o.onError(err);
      void answer(msg).catch(o.onError);
    },
  });
  const answer = async (msg: Msg): Promise<void> => {
    const reply = msg.reply;
    if (reply === undefined || reply === "") return;
    let m: ReadMessage;
    try {
      m = JSON.parse(text.decode(msg.data)) as ReadMessage;
    } catch {
      return;
    }
    if (m?.v !== 1 || typeof m.id !== "string") return;
    const send = (r: Reply) => o.nc.publish(reply, JSON.stringify(r));
    send({ id: m.id, worker: o.workerId, ack: true });
    if (inFlight.has(m.id)) return;
    inFlight.add(m.id);
    try {
      const tenant = o.tenants.resolve(m.orgId, m.sandboxName);
      if (tenant === undefined) throw new Error(`sandbox ${m.sandboxName} of ${m.orgId} is not configured on worker ${o.workerId}`);
      if (m.partitions !== o.partitions) throw new Error(`the read is for ${m.partitions} partitions; worker ${o.workerId} reads ${o.partitions}`);
      const answers = await o.shard.read(tenant, (r) => answerOnShard(r, tenant, m.request));
      for (const [partition, a] of answers) {
        const json = JSON.stringify(a);
        const of = Math.max(1, Math.ceil(json.length / PIECE));
        for (let seq = 0; seq < of; seq++) send({ id: m.id, worker: o.workerId, partition, seq, of, data: json.slice(seq * PIECE, (seq + 1) * PIECE) });
      }
      send({ id: m.id, worker: o.workerId, done: [...answers.keys()] });
    } catch (e) {
      const error = e instanceof ApiError ? { status: e.status, code: e.code, message: e.message } : { message: e instanceof Error ? e.message : String(e) };
      send({ id: m.id, worker: o.workerId, error });
    } finally {
      inFlight.delete(m.id);
    }
  };
  await o.nc.flush();
  return () => sub.unsubscribe();
}
