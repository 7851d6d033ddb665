/**
 * Several hubs (issue #43): a file flow's runs are written to the disk of the hub that exported
 * them; a download through another hub reads the file from that one, 512 KiB per core NATS
 * request on one subject every hub listens to. Only a hub that has the file answers (the bytes,
 * and the file's size in a header); none within 3 s: the file is on no live hub's disk.
 */
import { open } from "node:fs/promises";
import { Readable } from "node:stream";
import { headers, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { EXPORT_FILE_SUBJECT } from "./subjects.js";

type Scope = { orgId: string; sandboxName: string };

/** The activation side, structurally (cluster does not import activation). */
export interface ExportFileTarget {
  localPath(scope: Scope, flowId: string, runId: string, name: string): Promise<{ file: string; size: number } | null>;
  remote: ((scope: Scope, flowId: string, runId: string, name: string) => Promise<{ size: number; where: "here" | "remote"; open(): Readable } | null>) | undefined;
}

interface Request {
  v: 1;
  scope: Scope;
  flowId: string;
  runId: string;
  name: string;
  offset: number;
}

export const EXPORT_FILE_CHUNK = 512 * 1024;
const SIZE_HEADER = "Segmentd-File-Size";
const TIMEOUT_MS = 3_000;
const text = new TextDecoder();

export function linkExportFiles(nc: NatsConnection, target: ExportFileTarget, onError: (err: unknown) => void): () => void {
  const sub: Subscription = nc.subscribe(EXPORT_FILE_SUBJECT, {
    callback: (err, msg) => {
      if (err !== null) return onError(err);
      void (async () => {
        const req = JSON.parse(text.decode(msg.data)) as Request;
        const local = await target.localPath(req.scope, req.flowId, req.runId, req.name);
        // Not on this disk: the hub that has it answers.
        if (local === null || !Number.isSafeInteger(req.offset) || req.offset < 0 || req.offset > local.size) return;
        const fh = await open(local.file, "r");
        try {
          const buf = Buffer.alloc(Math.min(EXPORT_FILE_CHUNK, local.size - req.offset));
          const { bytesRead } = await fh.read(buf, 0, buf.length, req.offset);
          const h = headers();
          h.set(SIZE_HEADER, String(local.size));
          msg.respond(buf.subarray(0, bytesRead), { headers: h });
        } finally {
          await fh.close();
        }
      })().catch(onError);
    },
  });

  const chunk = async (req: Request): Promise<{ size: number; data: Uint8Array } | null> => {
    try {
      const m = await nc.request(EXPORT_FILE_SUBJECT, JSON.stringify(req), { timeout: TIMEOUT_MS });
      const size = Number(m.headers?.get(SIZE_HEADER));
      return Number.isSafeInteger(size) ? { size, data: m.data } : null;
    } catch {
      return null;
    }
  };

  target.remote = async (scope, flowId, runId, name) => {
    const base = { v: 1 as const, scope, flowId, runId, name };
    const first = await chunk({ ...base, offset: 0 });
    if (first === null) return null;
    const size = first.size;
    async function* bytes(): AsyncGenerator<Uint8Array> {
      let offset = first!.data.byteLength;
      yield first!.data;
      while (offset < size) {
        const next = await chunk({ ...base, offset });
        if (next === null || next.data.byteLength === 0) throw new Error(`export file '${name}' of run '${runId}': the hub that has it stopped answering at byte ${offset} of ${size}`);
        offset += next.data.byteLength;
        yield next.data;
      }
    }
    return { size, where: "remote", open: () => Readable.from(bytes(), { objectMode: false }) };
  };
  return () => {
    sub.unsubscribe();
    target.remote = undefined;
  };
}
