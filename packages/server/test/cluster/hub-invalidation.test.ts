/**
 * The hubs' cache invalidation (cluster/hub-invalidation.ts) against a stand-in NATS connection:
 * what a hub publishes after its own changes, what it drops for another hub's, what it ignores,
 * and that a disconnect, a reconnect or a slow consumer drops every copy (a reconnect also tells
 * the other hubs). The real processes are in hub-invalidation.cluster.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NatsConnection, Status } from "@nats-io/transport-node";
import { decodeInvalidation, HubInvalidation, type InvalidationMessage } from "../../src/cluster/hub-invalidation.js";
import { HUB_INVALIDATION_SUBJECT } from "../../src/cluster/subjects.js";
import { InProcessBus } from "../../src/platform/bus.js";
import type { TenantDirectory } from "../../src/services/tenancy.js";

const ORG = "ORG1@AdobeOrg";
const SANDBOX = "11111111-1111-5111-8111-111111111111";

class FakeConnection {
  readonly published: Array<{ subject: string; msg: InvalidationMessage }> = [];
  callback: ((err: Error | null, msg: { data: Uint8Array }) => void) | null = null;
  private readonly statuses: Status[] = [];
  private wake: (() => void) | null = null;

  publish(subject: string, data: string): void {
    this.published.push({ subject, msg: JSON.parse(data) as InvalidationMessage });
  }
  subscribe(subject: string, o: { callback: (err: Error | null, msg: { data: Uint8Array }) => void }): { unsubscribe(): void } {
    assert.equal(subject, HUB_INVALIDATION_SUBJECT);
    this.callback = o.callback;
    return { unsubscribe: () => (this.callback = null) };
  }
  status(): AsyncIterable<Status> {
    const next = async (): Promise<IteratorResult<Status>> => {
      while (this.statuses.length === 0) await new Promise<void>((r) => (this.wake = r));
      return { value: this.statuses.shift()!, done: false };
    };
    return { [Symbol.asyncIterator]: () => ({ next }) };
  }
  emitStatus(s: Status): void {
    this.statuses.push(s);
    this.wake?.();
  }
  deliver(m: unknown): void {
    this.callback!(null, { data: new TextEncoder().encode(typeof m === "string" ? m : JSON.stringify(m)) });
  }
}

function setUp() {
  const nc = new FakeConnection();
  const bus = new InProcessBus((_t, err) => {
    throw err;
  });
  const calls: string[] = [];
  const prod = { orgId: ORG, sandbox: { sandboxId: SANDBOX, sandboxName: "prod" } };
  const tenants = {
    bySandboxId: (id: string) => (id === SANDBOX ? prod : undefined),
    resolve: (org: string, name: string) => (org === ORG && name === "prod" ? prod : undefined),
  } as unknown as Pick<TenantDirectory, "bySandboxId" | "resolve">;
  const flowListeners: Array<(scope: { orgId: string; sandboxName: string }, flowId: string) => void> = [];
  /** A dataflow changed through this hub's API (ActivationService's local change). */
  const flowChanged = (orgId: string, sandboxName: string, flowId: string) => {
    for (const l of flowListeners) l({ orgId, sandboxName }, flowId);
  };
  const inval = new HubInvalidation({
    nc: nc as unknown as NatsConnection,
    bus,
    tenants,
    hubId: "hub-a",
    targets: {
      catalog: { invalidate: (s) => calls.push(`catalog ${s.orgId} ${s.sandboxId}`), invalidateAll: () => calls.push("catalog all") },
      datastreams: { forget: (id) => calls.push(`datastream ${id}`), forgetAll: async () => void calls.push("datastreams all") },
      dataflows: {
        onLocalChange: (l) => {
          flowListeners.push(l);
          return () => void flowListeners.splice(flowListeners.indexOf(l), 1);
        },
        changedElsewhere: (scope, flowId) => void calls.push(`dataflow ${scope.orgId} ${scope.sandboxName} ${flowId}`),
      },
    },
    onError: (err) => {
      throw err;
    },
  });
  inval.start();
  return { nc, bus, calls, inval, flowChanged, flowListeners };
}

const from = (hub: string, kind: string, id = "x", tenant = ORG, sandbox = SANDBOX) => ({ v: 1, hub, kind, tenant, sandbox, id, at: Date.now() });
const tick = () => new Promise((r) => setImmediate(r));

describe("hub invalidation", () => {
  it("publishes `all` when it starts, then each change this hub's services publish on the bus", () => {
    const { nc, bus } = setUp();
    bus.publish("definition.changed", { tenant: { orgId: ORG, sandboxId: SANDBOX }, change: "created", definitionId: "d1" });
    bus.publish("mergePolicy.changed", { tenant: { orgId: ORG, sandboxId: SANDBOX }, change: "updated", mergePolicyId: "m1" });
    bus.publish("datastream.changed", { tenant: { orgId: ORG, sandboxId: SANDBOX }, change: "deleted", datastreamId: "s1" });
    assert.deepEqual(nc.published.map((p) => [p.subject, p.msg.hub, p.msg.kind, p.msg.tenant, p.msg.sandbox, p.msg.id]), [
      [HUB_INVALIDATION_SUBJECT, "hub-a", "all", "", "", ""],
      [HUB_INVALIDATION_SUBJECT, "hub-a", "definition", ORG, SANDBOX, "d1"],
      [HUB_INVALIDATION_SUBJECT, "hub-a", "mergePolicy", ORG, SANDBOX, "m1"],
      [HUB_INVALIDATION_SUBJECT, "hub-a", "datastream", ORG, SANDBOX, "s1"],
    ]);
  });

  it("drops the sandbox's catalog for another hub's definition or merge policy, the datastream for a datastream, everything for `all`", async () => {
    const { nc, calls, inval } = setUp();
    nc.deliver(from("hub-b", "definition", "d1"));
    nc.deliver(from("hub-b", "mergePolicy", "m1"));
    nc.deliver(from("hub-b", "datastream", "s1"));
    nc.deliver(from("hub-b", "all", "", "", ""));
    await tick();
    assert.deepEqual(calls, [`catalog ${ORG} ${SANDBOX}`, `catalog ${ORG} ${SANDBOX}`, "datastream s1", "catalog all", "datastreams all"]);
    assert.deepEqual({ applied: inval.stats.applied, droppedAll: inval.stats.droppedAll, ignored: inval.stats.ignored }, { applied: 3, droppedAll: 1, ignored: 0 });
  });

  it("a dataflow changed through this hub is told by its sandbox id; another hub's makes the deliverer look at it (not told again)", async () => {
    const { nc, calls, inval, flowChanged, flowListeners } = setUp();
    flowChanged(ORG, "prod", "f1");
    flowChanged(ORG, "no-such-sandbox", "f2");
    assert.deepEqual(nc.published.map((p) => [p.msg.kind, p.msg.tenant, p.msg.sandbox, p.msg.id]), [["all", "", "", ""], ["dataflow", ORG, SANDBOX, "f1"]]);
    nc.deliver(from("hub-b", "dataflow", "f9"));
    nc.deliver(from("hub-b", "dataflow", "f9", "OTHER@AdobeOrg", SANDBOX));
    await tick();
    assert.deepEqual(calls, [`dataflow ${ORG} prod f9`]);
    assert.equal(nc.published.length, 2, "a received change is not published again");
    assert.deepEqual({ applied: inval.stats.applied, ignored: inval.stats.ignored }, { applied: 1, ignored: 1 });
    await inval.stop();
    assert.equal(flowListeners.length, 0, "stop unsubscribes");
  });

  it("a received change is not put on the bus, and is not published again", async () => {
    const { nc, bus } = setUp();
    const seen: string[] = [];
    bus.subscribe("definition.changed", (e) => void seen.push(e.definitionId));
    nc.deliver(from("hub-b", "definition", "d1"));
    await tick();
    assert.deepEqual(seen, []);
    assert.deepEqual(nc.published.map((p) => p.msg.kind), ["all"]);
  });

  it("ignores its own messages, unknown sandboxes, another org's sandbox id, and malformed messages", async () => {
    const { nc, calls, inval } = setUp();
    nc.deliver(from("hub-a", "definition"));
    nc.deliver(from("hub-a", "all", "", "", ""));
    nc.deliver(from("hub-b", "definition", "d1", ORG, "22222222-2222-5222-8222-222222222222"));
    nc.deliver(from("hub-b", "definition", "d1", "OTHER@AdobeOrg", SANDBOX));
    nc.deliver("not json");
    nc.deliver({ ...from("hub-b", "definition"), v: 2 });
    nc.deliver({ ...from("hub-b", "definition"), kind: "schema" });
    nc.deliver({ ...from("hub-b", "definition"), id: 7 });
    nc.deliver({ ...from("hub-b", "definition"), at: "now" });
    nc.deliver(null);
    await tick();
    assert.deepEqual(calls, []);
    assert.deepEqual({ received: inval.stats.received, ignored: inval.stats.ignored, applied: inval.stats.applied }, { received: 10, ignored: 10, applied: 0 });
  });

  it("decodeInvalidation accepts exactly the version-1 shape", () => {
    const ok = from("hub-b", "mergePolicy", "m1");
    assert.deepEqual(decodeInvalidation(new TextEncoder().encode(JSON.stringify(ok))), ok);
    assert.equal(decodeInvalidation(new TextEncoder().encode(JSON.stringify({ ...ok, hub: undefined }))), null);
    assert.equal(decodeInvalidation(new TextEncoder().encode("[1]")), null);
  });

  it("a disconnect or a slow consumer drops every copy; a reconnect drops them and tells the other hubs", async () => {
    const { nc, calls } = setUp();
    nc.emitStatus({ type: "disconnect", server: "nats://127.0.0.1:4222" });
    await tick();
    assert.deepEqual(calls, ["catalog all", "datastreams all"]);
    assert.deepEqual(nc.published.map((p) => p.msg.kind), ["all"], "nothing said while disconnected");
    nc.emitStatus({ type: "reconnect", server: "nats://127.0.0.1:4222" });
    await tick();
    assert.deepEqual(calls, ["catalog all", "datastreams all", "catalog all", "datastreams all"]);
    assert.deepEqual(nc.published.map((p) => p.msg.kind), ["all", "all"]);
    nc.emitStatus({ type: "slowConsumer", sub: "segmentd.hub.invalidate", pending: 1 } as unknown as Status);
    await tick();
    assert.equal(calls.length, 6);
    assert.deepEqual(nc.published.map((p) => p.msg.kind), ["all", "all"]);
  });

  it("after stop, changes are no longer published and statuses are not acted on", async () => {
    const { nc, bus, calls, inval } = setUp();
    await inval.stop();
    bus.publish("definition.changed", { tenant: { orgId: ORG, sandboxId: SANDBOX }, change: "created", definitionId: "d1" });
    nc.emitStatus({ type: "reconnect", server: "nats://127.0.0.1:4222" });
    await tick();
    assert.deepEqual(nc.published.map((p) => p.msg.kind), ["all"]);
    assert.deepEqual(calls, []);
    assert.equal(nc.callback, null, "unsubscribed");
  });
});
