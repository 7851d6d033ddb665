// A database file path in a fresh temporary directory, removed (with the directory) after `fn`.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export async function withTempFile(label: string, fn: (file: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `segmentd-${label}-`));
  try {
    await fn(path.join(dir, "profiles.sqlite"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
