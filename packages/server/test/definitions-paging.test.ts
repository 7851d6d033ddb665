/**
 * Paging over 250 definitions with every sort field in both directions:
 * page numbers, totals, and link.next chains through every page without gaps
 * or duplicates, identical to fetching by `page`; evaluation-method filters
 * carried through the chain.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../src/index.js";
import { DEFS, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const N = 250;
const LIMIT = 40;
const clock = new ManualClock(Date.UTC(2026, 0, 1));
let h: Harness;
let a: Client;
type Def = Record<string, unknown>;
let all: Def[] = [];

before(async () => {
  h = await startHarness("paging", { clock });
  a = client(h.url);
  for (let i = 0; i < N; i++) {
    // Every 5th definition shares its predecessor's timestamps: ties must still page cleanly.
    if (i % 5 !== 0) clock.advance(1500);
    const name = `${String.fromCharCode(65 + ((i * 7) % 26))}${(i % 3 === 0 ? "x" : "X")}-def-${(i * 37) % N}`;
    const ev = i % 8 === 0 ? { synchronous: { enabled: true } } : i % 6 === 0 ? { continuous: { enabled: true } } : undefined;
    const r = await a.post(DEFS, definitionBody(name, 'homeAddress.countryCode = "US"', {
      ...(i % 3 === 1 ? {} : { description: `desc ${(i * 13) % 17}` }),
      ...(ev ? { evaluationInfo: ev } : {}),
    }));
    assert.equal(r.status, 200, r.text);
    all.push(obj(r.json));
  }
  // Give some definitions an updateTime that differs from creation order.
  for (const d of all.filter((_, i) => i % 9 === 0)) {
    clock.advance(700);
    const r = await a.patch(`${DEFS}/${d.id}`, d);
    assert.equal(r.status, 200);
  }
  const fetched = await Promise.all(all.map(async (d) => obj((await a.get(`${DEFS}/${d.id}`)).json)));
  all = fetched;
});
after(async () => h.close());

function cmp(field: string, dir: "asc" | "desc") {
  return (x: Def, y: Def): number => {
    const vx = field === "description" ? (x.description ?? "") : x[field];
    const vy = field === "description" ? (y.description ?? "") : y[field];
    let c = vx === vy ? 0 : (vx as string | number) < (vy as string | number) ? -1 : 1;
    if (dir === "desc") c = -c;
    if (c !== 0 || field === "id") return c;
    // Ties are broken by id in the sort's direction.
    const t = (x.id as string) < (y.id as string) ? -1 : x.id === y.id ? 0 : 1;
    return dir === "desc" ? -t : t;
  };
}

async function walk(first: string): Promise<{ ids: string[]; pages: Record<string, unknown>[] }> {
  const ids: string[] = [];
  const pages: Record<string, unknown>[] = [];
  let next: string | undefined = first;
  while (next !== undefined) {
    const r = await a.get(next);
    assert.equal(r.status, 200, r.text);
    const body = obj(r.json);
    const page = obj(body.page);
    pages.push(page);
    ids.push(...arr(body.segments).map((s) => obj(s).id as string));
    next = obj(body.link).next as string | undefined;
    assert.ok(pages.length <= N, "link.next chain does not end");
  }
  return { ids, pages };
}

for (const field of ["creationTime", "updateTime", "updateEpoch", "name", "description", "id"]) {
  for (const dir of ["asc", "desc"] as const) {
    test(`sort=${field}:${dir}: link.next visits every page once, in order`, async () => {
      const { ids, pages } = await walk(`${DEFS}?limit=${LIMIT}&sort=${field}:${dir}`);
      const expected = [...all].sort(cmp(field, dir)).map((d) => d.id as string);
      assert.deepEqual(ids, expected);
      assert.equal(new Set(ids).size, N);
      const totalPages = Math.ceil(N / LIMIT);
      assert.equal(pages.length, totalPages);
      pages.forEach((p, i) => {
        assert.equal(p.pageNumber, i);
        assert.equal(p.start, i * LIMIT);
        assert.equal(p.totalCount, N);
        assert.equal(p.totalPages, totalPages);
        assert.equal(p.limit, LIMIT);
        assert.equal(p.sortField, field);
        assert.equal(p.sort, dir);
        assert.equal(p.pageSize, i < totalPages - 1 ? LIMIT : N - LIMIT * (totalPages - 1));
      });
      // Fetching by page number gives the same pages.
      const third = await a.get(`${DEFS}?limit=${LIMIT}&page=2&sort=${field}:${dir}`);
      assert.deepEqual(arr(obj(third.json).segments).map((s) => obj(s).id), expected.slice(2 * LIMIT, 3 * LIMIT));
    });
  }
}

test("default order is creationTime desc with limit 100; limit is clamped to 100", async () => {
  const r = obj((await a.get(DEFS)).json);
  const page = obj(r.page);
  assert.deepEqual([page.sortField, page.sort, page.limit, page.pageSize, page.totalPages], ["creationTime", "desc", 100, 100, 3]);
  assert.deepEqual(arr(r.segments).map((s) => obj(s).id), [...all].sort(cmp("creationTime", "desc")).slice(0, 100).map((d) => d.id));
  assert.equal(obj((await a.get(`${DEFS}?limit=5000`)).json).page && obj(obj((await a.get(`${DEFS}?limit=5000`)).json).page).limit, 100);
  const last = obj((await a.get(`${DEFS}?start=240&limit=100`)).json);
  assert.equal(arr(last.segments).length, 10);
  assert.deepEqual(last.link, {});
});

test("multi-key sort and evaluation-method filters (carried by link.next)", async () => {
  const { ids } = await walk(`${DEFS}?limit=7&sort=description:asc,name:desc`);
  const expected = [...all].sort((x, y) => cmp("description", "asc")(x, y) || 0).map((d) => d);
  // description ties broken by name desc, then id.
  expected.sort((x, y) => {
    const dx = (x.description ?? "") as string, dy = (y.description ?? "") as string;
    if (dx !== dy) return dx < dy ? -1 : 1;
    if (x.name !== y.name) return (x.name as string) < (y.name as string) ? 1 : -1;
    return (x.id as string) < (y.id as string) ? -1 : 1;
  });
  assert.deepEqual(ids, expected.map((d) => d.id));
  for (const [key, pick] of [
    ["synchronous", (d: Def) => obj(obj(d.evaluationInfo).synchronous).enabled === true],
    ["continuous", (d: Def) => obj(obj(d.evaluationInfo).continuous).enabled === true],
    ["batch", (d: Def) => obj(obj(d.evaluationInfo).batch).enabled === true],
  ] as const) {
    for (const value of [true, false]) {
      const want = all.filter((d) => pick(d) === value).sort(cmp("creationTime", "desc")).map((d) => d.id);
      const got = await walk(`${DEFS}?limit=25&evaluationInfo.${key}.enabled=${value}`);
      assert.deepEqual(got.ids, want, `${key}=${value}`);
      assert.ok(got.pages.every((p) => p.totalCount === want.length));
    }
  }
});

test("bad paging parameters are 400 naming the parameter", async () => {
  for (const [q, msg] of [
    ["sort=color:asc", /^Invalid sort "color:asc": use field:asc or field:desc, with field one of creationTime, updateTime, updateEpoch, name, description, id$/],
    ["sort=name:sideways", /^Invalid sort/],
    ["limit=0", /querystring limit must be >= 1/],
    ["start=-1", /querystring start must be >= 0/],
    ["page=abc", /querystring page must be integer/],
    ["evaluationInfo.batch.enabled=maybe", /querystring evaluationInfo\.batch\.enabled must be boolean/],
  ] as const) {
    const r = await a.get(`${DEFS}?${q}`);
    assert.equal(r.status, 400, q);
    assert.match(obj(r.json).title as string, msg, q);
  }
});
