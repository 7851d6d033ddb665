/**
 * The import rules of docs/architecture.md ("Parts and who may import whom"), checked over the
 * import graph of packages/server/src and packages/pql/src. A new circle, a new arrow between
 * modules or an arrow the rules forbid fails here until someone changes the code or, on purpose,
 * the table below (and the picture in docs/architecture.md with it).
 *
 * A module is a top folder under packages/server/src; `root` is app.ts, server.ts and index.ts
 * (the composition root) and `pql` is the @segmentd/pql package.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// ---------------------------------------------------------------------------------------------
// The rules.

/** Every arrow between modules that the code has: a new one fails, and so does one no longer used. */
const MODULE_ARROWS: Record<string, readonly string[]> = {
  platform: [],
  "storage-kit": ["platform"],
  stores: ["platform", "storage-kit"],
  services: ["platform", "stores", "pql"],
  http: ["platform", "services", "stores", "profiles"],
  profiles: ["platform", "storage-kit", "services", "http"],
  hygiene: ["platform", "storage-kit", "services", "profiles", "http"],
  batch: ["platform", "storage-kit", "services", "stores", "profiles", "http", "pql"],
  streaming: ["platform", "services", "stores", "profiles", "pql"],
  metrics: ["platform", "services", "stores", "profiles", "http"],
  edge: ["platform", "services", "stores", "profiles", "http", "streaming", "metrics", "pql"],
  web: ["platform", "services"],
  activation: ["platform", "storage-kit", "services", "profiles", "http"],
  cluster: ["platform", "storage-kit", "services", "stores", "profiles", "http", "streaming", "edge", "batch", "pql"],
  computed: ["platform", "services", "stores", "http", "profiles", "pql"],
  root: ["platform", "services", "stores", "http", "profiles", "hygiene", "batch", "streaming", "edge", "metrics", "web", "cluster", "activation", "computed"],
  cli: ["platform", "services", "stores", "profiles", "batch", "root", "pql", "cluster"],
};

/** The engines. One may reach another only through the files named in ENGINE_SURFACES. */
const ENGINES = ["batch", "streaming", "edge", "metrics", "hygiene", "cluster"];
const ENGINE_SURFACES: Record<string, readonly string[]> = {
  "edge → streaming": ["streaming/engine.ts", "streaming/definition-catalog.ts", "streaming/profile-state.ts", "streaming/reverse-index.ts", "streaming/plugin.ts"],
  "edge → metrics": ["metrics/routes.ts"],
  "cluster → edge": ["edge/plugin.ts", "edge/location-store.ts", "edge/locations.ts", "edge/hub-forwarder.ts", "edge/interact.ts", "edge/datastreams.ts", "edge/disqualification.ts", "edge/routes.ts", "edge/errors.ts"],
  "cluster → streaming": ["streaming/definition-catalog.ts", "streaming/profile-state.ts", "streaming/engine.ts", "streaming/plugin.ts"],
  // The batch fan-out (#44): a worker's shard and its reads, the evaluation's types, the job runner's fan-out interface, the fleet reads' requests.
  "cluster → batch": ["batch/shards/worker-shard.ts", "batch/shards/shard-reads.ts", "batch/previews/fleet-reads.ts", "batch/engine/evaluation-types.ts", "batch/jobs/job-runner.ts"],
};

/** The stores: they import nothing from HTTP or an engine, not even through another file. */
const STORES = ["stores/", "profiles/embedded/", "profiles/postgres/", "hygiene/store/", "batch/store/"];
/** Engine files a store must not reach: every engine file outside its store folder... */
const ENGINE_FILES = ["batch/", "streaming/", "edge/", "metrics/", "hygiene/"];
/** ...except the record and quota types the hygiene store persists. */
const STORE_SHARED_TYPES = ["hygiene/records.ts", "hygiene/quotas.ts"];

/** HTTP: the `http/` and `<module>/http/` folders and the fastify packages. */
const isHttpFile = (f: string): boolean => f.startsWith("http/") || /^[^/]+\/http\//.test(f);
const isHttpPackage = (spec: string): boolean => spec === "fastify" || spec === "fastify-plugin" || spec.startsWith("@fastify/");
/**
 * The Fastify plugins and the composition root: the only files that may import HTTP. A module's
 * index.ts counts when it exports the module's plugin (registerHygiene, registerProfileRoutes).
 */
const PLUGIN_FILES = ["cluster/hub-plugin.ts", "cluster/partition-feed-plugin.ts", "cluster/hub-invalidation.ts", "cluster/hub-leases.ts", "cluster/edge-node.ts", "streaming/plugin.ts", "edge/plugin.ts", "edge/register.ts", "edge/routes.ts", "metrics/routes.ts", "web/routes.ts", "hygiene/index.ts", "profiles/index.ts", "app.ts", "server.ts"];
const isPluginFile = (f: string): boolean => isHttpFile(f) || PLUGIN_FILES.includes(f);

/** Circles tolerated in @segmentd/pql, type-only ones only (none now); one fixed but still listed fails. */
const TOLERATED_PQL_CIRCLES: string[] = [];

// ---------------------------------------------------------------------------------------------
// The import graph.

const here = path.dirname(fileURLToPath(import.meta.url));
const SERVER_SRC = path.resolve(here, "../src");
const PQL_SRC = path.resolve(here, "../../pql/src");

interface Import {
  /** Importing file, relative to its package's src/. */
  from: string;
  spec: string;
  /** Imported file relative to the same src/, when the specifier is relative. */
  to: string | null;
  /** `import type`, `export type`, every name `type`, or an `import("x").T` type. */
  typeOnly: boolean;
  line: number;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}

/** The TypeScript parser (already a dev dependency) rather than a regex: strings, comments and template literals cannot fool it. */
function importsOf(srcRoot: string, file: string): Import[] {
  const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false);
  const from = path.relative(srcRoot, file).split(path.sep).join("/");
  const out: Import[] = [];
  const add = (spec: string, typeOnly: boolean, node: ts.Node): void => {
    let to: string | null = null;
    if (spec.startsWith(".")) {
      const base = path.resolve(path.dirname(file), spec);
      const candidates = [base.replace(/\.js$/, ".ts"), base + ".ts", path.join(base, "index.ts")];
      const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
      to = path.relative(srcRoot, hit ?? base).split(path.sep).join("/");
      if (hit === undefined) to = `<unresolved ${spec}>`;
    }
    out.push({ from, spec, to, typeOnly, line: sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const c = node.importClause;
      const named = c?.namedBindings;
      const allNamesTypes = c !== undefined && c.name === undefined && named !== undefined && ts.isNamedImports(named) && named.elements.length > 0 && named.elements.every((e) => e.isTypeOnly);
      add(node.moduleSpecifier.text, c !== undefined && (c.isTypeOnly || allNamesTypes), node);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly, node);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      // A computed specifier cannot be checked: it is reported as an unresolved import.
      add(arg !== undefined && ts.isStringLiteralLike(arg) ? arg.text : "<computed import()>", false, node);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true, node);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

function graphOf(srcRoot: string): { files: string[]; imports: Import[] } {
  const full = tsFiles(srcRoot);
  return { files: full.map((f) => path.relative(srcRoot, f).split(path.sep).join("/")), imports: full.flatMap((f) => importsOf(srcRoot, f)) };
}

const moduleOf = (f: string): string => (f.includes("/") ? f.slice(0, f.indexOf("/")) : "root");
const where = (i: Import): string => `${i.from}:${i.line} imports "${i.spec}"`;

/**
 * Circles among files, one per strongly connected component (Tarjan), each shown as a shortest
 * path round it. Type-only imports count: they vanish at run time, but a type circle still ties
 * the two files (and their modules) together, which is what the split into processes must avoid;
 * the code has none, so the stricter rule costs nothing.
 */
function circles(files: readonly string[], imports: readonly Import[]): string[] {
  const next = new Map<string, Set<string>>(files.map((f) => [f, new Set<string>()]));
  for (const i of imports) if (i.to !== null && next.has(i.to)) next.get(i.from)!.add(i.to);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  let counter = 0;
  const strong = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v)!) {
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || next.get(v)!.has(v)) found.push(shortestLoop(v, new Set(component), next).join(" → "));
  };
  for (const f of files) if (!index.has(f)) strong(f);
  return found.sort();
}

function shortestLoop(start: string, within: ReadonlySet<string>, next: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const parent = new Map<string, string>();
  const queue = [start];
  for (let k = 0; k < queue.length; k++) {
    for (const w of next.get(queue[k]!)!) {
      if (!within.has(w)) continue;
      if (w === start) {
        const loop = [start];
        for (let at = queue[k]!; at !== start; at = parent.get(at)!) loop.unshift(at);
        return [start, ...loop];
      }
      if (!parent.has(w)) {
        parent.set(w, queue[k]!);
        queue.push(w);
      }
    }
  }
  return [start];
}

const server = graphOf(SERVER_SRC);
const pql = graphOf(PQL_SRC);

// ---------------------------------------------------------------------------------------------
// The checks.

test("every import is found and resolves to a file", () => {
  assert.ok(server.files.length > 100 && server.imports.length > 500, "the scanner found the server's files and imports");
  const bad = [...server.imports, ...pql.imports].filter((i) => i.to?.startsWith("<") || i.spec.startsWith("<"));
  assert.deepEqual(bad.map(where), [], "imports the check cannot follow");
});

test("no import circle among files (type-only imports count)", () => {
  assert.deepEqual(circles(server.files, server.imports), [], "packages/server/src has import circles");
  assert.deepEqual(circles(pql.files, pql.imports.filter((i) => !i.typeOnly)), [], "packages/pql/src has runtime import circles");
  assert.deepEqual(circles(pql.files, pql.imports), TOLERATED_PQL_CIRCLES, "packages/pql/src: import circles other than the tolerated ones (TOLERATED_PQL_CIRCLES)");
});

test("platform/ imports nothing from the other server folders", () => {
  const bad = server.imports.filter((i) => i.from.startsWith("platform/") && ((i.to !== null && !i.to.startsWith("platform/")) || i.spec.startsWith("@segmentd/")));
  assert.deepEqual(bad.map(where), [], "platform/ sits below everything else");
});

test("a store reaches nothing from HTTP or an engine, not even through another file", () => {
  const next = new Map<string, Import[]>();
  for (const i of server.imports) next.set(i.from, [...(next.get(i.from) ?? []), i]);
  const bad: string[] = [];
  for (const store of STORES) {
    // Walk everything the store's files load, remembering how each file was reached.
    const via = new Map<string, string>(server.files.filter((f) => f.startsWith(store)).map((f) => [f, f]));
    const queue = [...via.keys()];
    for (let k = 0; k < queue.length; k++) {
      for (const i of next.get(queue[k]!) ?? []) {
        const chain = `${via.get(i.from)} → ${i.to ?? i.spec}`;
        if (i.to === null) {
          if (isHttpPackage(i.spec)) bad.push(`${store}: ${chain}`);
          continue;
        }
        if (via.has(i.to)) continue;
        via.set(i.to, chain);
        const engine = ENGINE_FILES.some((p) => i.to!.startsWith(p)) && !i.to.startsWith(store) && !STORE_SHARED_TYPES.includes(i.to);
        // Report the first forbidden file on a path, not everything behind it.
        if (isHttpFile(i.to) || engine) bad.push(`${store}: ${chain}`);
        else queue.push(i.to);
      }
    }
  }
  assert.deepEqual(bad, [], "a store must not depend on HTTP or an engine");
});

test("only the Fastify plugins and the composition root import HTTP", () => {
  const bad = server.imports.filter((i) => (isHttpPackage(i.spec) || (i.to !== null && isHttpFile(i.to))) && !isPluginFile(i.from));
  assert.deepEqual(bad.map(where), [], `HTTP belongs to the plugins (http/, <module>/http/, ${PLUGIN_FILES.join(", ")})`);
});

test("@segmentd/pql imports nothing outside itself: no package, no node: module", () => {
  const bad = pql.imports.filter((i) => i.to === null || i.to.startsWith(".."));
  assert.deepEqual(bad.map((i) => `packages/pql/src/${where(i)}`), [], "the language package is pure");
});

test("the arrows between modules are exactly the allowed ones", () => {
  const seen = new Map<string, Import>();
  for (const i of server.imports) {
    const target = i.to !== null ? moduleOf(i.to) : i.spec === "@segmentd/pql" || i.spec.startsWith("@segmentd/pql/") ? "pql" : null;
    if (i.spec.startsWith("@segmentd/") && target === null) assert.fail(`${where(i)}: unknown workspace package`);
    const source = moduleOf(i.from);
    if (target === null || target === source) continue;
    const arrow = `${source} → ${target}`;
    if (!seen.has(arrow)) seen.set(arrow, i);
  }
  const allowed = new Set(Object.entries(MODULE_ARROWS).flatMap(([from, tos]) => tos.map((to) => `${from} → ${to}`)));
  const added = [...seen].filter(([a]) => !allowed.has(a)).map(([a, i]) => `${a} (first: ${where(i)})`);
  assert.deepEqual(added, [], "new arrows between modules: remove them, or add them to MODULE_ARROWS and docs/architecture.md on purpose");
  const unused = [...allowed].filter((a) => !seen.has(a));
  assert.deepEqual(unused, [], "MODULE_ARROWS lists arrows the code no longer has: remove them here and in docs/architecture.md");
});

test("an engine reaches another engine only through its named surface", () => {
  const bad: string[] = [];
  const used = new Set<string>();
  for (const i of server.imports) {
    if (i.to === null) continue;
    const source = moduleOf(i.from);
    const target = moduleOf(i.to);
    if (source === target || !ENGINES.includes(source) || !ENGINES.includes(target)) continue;
    const arrow = `${source} → ${target}`;
    used.add(`${arrow} ${i.to}`);
    if (!(ENGINE_SURFACES[arrow] ?? []).includes(i.to)) bad.push(where(i));
  }
  assert.deepEqual(bad, [], "an engine's internals are its own: add the file to ENGINE_SURFACES on purpose, or go through its surface");
  const unused = Object.entries(ENGINE_SURFACES).flatMap(([arrow, targets]) => targets.filter((t) => !used.has(`${arrow} ${t}`)).map((t) => `${arrow} ${t}`));
  assert.deepEqual(unused, [], "ENGINE_SURFACES names files no engine imports any more");
});
