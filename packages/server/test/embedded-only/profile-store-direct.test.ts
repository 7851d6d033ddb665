// The embedded profile store on the calling thread (EmbeddedProfileStore, what
// `profileStore.worker: false` opens). The unit run's profile suites use the
// worker-thread store (the default); this file runs the store's own suites again
// on the direct one: conformance, bulk memberships + change feed, staged batches
// and kill -9 during streaming ingestion (its child process inherits the setting).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";

process.env["SEGMENTD_TEST_STORE"] = "embedded-direct";

await describe("embedded profile store on the main thread (embedded-direct)", async () => {
  const { openTestStore } = await import("../profiles/test-store.js");
  it("the suites below get the direct store", async () => {
    const ts = openTestStore();
    try {
      assert.ok(ts.store instanceof EmbeddedProfileStore);
    } finally {
      await ts.cleanup();
    }
  });
  await import("../profiles/store.conformance.test.js");
  await import("../profiles/bulk-memberships-feed.test.js");
  await import("../profiles/batch-staging.test.js");
  await import("../profiles/crash.test.js");
});
