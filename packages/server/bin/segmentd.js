#!/usr/bin/env node
// The `segmentd` command. npm links a package's bins while installing, before
// the postinstall build has written dist/, so the link points at this small file
// (committed) rather than at the build output; it loads the compiled CLI.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const main = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write("segmentd: the CLI is not built yet; run `npm run build` in the segmentd checkout first.\n");
  process.exit(1);
}
await import(main.href);
