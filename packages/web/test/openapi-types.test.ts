/**
 * The web client's response types are generated from the server's
 * /openapi.json (scripts/gen-web-types.mjs); this regenerates them into a
 * temporary file and fails when the committed packages/web/src/api/openapi.d.ts
 * differs, so that a route schema changed without regenerating cannot pass.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const committed = path.join(root, "packages/web/src/api/openapi.d.ts");

test("packages/web/src/api/openapi.d.ts is what the server's /openapi.json generates", { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-web-types-"));
  try {
    const out = path.join(dir, "openapi.d.ts");
    await promisify(execFile)(process.execPath, ["--conditions=source", "--import", "tsx", path.join(root, "scripts/gen-web-types.mjs"), "--out", out], { cwd: root });
    const want = readFileSync(out, "utf8");
    const have = readFileSync(committed, "utf8");
    // The types the UI names must be there, not an empty document.
    for (const p of ["/data/core/ups/segment/definitions/{id}/explain", "/data/core/ups/segment/definitions/{id}/members", "/data/core/ups/segment/definitions/{id}/metrics", "/data/core/ups/segment/builder/estimate"]) {
      assert.ok(want.includes(`"${p}": {`), `the generated types hold ${p}`);
    }
    if (have !== want) {
      const a = have.split("\n");
      const b = want.split("\n");
      const i = a.findIndex((line, n) => line !== b[n]);
      assert.fail(`packages/web/src/api/openapi.d.ts is out of date with the route schemas (first difference at line ${i + 1}): run npm run gen:web-types`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
