/**
 * The HAProxy config `cluster up --hubs N` writes (cli/cluster-haproxy.ts), run by Debian's
 * haproxy in front of two HTTP servers standing for hubs (each answers /readyz and names itself):
 * API requests go round robin; a browser's /ee/ requests carry the cookie HAProxy set on the
 * first and stay on that hub; when that hub is gone they go to the other, which the next cookie
 * names.
 */
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { ChildProcess } from "node:child_process";
import { EDGE_COOKIE, haproxyConfig, startHaproxy } from "../../src/cli/cluster-haproxy.js";
import { freePort } from "../../src/cluster/nats-server.js";

function standIn(name: string): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ hub: name, cookie: req.headers.cookie ?? null }));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as { port: number }).port })));
}

describe("HAProxy in front of hubs: /ee/ requests stay on one hub", { timeout: 60_000 }, () => {
  let dir: string;
  let proxy: ChildProcess;
  let base: string;
  const hubs: Array<{ server: http.Server; port: number }> = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-haproxy-cookie-"));
    hubs.push(await standIn("hub-1"), await standIn("hub-2"));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    proxy = (await startHaproxy(dir, haproxyConfig({ host: "127.0.0.1", port, backends: hubs.map((h, i) => ({ name: `hub-${i + 1}`, host: "127.0.0.1", port: h.port })) }))).child;
  });
  after(async () => {
    proxy?.kill("SIGTERM");
    for (const h of hubs) h.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One request; the hub that answered and the cookie HAProxy set (null: none). */
  const send = async (p: string, cookie?: string): Promise<{ hub: string; setCookie: string | null; forwarded: string | null }> => {
    const r = await fetch(base + p, { method: "POST", headers: { "content-type": "application/json", ...(cookie === undefined ? {} : { cookie }) }, body: "{}" });
    const body = (await r.json()) as { hub: string; cookie: string | null };
    return { hub: body.hub, setCookie: r.headers.get("set-cookie"), forwarded: body.cookie };
  };

  it("the API is spread over the hubs without a cookie", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const r = await send("/collection/inlet");
      assert.equal(r.setCookie, null);
      seen.add(r.hub);
    }
    assert.deepEqual([...seen].sort(), ["hub-1", "hub-2"]);
  });

  it("interact: the first answer sets the cookie, later ones stay on its hub; with that hub gone, the other takes over", async () => {
    const first = await send("/ee/v2/interact?dataStreamId=x");
    assert.match(first.setCookie ?? "", new RegExp(`^${EDGE_COOKIE}=${first.hub}; path=/; HttpOnly`, "i"));
    const cookie = `${EDGE_COOKIE}=${first.hub}`;
    for (let i = 0; i < 6; i++) {
      const r = await send("/ee/v2/interact?dataStreamId=x", cookie);
      assert.equal(r.hub, first.hub);
      // `indirect`: the hub never sees HAProxy's cookie.
      assert.equal(r.forwarded, null);
    }
    // The cookie's hub goes away.
    const sticky = hubs[Number(first.hub.slice(-1)) - 1]!;
    await new Promise<void>((r) => sticky.server.close(() => r()));
    sticky.server.closeAllConnections();
    const t0 = Date.now();
    let moved: { hub: string; setCookie: string | null } | undefined;
    while (Date.now() - t0 < 10_000) {
      const r = await send("/ee/v2/interact?dataStreamId=x", cookie).catch(() => undefined);
      if (r !== undefined && r.hub !== first.hub) {
        moved = r;
        break;
      }
    }
    assert.ok(moved, "the visitor's requests reach the other hub once its own is gone");
    assert.match(moved.setCookie ?? "", new RegExp(`^${EDGE_COOKIE}=${moved.hub};`));
  });
});
