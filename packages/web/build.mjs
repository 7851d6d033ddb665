#!/usr/bin/env node
// Bundles the audience tool into the server's static assets
// (packages/server/static/: index.html, app.js, app.css), which segmentd
// serves at /. The PQL package is bundled in from its TypeScript sources (the
// `source` export condition), so diagnostics and classification run in the
// browser exactly as on the server. Run by `npm run build` (scripts/build.mjs).
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, "..", "server", "static");
mkdirSync(out, { recursive: true });

const common = { bundle: true, logLevel: "warning", legalComments: "none", target: ["es2022"], sourcemap: true };
await build({
  ...common,
  entryPoints: [path.join(here, "src", "main.ts")],
  outfile: path.join(out, "app.js"),
  format: "esm",
  platform: "browser",
  conditions: ["source"],
  minify: true,
});
await build({ ...common, entryPoints: [path.join(here, "src", "styles.css")], outfile: path.join(out, "app.css"), minify: true });
copyFileSync(path.join(here, "src", "index.html"), path.join(out, "index.html"));
