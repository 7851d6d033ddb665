/**
 * Every relative link of README.md and docs/*.md resolves: the file exists and, with `#anchor`, a
 * heading of that file has that anchor (GitHub's rule: lower case, punctuation dropped, spaces to
 * hyphens, `-1`, `-2` … for repeats). Issue #39 found `performance.md#sqlite-page-cache-and-small-stores`,
 * which did not exist; this catches the next one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./helpers/spawn.js";

/** GitHub's anchor for a heading's text. */
export function slug(heading: string): string {
  return heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a markdown file's headings (outside fenced code blocks). */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative link targets `[text](target)` outside code (fenced blocks and `inline code`). */
export function links(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    const text = line.replace(/`[^`]*`/g, "");
    for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) out.push(target);
    }
  }
  return out;
}

const files = ["README.md", ...readdirSync(path.join(REPO_ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];

test("the anchor and link readers follow GitHub's rules", () => {
  assert.equal(slug("Segmentation Service (`segmentation.yaml`)"), "segmentation-service-segmentationyaml");
  assert.equal(slug("Schema Registry (`/data/foundation/schemaregistry`)"), "schema-registry-datafoundationschemaregistry");
  assert.equal(slug("### not a heading"), "-not-a-heading");
  assert.deepEqual([...anchors("# A\n## B c\n```\n# not\n```\n## B c\n")], ["a", "b-c", "b-c-1"]);
  assert.deepEqual(links("see [x](a.md#b), [y](https://e.com), `[z](no.md)` and [w](#here)"), ["a.md#b", "#here"]);
});

test("every relative link in README.md and docs/*.md resolves to a file and a heading", () => {
  const broken: string[] = [];
  for (const file of files) {
    const text = readFileSync(path.join(REPO_ROOT, file), "utf8");
    for (const target of links(text)) {
      const [rawPath, anchor] = target.split("#", 2) as [string, string | undefined];
      const resolved = rawPath === "" ? path.join(REPO_ROOT, file) : path.resolve(path.dirname(path.join(REPO_ROOT, file)), decodeURIComponent(rawPath));
      if (!existsSync(resolved)) {
        broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (anchor === undefined || anchor === "" || statSync(resolved).isDirectory() || !resolved.endsWith(".md")) continue;
      if (!anchors(readFileSync(resolved, "utf8")).has(anchor.toLowerCase())) broken.push(`${file}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(broken, []);
});
