/**
 * `npm install` must print no EBADENGINE on any Node version our `engines` admits: every package in
 * package-lock.json must accept the lowest version of each of our ranges, and the Node running
 * the tests. (content-disposition@3 and cookie@2 want Node ≥ 22: root `overrides` pin the 2.x/1.x
 * lines, which have the same API.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./helpers/spawn.js";

type Version = [number, number, number];

function parseVersion(text: string): Version {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text.trim());
  if (!m) throw new Error(`not a version: ${text}`);
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

function cmp(a: Version, b: Version): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** One comparator of a node-semver range, as engines fields write them (`>=18`, `^20.9.0`, `20.x`, `10.*`, `*`). */
function satisfiesComparator(v: Version, c: string): boolean {
  const m = /^(>=|<=|>|<|=|\^|~)?\s*v?(\*|x|\d+)(?:\.(\*|x|\d+))?(?:\.(\*|x|\d+))?$/.exec(c);
  if (!m) throw new Error(`unsupported engines comparator '${c}'`);
  const op = m[1] ?? "";
  const wild = (s: string | undefined) => s === undefined || s === "*" || s === "x";
  if (wild(m[2])) return true;
  const major = Number(m[2]);
  const minor = wild(m[3]) ? null : Number(m[3]);
  const patch = wild(m[4]) ? null : Number(m[4]);
  const low: Version = [major, minor ?? 0, patch ?? 0];
  switch (op) {
    case ">=": return cmp(v, low) >= 0;
    case ">": return minor === null ? v[0] > major : patch === null ? cmp(v, [major, minor, Infinity]) > 0 : cmp(v, low) > 0;
    case "<": return cmp(v, low) < 0;
    case "<=": return minor === null ? v[0] <= major : patch === null ? v[0] < major || (v[0] === major && v[1] <= minor) : cmp(v, low) <= 0;
    case "^": return cmp(v, low) >= 0 && (major > 0 ? v[0] === major : v[0] === 0 && v[1] === (minor ?? 0));
    case "~": return cmp(v, low) >= 0 && v[0] === major && (minor === null || v[1] === minor);
    default: // a bare or x-range version
      return v[0] === major && (minor === null || v[1] === minor) && (patch === null || v[2] === patch);
  }
}

export function satisfies(version: string, range: string): boolean {
  const v = parseVersion(version);
  return range.split("||").some((alt) => {
    const parts = alt.trim().replace(/(>=|<=|>|<|=|\^|~)\s+/g, "$1").split(/\s+/).filter((p) => p !== "");
    return parts.length === 0 || parts.every((p) => satisfiesComparator(v, p));
  });
}

/** The lowest version each `||` alternative of our own range admits (">=20.19 <21 || >=22.13" → 20.19.0, 22.13.0). */
function lowestAdmitted(range: string): string[] {
  return range.split("||").map((alt) => {
    const m = />=\s*v?(\d+(?:\.\d+){0,2})/.exec(alt);
    if (!m) throw new Error(`our engines alternative '${alt}' has no lower bound`);
    return parseVersion(m[1]!).join(".");
  });
}

const rootPackage = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(path.join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version?: string; engines?: unknown }> };

test("the range checker reads the engines forms the lock file holds", () => {
  assert.equal(satisfies("20.19.0", ">=22"), false);
  assert.equal(satisfies("20.19.0", ">=18"), true);
  assert.equal(satisfies("22.12.0", "^20.19.0 || ^22.13.0 || >=24"), false);
  assert.equal(satisfies("22.13.0", "^20.19.0 || ^22.13.0 || >=24"), true);
  assert.equal(satisfies("20.19.0", "20.x || 22.x"), true);
  assert.equal(satisfies("21.0.0", "20 || >=22"), false);
  assert.equal(satisfies("20.19.0", ">= 18.x"), true);
  assert.equal(satisfies("20.19.0", ">=16 || 14 >=14.17"), true);
  assert.equal(satisfies("20.19.0", "10.* || >= 12.*"), true);
  assert.equal(satisfies("20.19.0", "*"), true);
  assert.equal(satisfies("20.18.9", ">=20.19 <21 || >=22.13"), false);
  assert.deepEqual(lowestAdmitted(">=20.19 <21 || >=22.13"), ["20.19.0", "22.13.0"]);
});

test("every installed package accepts the lowest Node of each of our engines ranges and the Node running this", () => {
  const versions = [...lowestAdmitted(rootPackage.engines.node), process.versions.node];
  assert.ok(satisfies(process.versions.node, rootPackage.engines.node), `this Node (${process.versions.node}) is outside our engines ${rootPackage.engines.node}`);
  const refused: string[] = [];
  for (const [where, p] of Object.entries(lock.packages)) {
    if (where === "") continue;
    const e = (p.engines as { node?: unknown } | undefined)?.node;
    if (typeof e !== "string") continue;
    for (const v of versions) if (!satisfies(v, e)) refused.push(`${where.replace(/^.*node_modules\//, "")}@${p.version} wants node ${e}, refuses ${v}`);
  }
  assert.deepEqual(refused, []);
});
