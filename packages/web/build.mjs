#!/usr/bin/env node
// Bundles the audience tool into the server's static assets
// (packages/server/static/: index.html, app.js, app.css), which segmentd
// serves at /. The PQL package is bundled in from its TypeScript sources (the
// `source` export condition), so diagnostics and classification run in the
// browser exactly as on the server. Run by `npm run build` (scripts/build.mjs)
// and by each browser test. Every file is written beside its place and renamed
// over it, so a server (or a second build running at the same time) never
// reads a half-written bundle.
import { build } from "esbuild";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, "..", "server", "static");
mkdirSync(out, { recursive: true });

function put(file, contents) {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file);
}

const common = { bundle: true, logLevel: "warning", legalComments: "none", target: ["es2022"], sourcemap: true, write: false };
const results = await Promise.all([
  build({
    ...common,
    entryPoints: [path.join(here, "src", "main.ts")],
    outfile: path.join(out, "app.js"),
    format: "esm",
    platform: "browser",
    conditions: ["source"],
    minify: true,
  }),
  build({ ...common, entryPoints: [path.join(here, "src", "styles.css")], outfile: path.join(out, "app.css"), minify: true }),
]);
for (const r of results) for (const f of r.outputFiles) put(f.path, f.contents);
put(path.join(out, "index.html"), readFileSync(path.join(here, "src", "index.html")));
