/**
 * Where an export run's files are read from. A file flow exports on the hub that holds its lease,
 * to that hub's disk; with several hubs a download may reach another one. The file is read here
 * when it is on this disk, else from the hub that has it (`remote`, set by the hubs' NATS link).
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import type { TenantScope } from "../profiles/types.js";
import { isSafeFileName } from "./delivery/file-writer.js";
import type { FileExportReports } from "./delivery/file-export.js";
import type { DeliveryReports } from "./types.js";

export interface ExportFile {
  size: number;
  /** Where the bytes come from: this disk, or the hub that has the file. */
  where: "here" | "remote";
  open(): Readable;
}

export type RemoteExportFiles = (scope: TenantScope, flowId: string, runId: string, name: string) => Promise<ExportFile | null>;

export class ExportFileAccess {
  /** Another hub's file (several hubs); unset: this disk only. */
  remote: RemoteExportFiles | undefined;

  constructor(private readonly reports: () => (DeliveryReports & { files?: FileExportReports }) | undefined) {}

  /** The file's path on this disk, when it is there (a safe name only). */
  async localPath(scope: TenantScope, flowId: string, runId: string, name: string): Promise<{ file: string; size: number } | null> {
    const files = this.reports()?.files;
    if (files === undefined || !isSafeFileName(name)) return null;
    const file = path.join(files.runDir(scope, flowId, runId), name);
    const info = await stat(file).catch(() => null);
    return info !== null && info.isFile() ? { file, size: info.size } : null;
  }

  /** The file here, or on the hub that has it; null when no hub has it. */
  async find(scope: TenantScope, flowId: string, runId: string, name: string): Promise<ExportFile | null> {
    const local = await this.localPath(scope, flowId, runId, name);
    if (local !== null) return { size: local.size, where: "here", open: () => createReadStream(local.file) };
    return (await this.remote?.(scope, flowId, runId, name)) ?? null;
  }
}
