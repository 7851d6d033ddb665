/**
 * The files of an export job's batches, as AEP's Data Access API serves them
 * (`/data/foundation/export`, docs/aep-compatibility.md): each chunk of records the export
 * stages is one file of its batch (`part-00000.ndjson`, JSON Lines: one exported profile
 * record a line), named in the batch's `files`. Its records carry ids made of the batch id,
 * the file number and their line (`<batchId>/<file>/<line>`), so a file is read back from the
 * dataset by those ids: nothing is stored twice, a batch that never completed has no
 * records to read, and a record a data lifecycle work order deleted is gone from the file too.
 *
 * A file id (`dataSetFileId`) is `<batchId>-<file number>`.
 */
import type { DatasetCatalog, IngestBatches, ProfileReads } from "../../profiles/store.js";
import type { JsonObject, TenantScope } from "../../profiles/types.js";

/** Records per file: the export stages its records in chunks of this many (export-service.ts PAGE). */
export const RECORDS_PER_FILE = 1000;
const FILE_NAME = /^part-(\d{5})\.ndjson$/;
const FILE_ID = /^(.{1,200})-(\d{1,5})$/;

export function exportFileName(n: number): string {
  return `part-${String(n).padStart(5, "0")}.ndjson`;
}

/** The id of the record on `line` of file `n` of a batch. */
export function exportRecordId(batchId: string, n: number, line: number): string {
  return `${batchId}/${n}/${line}`;
}

export type ExportFileStore = Pick<IngestBatches, "getBatch"> & Pick<DatasetCatalog, "getDataset"> & Pick<ProfileReads, "listLakeRecords">;

export interface ExportFile {
  /** `dataSetFileId`. */
  id: string;
  batchId: string;
  datasetId: string;
  name: string;
  /** Epoch ms: the batch's completion. */
  created: number;
}

export interface ExportFileContent extends ExportFile {
  /** The file's bytes: one JSON record a line. */
  content: Buffer;
  records: number;
}

export class ExportFiles {
  constructor(private readonly store: ExportFileStore) {}

  /**
   * The files of a batch of this sandbox: null when the batch does not exist here. A batch
   * still loading, aborted or failed has none (its records never reached the dataset), and so
   * has a batch no export wrote.
   */
  async list(scope: TenantScope, batchId: string): Promise<ExportFile[] | null> {
    const b = await this.store.getBatch(scope, batchId);
    if (b === null) return null;
    if (b.status !== "success") return [];
    const dataset = await this.store.getDataset(scope, b.datasetId);
    // Export destinations only: a profile-enabled dataset keeps no files' records as written.
    if (dataset === null || dataset.profileEnabled) return [];
    const out: ExportFile[] = [];
    for (const name of b.files) {
      const m = FILE_NAME.exec(name);
      if (m !== null) out.push({ id: `${b.id}-${Number(m[1])}`, batchId: b.id, datasetId: b.datasetId, name, created: b.completed ?? b.updated });
    }
    return out;
  }

  /** A file with its content, or null when there is no such file in this sandbox. */
  async read(scope: TenantScope, fileId: string): Promise<ExportFileContent | null> {
    const m = FILE_ID.exec(fileId);
    if (m === null) return null;
    const file = (await this.list(scope, m[1]!))?.find((f) => f.id === fileId);
    if (file === undefined) return null;
    const n = Number(m[2]);
    const ids = Array.from({ length: RECORDS_PER_FILE }, (_, line) => exportRecordId(file.batchId, n, line));
    const lines: string[] = [];
    let afterSeq = 0;
    for (;;) {
      const page = await this.store.listLakeRecords(scope, file.datasetId, { eids: ids, afterSeq, limit: RECORDS_PER_FILE });
      for (const r of page) lines.push(JSON.stringify(r.body satisfies JsonObject));
      if (page.length < RECORDS_PER_FILE) break;
      afterSeq = page[page.length - 1]!.seq;
    }
    return { ...file, content: Buffer.from(lines.map((l) => `${l}\n`).join(""), "utf8"), records: lines.length };
  }
}
