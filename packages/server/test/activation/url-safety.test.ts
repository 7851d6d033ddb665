/**
 * Where a destination may point: every refused range as an IP literal and in its other
 * spellings, names that resolve to one (the resolver injected here; the HTTP suites use
 * real names such as localhost), and `safeLookup`, the check inside the connection.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { assertPublicTarget, checkTargetUrl, classifyAddress, safeLookup, type AddressClass } from "../../src/activation/url-safety.js";

const RULE = "segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set";
const ALWAYS = "segmentd never sends to metadata, unspecified, multicast or reserved addresses";

test("each address range is classified, whatever its spelling", () => {
  const table: [string, AddressClass][] = [
    ["127.0.0.1", "loopback"], ["127.255.0.9", "loopback"], ["::1", "loopback"],
    ["10.1.2.3", "private"], ["172.16.0.1", "private"], ["172.31.255.255", "private"], ["192.168.0.10", "private"], ["100.64.0.1", "private"], ["fc00::1", "private"], ["fd12:3456::1", "private"],
    ["169.254.1.1", "link-local"], ["fe80::1", "link-local"],
    ["169.254.169.254", "metadata"], ["fd00:ec2::254", "metadata"],
    ["0.0.0.0", "unspecified"], ["::", "unspecified"],
    ["224.0.0.1", "multicast"], ["255.255.255.255", "multicast"], ["ff02::1", "multicast"],
    ["240.0.0.1", "reserved"], ["192.0.2.1", "reserved"], ["2001:db8::1", "reserved"],
    // IPv6 forms that embed an IPv4 address are classified by it.
    ["::ffff:127.0.0.1", "loopback"], ["::ffff:7f00:1", "loopback"], ["::ffff:a9fe:a9fe", "metadata"], ["::ffff:10.0.0.1", "private"], ["64:ff9b::a00:1", "private"], ["2002:c0a8:0101::1", "private"], ["::127.0.0.1", "loopback"],
    ["8.8.8.8", "public"], ["172.32.0.1", "public"], ["93.184.215.14", "public"], ["2606:4700::1111", "public"], ["::ffff:8.8.8.8", "public"],
  ];
  for (const [address, cls] of table) assert.equal(classifyAddress(address), cls, address);
});

test("IPv4 spellings are read as the parser reads them", async () => {
  for (const url of ["http://127.1/", "http://0x7f.1/", "http://0x7f000001/", "http://2130706433/", "http://0177.0.0.1/", "http://017700000001/", "http://[::ffff:127.0.0.1]/", "http://127.0.0.1.:8080/"]) {
    await assert.rejects(assertPublicTarget(url, { allowPrivateNetworks: false }), (err: Error & { code?: string }) => {
      assert.equal(err.code, "SEGMENTD-DESTINATION-ADDRESS-400", url);
      assert.match(err.message, /is a loopback address; /, url);
      return true;
    });
  }
});

test("literals: refused with the exact message; allowPrivateNetworks opens loopback/private/link-local only", async () => {
  const cases: [string, string, string][] = [
    ["http://10.0.0.5/", "10.0.0.5", "a private address"],
    ["http://[fe80::1]/", "fe80::1", "a link-local address"],
    ["http://[::1]:9/", "::1", "a loopback address"],
  ];
  for (const [url, addr, what] of cases) {
    await assert.rejects(assertPublicTarget(url, { allowPrivateNetworks: false }), { code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination address ${addr} is ${what}; ${RULE}` });
    assert.deepEqual((await assertPublicTarget(url, { allowPrivateNetworks: true })).addresses.map((a) => a.address), [addr]);
  }
  for (const [url, addr, what] of [["http://169.254.169.254/latest/meta-data/", "169.254.169.254", "a cloud metadata address"], ["http://[fd00:ec2::254]/", "fd00:ec2::254", "a cloud metadata address"], ["http://0.0.0.0:80/", "0.0.0.0", "an unspecified address"], ["http://224.0.0.1/", "224.0.0.1", "a multicast or broadcast address"]] as const) {
    await assert.rejects(assertPublicTarget(url, { allowPrivateNetworks: true }), { code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination address ${addr} is ${what}; ${ALWAYS}` });
  }
  await assert.rejects(assertPublicTarget("http://metadata.google.internal/computeMetadata/v1/", { allowPrivateNetworks: true }), {
    code: "SEGMENTD-DESTINATION-ADDRESS-400", message: 'Destination host "metadata.google.internal" is a cloud metadata service; segmentd never sends to metadata addresses',
  });
  assert.deepEqual((await assertPublicTarget("https://93.184.215.14/x", { allowPrivateNetworks: false })).addresses, [{ address: "93.184.215.14", family: 4 }]);
});

test("a name is refused when any of its A/AAAA records is refused", async () => {
  const records: Record<string, { address: string; family: number }[]> = {
    "hooks.example.com": [{ address: "93.184.215.14", family: 4 }, { address: "2606:2800::1", family: 6 }],
    "mixed.example.com": [{ address: "93.184.215.14", family: 4 }, { address: "10.9.8.7", family: 4 }],
    "v6private.example.com": [{ address: "fd00::5", family: 6 }],
    "rebind.example.com": [{ address: "169.254.169.254", family: 4 }],
  };
  const resolve = async (host: string) => {
    const r = records[host];
    if (!r) throw Object.assign(new Error("nope"), { code: "ENOTFOUND" });
    return r;
  };
  assert.equal((await assertPublicTarget("https://hooks.example.com/x", { allowPrivateNetworks: false, resolve })).addresses.length, 2);
  await assert.rejects(assertPublicTarget("https://mixed.example.com/x", { allowPrivateNetworks: false, resolve }), {
    code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination host "mixed.example.com" resolves to 10.9.8.7, a private address; ${RULE}`,
  });
  await assert.rejects(assertPublicTarget("https://v6private.example.com/x", { allowPrivateNetworks: false, resolve }), {
    code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination host "v6private.example.com" resolves to fd00::5, a private address; ${RULE}`,
  });
  await assert.rejects(assertPublicTarget("https://rebind.example.com/x", { allowPrivateNetworks: true, resolve }), {
    code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination host "rebind.example.com" resolves to 169.254.169.254, a cloud metadata address; ${ALWAYS}`,
  });
  await assert.rejects(assertPublicTarget("https://gone.example.com/x", { allowPrivateNetworks: false, resolve }), {
    code: "SEGMENTD-DESTINATION-DNS-400", message: 'Destination host "gone.example.com" could not be resolved (ENOTFOUND)',
  });
  // The real resolver: localhost is loopback, before any DNS.
  await assert.rejects(assertPublicTarget("http://localhost:8080/", { allowPrivateNetworks: false }), {
    code: "SEGMENTD-DESTINATION-ADDRESS-400", message: `Destination host "localhost" resolves to 127.0.0.1, a loopback address; ${RULE}`,
  });
});

test("URL form", () => {
  assert.throws(() => checkTargetUrl("file:///etc/passwd"), { code: "SEGMENTD-DESTINATION-URL-400", message: 'Destination URL must use http or https, not "file:"' });
  assert.throws(() => checkTargetUrl("https://a:b@example.com/"), { code: "SEGMENTD-DESTINATION-URL-400", message: "Destination URL must not contain credentials (user:password@); use the connection's auth instead" });
  assert.throws(() => checkTargetUrl("https://example.com/" + "x".repeat(2100)), { code: "SEGMENTD-DESTINATION-URL-400", message: "Destination URL is longer than 2048 characters" });
  assert.throws(() => checkTargetUrl("/relative"), { code: "SEGMENTD-DESTINATION-URL-400", message: "Destination URL is not a valid absolute URL" });
  assert.equal(checkTargetUrl("https://example.com:8443/hook?x=1").host, "example.com:8443");
});

test("safeLookup refuses inside the connection, and connects when allowed", async () => {
  const server = http.createServer((_req, res) => res.end("ok"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const get = (lookup: ReturnType<typeof safeLookup>) =>
    new Promise<string>((resolve, reject) => {
      http.get({ host: "localhost", port, path: "/", lookup: lookup as never, family: 4 }, (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve(body));
      }).on("error", reject);
    });
  try {
    await assert.rejects(get(safeLookup({ allowPrivateNetworks: false })), { code: "SEGMENTD-DESTINATION-ADDRESS-400" });
    assert.equal(await get(safeLookup({ allowPrivateNetworks: true })), "ok");
  } finally {
    server.close();
  }
});
