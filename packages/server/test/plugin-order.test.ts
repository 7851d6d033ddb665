// The app's capabilities are named Fastify plugins that declare what they depend on: the
// composition root registers all of them in order, and one registered before a plugin it
// depends on is refused at start-up with a message that names the missing plugin.
import { test } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { profilesPlugin, type ProfilesPluginOptions } from "../src/profiles/http/index.js";
import { startHarness, client, ORG_B, TOKEN_B } from "./helpers/server-harness.js";

const CAPABILITIES = ["segmentd-streaming", "segmentd-edge", "segmentd-audience-metrics", "segmentd-batch", "segmentd-profiles", "segmentd-hygiene", "segmentd-activation", "segmentd-web"];

test("a capability registered before the plugin it depends on fails at start-up, naming the missing plugin", async () => {
  const app = Fastify({ logger: false });
  let ran = false;
  // The check runs before the plugin's body: these options are never read.
  const opts = new Proxy({} as ProfilesPluginOptions, {
    get: () => {
      ran = true;
      return undefined;
    },
  });
  try {
    await assert.rejects(
      async () => {
        await app.register(profilesPlugin, opts);
        await app.ready();
      },
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED");
        assert.equal(err.message, "The dependency 'segmentd-streaming' of plugin 'segmentd-profiles' is not registered");
        return true;
      },
    );
    assert.equal(ran, false, "the plugin's body must not run");
    assert.equal(app.hasRoute({ method: "POST", url: "/collection/:connectionId" }), false);
    assert.equal(app.streaming, undefined);
    assert.equal(app.edge, undefined);
  } finally {
    await app.close().catch(() => {});
  }
});

test("the app registers every capability, each once, in dependency order", async () => {
  const h = await startHarness("plugin-order");
  try {
    const app = h.server.app;
    for (const name of CAPABILITIES) assert.equal(app.hasPlugin(name), true, `${name} is registered`);
    const tree = app.printPlugins();
    const at = CAPABILITIES.map((name) => tree.indexOf(name));
    assert.deepEqual(
      CAPABILITIES.map((name, i) => [name, at[i]! >= 0 && tree.indexOf(name, at[i]! + 1) === -1]),
      CAPABILITIES.map((name) => [name, true]),
      `each capability appears once in the plugin tree:\n${tree}`,
    );
    assert.deepEqual([...at].sort((a, b) => a - b), at, `capabilities in the order app.ts lists them:\n${tree}`);
    // The capabilities' decorations reach code outside them (server.ts, tests).
    assert.ok(app.streaming, "app.streaming is decorated");
    assert.equal(typeof app.streaming.engine.onRecordsStored, "function");
    assert.ok(app.edge, "app.edge is decorated");
    assert.ok(app.hygiene, "app.hygiene is decorated");
    assert.equal(app.hygiene, h.server.hygiene);
    // Each capability serves its routes, for one tenant and another.
    const a = client(h.url);
    const b = client(h.url, { token: TOKEN_B, org: ORG_B });
    assert.equal((await a.get("/data/core/ups/segment/jobs")).status, 200);
    assert.equal((await b.get("/data/core/ups/segment/jobs")).status, 200);
    assert.equal((await a.get("/data/foundation/catalog/dataSets")).status, 200);
    assert.equal((await a.get("/ui/config.json")).status, 200);
    assert.equal((await b.get("/data/foundation/flowservice/flows")).status, 200);
  } finally {
    await h.close();
  }
});
