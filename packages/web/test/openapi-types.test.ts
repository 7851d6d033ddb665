/**
 * The web client's response types are generated from the server's
 * /openapi.json (scripts/gen-web-types.mjs); this regenerates them into a
 * temporary directory and fails when the committed packages/web/src/api/openapi.d.ts
 * or any file of packages/web/src/api/openapi/ differs (or one is missing or extra),
 * so that a route schema changed without regenerating cannot pass.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const committed = path.join(root, "packages/web/src/api");

/** openapi.d.ts and openapi/*.d.ts under `dir`, by their path relative to it. */
function generatedFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>([["openapi.d.ts", readFileSync(path.join(dir, "openapi.d.ts"), "utf8")]]);
  for (const f of readdirSync(path.join(dir, "openapi")).sort()) out.set(`openapi/${f}`, readFileSync(path.join(dir, "openapi", f), "utf8"));
  return out;
}

test("packages/web/src/api/openapi.d.ts and openapi/ are what the server's /openapi.json generates", { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-web-types-"));
  try {
    await promisify(execFile)(process.execPath, ["--conditions=source", "--import", "tsx", path.join(root, "scripts/gen-web-types.mjs"), "--out", dir], { cwd: root });
    const want = generatedFiles(dir);
    const have = generatedFiles(committed);
    // The types the UI names must be there, not an empty document.
    const all = [...want.values()].join("\n");
    for (const p of ["/data/core/ups/segment/definitions/{id}/explain", "/data/core/ups/segment/definitions/{id}/members", "/data/core/ups/segment/definitions/{id}/metrics", "/data/core/ups/segment/builder/estimate"]) {
      assert.ok(all.includes(`"${p}": {`), `the generated types hold ${p}`);
    }
    assert.deepEqual([...have.keys()], [...want.keys()], "the committed files are the generated ones: run npm run gen:web-types");
    for (const [f, text] of want) {
      const a = have.get(f)!.split("\n");
      const b = text.split("\n");
      const i = a.findIndex((line, n) => line !== b[n]);
      if (i >= 0 || a.length !== b.length) {
        assert.fail(`packages/web/src/api/${f} is out of date with the route schemas (first difference at line ${(i >= 0 ? i : Math.min(a.length, b.length)) + 1}): run npm run gen:web-types`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
