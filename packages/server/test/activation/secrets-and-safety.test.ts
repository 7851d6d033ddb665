/**
 * Destination secrets at rest (the raw stored rows hold no plaintext; a restart with the
 * data directory's key reads them; another key is refused by name; a ciphertext moved to
 * another row does not open) and destination addresses over real HTTP, with and without
 * activation.allowPrivateNetworks. Runs on the store SEGMENTD_TEST_STORE names.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createLogger, startServer, type RunningServer } from "../../src/index.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import { applyConfigFile, ConfigError, defaultConfig } from "../../src/platform/config.js";
import { KEY_FILE, loadSecretKey, parseSecretKey, SecretBox, SecretKeyError } from "../../src/activation/secrets.js";
import { arr, client, DEFS, definitionBody, obj, ORG_A, testConfig, type Res } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };
const RULE = "segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set";

function errorOf(r: Res): { status: number; code: unknown; message: unknown } {
  const items = arr(obj(obj(r.json).errors)[String(r.status)]);
  return { status: r.status, code: obj(items[0]).code, message: obj(items[0]).message };
}

async function rawRows(handle: TestStoreHandle): Promise<string> {
  if (handle.kind === "embedded") {
    const db = new Database(path.join(handle.dataDir, "activation.db"), { readonly: true });
    try {
      return JSON.stringify(db.prepare("SELECT * FROM activation_resources").all());
    } finally {
      db.close();
    }
  }
  const c = new pg.Client({ connectionString: handle.databaseUrl });
  await c.connect();
  try {
    return JSON.stringify((await c.query("SELECT * FROM activation_resources")).rows);
  } finally {
    await c.end();
  }
}

test("config: activation.allowPrivateNetworks (default false), secretKey and reconcileMs; bad values are ConfigErrors", () => {
  assert.equal(defaultConfig().activation, undefined);
  assert.deepEqual(applyConfigFile(defaultConfig(), { activation: {} }, "f").activation, { allowPrivateNetworks: false });
  const key = Buffer.alloc(32, 1).toString("base64");
  assert.deepEqual(applyConfigFile(defaultConfig(), { activation: { allowPrivateNetworks: true, secretKey: key } }, "f").activation, { allowPrivateNetworks: true, secretKey: key });
  assert.deepEqual(applyConfigFile(defaultConfig(), { activation: { reconcileMs: 60_000 } }, "f").activation, { allowPrivateNetworks: false, reconcileMs: 60_000 });
  for (const [raw, message] of [
    [{ activation: 1 }, 'f: activation must be an object ({ "allowPrivateNetworks": false })'],
    [{ activation: { allowPrivateNetworks: "yes" } }, "f: activation.allowPrivateNetworks must be a boolean"],
    [{ activation: { secretKey: 5 } }, "f: activation.secretKey must be a string"],
    [{ activation: { allowPrivate: true } }, 'f: unknown key "activation.allowPrivate"'],
    [{ activation: { reconcileMs: 50 } }, "f: activation.reconcileMs must be an integer from 100 to 3600000 (ms)"],
    [{ activation: { reconcileMs: "5000" } }, "f: activation.reconcileMs must be an integer from 100 to 3600000 (ms)"],
    [{ activation: { reconcileMs: 1.5e3 + 0.5 } }, "f: activation.reconcileMs must be an integer from 100 to 3600000 (ms)"],
  ] as const) {
    assert.throws(() => applyConfigFile(defaultConfig(), raw, "f"), (e: unknown) => e instanceof ConfigError && e.message === message, message);
  }
});

test("SecretBox: sealed values open only for their row and key", () => {
  const key = parseSecretKey(Buffer.alloc(32, 7).toString("base64"));
  const box = new SecretBox(key);
  const row = { orgId: "o", sandboxName: "prod", kind: "connection", id: "1" };
  const sealed = box.seal({ token: "plain-token" }, row);
  assert.match(sealed, /^v1:[0-9a-f]{8}:[A-Za-z0-9+/=]+$/);
  assert.ok(!sealed.includes("plain-token"));
  assert.deepEqual(box.open(sealed, row), { token: "plain-token" });
  assert.notEqual(box.seal({ token: "plain-token" }, row), sealed, "a fresh IV each time");
  assert.throws(() => box.open(sealed, { ...row, orgId: "other" }), { message: "stored secret does not decrypt for this row (tampered with, or moved from another row)" });
  const other = new SecretBox(parseSecretKey("ab".repeat(32)));
  assert.throws(() => other.open(sealed, row), (err: Error) => err instanceof SecretKeyError && /^stored secret was encrypted with another key \([0-9a-f]{8}, this server has [0-9a-f]{8}\); start every server with the same activation.secretKey$/.test(err.message));
  for (const bad of ["short", Buffer.alloc(31).toString("base64"), "zz".repeat(32)]) {
    assert.throws(() => parseSecretKey(bad), { message: "activation.secretKey must be 32 bytes written as base64 (44 characters) or hex (64 characters)" });
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-key-"));
  try {
    const k1 = loadSecretKey({ dataDir: dir });
    assert.equal(statSync(path.join(dir, KEY_FILE)).mode & 0o777, 0o600);
    assert.deepEqual(loadSecretKey({ dataDir: dir }), k1, "generated once, then read");
    assert.equal(parseSecretKey(readFileSync(path.join(dir, KEY_FILE), "utf8")).length, 32);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("secrets at rest and destination addresses over HTTP", () => {
  let handle: TestStoreHandle;
  let server: RunningServer;
  const open = async (allowPrivateNetworks: boolean) =>
    startServer(testConfig(handle, (c) => (c.activation = { allowPrivateNetworks })), { logger: createLogger("silent"), store: await handle.open() });

  before(async () => {
    handle = await createTestStore("act-secrets");
    server = await open(false);
  });
  after(async () => {
    await server.close();
    await handle.dispose();
  });

  test("stored rows hold no plaintext secret; a restart reads them with the kept key", async () => {
    const a = client(server.url);
    const audience = String(obj((await a.post(DEFS, definitionBody("secret test"))).json).id);
    const conn = await a.post(`${F}/connections`, {
      name: "oauth", connectionSpec: WEBHOOK,
      auth: { specName: "OAuth2 Client Credentials", params: { accessTokenUrl: "https://93.184.215.14/token", clientId: "client-id-1", clientSecret: "CLIENT-SECRET-PLAIN", scope: "write" } },
    });
    assert.equal(conn.status, 201, conn.text);
    const shown = obj(arr(obj((await a.get(`${F}/connections/${String(obj(conn.json).id)}`)).json).items)[0]);
    assert.deepEqual(shown.auth, { specName: "OAuth2 Client Credentials", params: { accessTokenUrl: "https://93.184.215.14/token", clientId: "client-id-1", clientSecret: "***", scope: "write" } });
    const tgt = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: obj(conn.json).id, connectionSpec: WEBHOOK, params: { httpEndpoint: "https://93.184.215.14/hook", headers: { "X-Api-Key": "HEADER-SECRET-PLAIN" } } });
    assert.equal(tgt.status, 201, tgt.text);
    const flow = await a.post(`${F}/flows`, { name: "f", targetConnectionIds: [obj(tgt.json).id], transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: audience } }] } } }] });
    assert.equal(flow.status, 201, flow.text);
    const signingSecret = String(obj(flow.json).signingSecret);
    const secretPart = signingSecret.slice("whsec_".length);

    const raw = await rawRows(handle);
    assert.ok(raw.includes("client-id-1"), "the rows were read");
    for (const plain of ["CLIENT-SECRET-PLAIN", "HEADER-SECRET-PLAIN", secretPart]) assert.ok(!raw.includes(plain), `${plain} is not stored in clear`);
    const listed = (await a.get(`${F}/flows`)).text + (await a.get(`${F}/targetConnections`)).text + (await a.get(`${F}/connections`)).text;
    for (const plain of ["CLIENT-SECRET-PLAIN", "HEADER-SECRET-PLAIN", secretPart]) assert.ok(!listed.includes(plain), `${plain} is never returned`);

    // Restart over the same data directory and database: the key file is read again.
    await server.close();
    server = await open(false);
    const df = await server.app.activation!.directory.get({ orgId: ORG_A, sandboxName: "prod" }, String(obj(flow.json).id));
    assert.deepEqual(df?.target, {
      kind: "webhook", url: "https://93.184.215.14/hook", headers: { "X-Api-Key": "HEADER-SECRET-PLAIN" }, signingSecret,
      auth: { type: "oauth2", tokenUrl: "https://93.184.215.14/token", clientId: "client-id-1", clientSecret: "CLIENT-SECRET-PLAIN", scope: "write" },
    });
  });

  test("loopback, private, link-local and metadata destinations are refused by default, by address and by name", async () => {
    const a = client(server.url);
    const conn = String(obj((await a.post(`${F}/connections`, { name: "none", connectionSpec: WEBHOOK })).json).id);
    const before = arr(obj((await a.get(`${F}/targetConnections`)).json).items).length;
    const cases: [string, string][] = [
      ["http://127.0.0.1:9/hook", `Destination address 127.0.0.1 is a loopback address; ${RULE}`],
      ["http://localhost:9/hook", `Destination host "localhost" resolves to 127.0.0.1, a loopback address; ${RULE}`],
      ["http://127.1/hook", `Destination address 127.0.0.1 is a loopback address; ${RULE}`],
      ["http://0x7f.1/hook", `Destination address 127.0.0.1 is a loopback address; ${RULE}`],
      ["http://2130706433/hook", `Destination address 127.0.0.1 is a loopback address; ${RULE}`],
      ["http://[::ffff:127.0.0.1]/hook", `Destination address ::ffff:7f00:1 is a loopback address; ${RULE}`],
      ["http://[::1]/hook", `Destination address ::1 is a loopback address; ${RULE}`],
      ["http://10.0.0.1/hook", `Destination address 10.0.0.1 is a private address; ${RULE}`],
      ["http://172.16.5.4/hook", `Destination address 172.16.5.4 is a private address; ${RULE}`],
      ["http://192.168.1.1/hook", `Destination address 192.168.1.1 is a private address; ${RULE}`],
      ["http://[fc00::1]/hook", `Destination address fc00::1 is a private address; ${RULE}`],
      ["http://169.254.10.10/hook", `Destination address 169.254.10.10 is a link-local address; ${RULE}`],
      ["http://[fe80::1]/hook", `Destination address fe80::1 is a link-local address; ${RULE}`],
      ["http://169.254.169.254/latest/meta-data/", `Destination address 169.254.169.254 is a cloud metadata address; ${RULE}`],
      ["http://[fd00:ec2::254]/", `Destination address fd00:ec2::254 is a cloud metadata address; ${RULE}`],
      ["http://metadata.google.internal/computeMetadata/v1/", 'Destination host "metadata.google.internal" is a cloud metadata service; segmentd never sends to metadata addresses'],
      ["http://0.0.0.0/hook", `Destination address 0.0.0.0 is an unspecified address; ${RULE}`],
    ];
    for (const [url, message] of cases) {
      const r = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: conn, connectionSpec: WEBHOOK, params: { httpEndpoint: url } });
      assert.deepEqual(errorOf(r), { status: 400, code: "SEGMENTD-DESTINATION-ADDRESS-400", message }, url);
    }
    assert.equal(arr(obj((await a.get(`${F}/targetConnections`)).json).items).length, before, "nothing stored");
  });

  test("activation.allowPrivateNetworks lets loopback and private through, never metadata", async () => {
    await server.close();
    server = await open(true);
    const a = client(server.url);
    const conn = String(obj((await a.post(`${F}/connections`, { name: "none", connectionSpec: WEBHOOK })).json).id);
    for (const url of ["http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://10.0.0.1/hook", "http://[::1]:9/hook"]) {
      const r = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: conn, connectionSpec: WEBHOOK, params: { httpEndpoint: url } });
      assert.equal(r.status, 201, `${url}: ${r.text}`);
    }
    const meta = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: conn, connectionSpec: WEBHOOK, params: { httpEndpoint: "http://169.254.169.254/latest/" } });
    assert.deepEqual(errorOf(meta), {
      status: 400, code: "SEGMENTD-DESTINATION-ADDRESS-400",
      message: "Destination address 169.254.169.254 is a cloud metadata address; segmentd never sends to metadata, unspecified, multicast or reserved addresses",
    });
  });
});
