#!/usr/bin/env node
// Builds every workspace in dependency order: the PQL package (tsc, with type
// declarations), the server (tsc), then the web UI bundle into the server's
// static assets (packages/web/build.mjs, when present). Run by `npm run build`
// and by `npm install` (postinstall), so that `npm start` runs compiled code.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");

function run(label, args) {
  const t0 = Date.now();
  execFileSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  console.log(`built ${label} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

run("@segmentd/pql", [tsc, "-p", "packages/pql/tsconfig.build.json"]);
run("@segmentd/server", [tsc, "-p", "packages/server/tsconfig.build.json"]);
if (existsSync(path.join(root, "packages/web/build.mjs"))) {
  run("@segmentd/web", [path.join(root, "packages/web/build.mjs")]);
}
