/**
 * Issue #41, acceptance 1, in process (on the store SEGMENTD_TEST_STORE names: the embedded store
 * in `npm test`, PostgreSQL in the pg suite): a scripted stream of events for many profiles, 25
 * computed attributes covering every function and every duration unit, and a test clock that
 * moves the windows between checkpoints. At every checkpoint:
 * - the values the profile access API reports equal a from-scratch recomputation, written
 *   independently of computed/values.ts (helpers/computed-script.ts), over the events stored so far;
 * - the members of the definitions that read the attributes — continuous ones kept by the
 *   streaming engine (its sweep closing windows as the clock moves), and each one's batch twin
 *   evaluated by a batch job — equal each other and the members the recomputation gives.
 *
 * Scale: SEGMENTD_CA_EVENTS (default 3,000) and SEGMENTD_CA_PROFILES (default 300); the issue's
 * run is SEGMENTD_CA_EVENTS=50000 SEGMENTD_CA_PROFILES=5000. The same script on streaming workers
 * (one, and three with kill -9 of one during the stream): workers/computed.workers.test.ts.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../src/platform/clock.js";
import { normalizeNamespace } from "../../src/profiles/validate.js";
import { ComputedScript, T0, createAttributesAndDefinitions, email, postRecords, profileRequests, runScript, type ReadingDefinition } from "../helpers/computed-script.js";
import { EVENT_CLASS, ORG_A, PROFILE_CLASS, client, profileDataset, startHarness, type Client, type Harness } from "../helpers/server-harness.js";

const EVENTS = Number(process.env.SEGMENTD_CA_EVENTS ?? 3_000);
const PROFILES = Number(process.env.SEGMENTD_CA_PROFILES ?? 300);
const TENANT = "_aaaaaaaaaaaaaaaaaaaaaaaa";
const SCOPE = { orgId: ORG_A, sandboxName: "prod" };

const clock = new ManualClock(T0);
let h: Harness;
let c: Client;
let defs: ReadingDefinition[] = [];
let eventsDs = "";

before(async () => {
  h = await startHarness("ca-equivalence", { clock });
  h.server.app.computed!.processor!.pause(); // the first evaluation's statuses are processing.test.ts's
  c = client(h.url);
  const profilesDs = await profileDataset(c, "crm", PROFILE_CLASS);
  eventsDs = await profileDataset(c, "web", EVENT_CLASS);
  for (const request of profileRequests(PROFILES)) await postRecords(c, profilesDs, request);
  defs = await createAttributesAndDefinitions(c, TENANT);
});
after(async () => h?.close());

test(`${EVENTS} events for ${PROFILES} profiles, 25 attributes: at every checkpoint the reported values and the members of the definitions reading them equal a recomputation from scratch`, async () => {
  const pids = await h.server.profiles.findProfileIds(SCOPE, Array.from({ length: PROFILES }, (_, i) => ({ namespace: normalizeNamespace("Email"), id: email(i) })));
  assert.ok(pids.every((p) => p !== null), "every profile stored");
  const pidToEmail = new Map(pids.map((p, i) => [p!, email(i)]));
  const streaming = h.server.app.streaming!;
  await runScript(new ComputedScript(EVENTS, PROFILES), {
    client: c,
    tenant: TENANT,
    pidToEmail,
    send: (records) => postRecords(c, eventsDs, records),
    partSent: () => streaming.engine.idle(),
    async advance(ms) {
      clock.advance(ms);
      await streaming.sweep();
    },
    async caughtUp() {
      await streaming.sweep();
      await streaming.engine.idle();
    },
    now: () => clock.now(),
    async members(definitionId) {
      const ids = await h.server.profiles.listMemberIds(SCOPE, definitionId, "realized");
      return ids.map((p) => pidToEmail.get(p) ?? `unknown ${p}`).sort();
    },
  }, defs);
});
