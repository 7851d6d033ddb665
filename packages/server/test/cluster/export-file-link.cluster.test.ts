/**
 * An export run's file read through a hub that does not have it (cluster/export-file-link.ts),
 * over a real nats-server: hub X has a 1.3 MB file on its disk, hub Y streams it in 512 KiB
 * requests (three) and gets exactly its bytes; a file no hub has, or an unsafe name, is null; a
 * hub that stops answering mid-file makes the stream fail rather than end short.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { EXPORT_FILE_CHUNK, linkExportFiles, type ExportFileTarget } from "../../src/cluster/export-file-link.js";

const SCOPE = { orgId: "org@AdobeOrg", sandboxName: "prod" };

/** A hub's side: files under `root/<flow>/<run>/<name>` (safe names only, as the activation side checks). */
function target(root: string): ExportFileTarget {
  return {
    remote: undefined,
    async localPath(_scope, flowId, runId, name) {
      if (!/^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(name) || name.includes("..")) return null;
      const file = path.join(root, flowId, runId, name);
      const info = await stat(file).catch(() => null);
      return info?.isFile() === true ? { file, size: info.size } : null;
    },
  };
}

async function readAll(r: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks);
}

describe("export files read from the hub that has them", { timeout: 60_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  const conns: NatsConnection[] = [];
  const content = randomBytes(EXPORT_FILE_CHUNK * 2 + 300_000);
  let x: ExportFileTarget;
  let y: ExportFileTarget;
  let unlinkX: () => void;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-export-link-"));
    server = await startNatsServer({ dir: path.join(dir, "nats"), domain: "hub" });
    mkdirSync(path.join(dir, "x", "flow-1", "run-1"), { recursive: true });
    mkdirSync(path.join(dir, "y"), { recursive: true });
    writeFileSync(path.join(dir, "x", "flow-1", "run-1", "aud-1.ndjson"), content);
    writeFileSync(path.join(dir, "x", "secret.txt"), "not a run's file");
    x = target(path.join(dir, "x"));
    y = target(path.join(dir, "y"));
    for (let i = 0; i < 2; i++) conns.push(await connect({ servers: server.url }));
    unlinkX = linkExportFiles(conns[0]!, x, (e) => assert.fail(String(e)));
    linkExportFiles(conns[1]!, y, (e) => assert.fail(String(e)));
  });
  after(async () => {
    for (const c of conns) await c.close();
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("hub Y streams hub X's file in 512 KiB requests: the same bytes", async () => {
    const f = await y.remote!(SCOPE, "flow-1", "run-1", "aud-1.ndjson");
    assert.ok(f !== null);
    assert.equal(f.size, content.length);
    assert.equal(f.where, "remote");
    const got = await readAll(f.open());
    assert.equal(got.length, content.length);
    assert.ok(got.equals(content), "the bytes are the file's");
  });

  it("a file no hub has, and a name outside a run, are null", async () => {
    assert.equal(await y.remote!(SCOPE, "flow-1", "run-1", "aud-2.ndjson"), null);
    assert.equal(await y.remote!(SCOPE, "flow-1", "run-1", "../../secret.txt"), null);
  });

  it("the hub that has the file gone mid-stream: the stream fails, it does not end short", async () => {
    const f = await y.remote!(SCOPE, "flow-1", "run-1", "aud-1.ndjson");
    assert.ok(f !== null);
    unlinkX();
    await assert.rejects(readAll(f.open()), /stopped answering at byte 524288 of 1348576/);
  });
});
