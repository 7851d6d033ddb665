/**
 * Where a destination may point (docs/activation.md "Safety"). A webhook URL or an
 * OAuth token URL is checked twice: its form when it is saved (`checkTargetUrl`), and
 * every address its host resolves to, when saved and again at send time
 * (`assertPublicTarget`), so that a name re-pointed at 127.0.0.1 after it was saved is
 * still refused. `safeLookup` does the same check inside the connection itself
 * (http.request's / undici's `lookup`), which closes the window between the check and
 * the connect (DNS rebinding).
 *
 * IPv4 spellings (decimal `2130706433`, octal `0177.1`, hex `0x7f.1`, short `127.1`)
 * need no code here: the WHATWG URL parser turns them into dotted quads, and the
 * address is classified after parsing. IPv6 forms that embed an IPv4 address
 * (`::ffff:a.b.c.d`, `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are
 * classified by the address they embed.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";
import { ApiError } from "../services/errors.js";

export const MAX_URL_LENGTH = 2048;

export const URL_CODES = {
  /** The URL's form: scheme, credentials, length, syntax. */
  url: "SEGMENTD-DESTINATION-URL-400",
  /** An address the destination may not reach. */
  address: "SEGMENTD-DESTINATION-ADDRESS-400",
  /** The host does not resolve. */
  dns: "SEGMENTD-DESTINATION-DNS-400",
} as const;

/** Why an address is refused; `metadata`, `unspecified`, `multicast` and `reserved` are refused even with allowPrivateNetworks. */
export type AddressClass = "public" | "loopback" | "private" | "link-local" | "metadata" | "unspecified" | "multicast" | "reserved";

const ALWAYS_REFUSED: ReadonlySet<AddressClass> = new Set(["metadata", "unspecified", "multicast", "reserved"]);

const CLASS_TEXT: Record<Exclude<AddressClass, "public">, string> = {
  loopback: "a loopback address",
  private: "a private address",
  "link-local": "a link-local address",
  metadata: "a cloud metadata address",
  unspecified: "an unspecified address",
  multicast: "a multicast or broadcast address",
  reserved: "a reserved address",
};

/** A refused destination: status 400 with its code, plus what was refused (for delivery logs). */
export class DestinationAddressError extends ApiError {
  constructor(
    code: string,
    message: string,
    readonly host: string,
    readonly address?: string,
    readonly addressClass?: AddressClass,
  ) {
    super(400, code, message);
  }
}

function list(entries: [string, number, "ipv4" | "ipv6"][]): BlockList {
  const b = new BlockList();
  for (const [net, prefix, type] of entries) b.addSubnet(net, prefix, type);
  return b;
}

// Checked in this order; the first match names the class.
const V4: [Exclude<AddressClass, "public">, BlockList][] = [
  ["metadata", list([["169.254.169.254", 32, "ipv4"], ["100.100.100.200", 32, "ipv4"]])],
  ["unspecified", list([["0.0.0.0", 8, "ipv4"]])],
  ["loopback", list([["127.0.0.0", 8, "ipv4"]])],
  ["private", list([["10.0.0.0", 8, "ipv4"], ["172.16.0.0", 12, "ipv4"], ["192.168.0.0", 16, "ipv4"], ["100.64.0.0", 10, "ipv4"]])],
  ["link-local", list([["169.254.0.0", 16, "ipv4"]])],
  ["multicast", list([["224.0.0.0", 4, "ipv4"], ["255.255.255.255", 32, "ipv4"]])],
  // IETF protocol assignments, documentation, benchmarking, class E.
  ["reserved", list([["192.0.0.0", 24, "ipv4"], ["192.0.2.0", 24, "ipv4"], ["198.18.0.0", 15, "ipv4"], ["198.51.100.0", 24, "ipv4"], ["203.0.113.0", 24, "ipv4"], ["240.0.0.0", 4, "ipv4"]])],
];

const V6: [Exclude<AddressClass, "public">, BlockList][] = [
  ["metadata", list([["fd00:ec2::254", 128, "ipv6"]])],
  ["unspecified", list([["::", 128, "ipv6"]])],
  ["loopback", list([["::1", 128, "ipv6"]])],
  ["private", list([["fc00::", 7, "ipv6"], ["fec0::", 10, "ipv6"]])],
  ["link-local", list([["fe80::", 10, "ipv6"]])],
  ["multicast", list([["ff00::", 8, "ipv6"]])],
  // Discard-only, documentation, ORCHID, Teredo (its embedded address is obfuscated).
  ["reserved", list([["100::", 64, "ipv6"], ["2001:db8::", 32, "ipv6"], ["2001:10::", 28, "ipv6"], ["2001::", 32, "ipv6"]])],
];

/** Host names that reach a cloud metadata service without any DNS record of their own. */
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal", "metadata.azure.internal"]);

/** The 16 bytes of an IPv6 address (already validated by isIP). */
function v6Bytes(address: string): number[] {
  let a = address;
  let tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    tail = v4[1]!.split(".").map(Number);
    a = a.slice(0, -v4[1]!.length) + "0:0";
  }
  const [head, rest] = a.split("::") as [string, string | undefined];
  const parts = (s: string) => (s === "" ? [] : s.split(":").map((h) => parseInt(h, 16)));
  const h = parts(head);
  const r = rest === undefined ? [] : parts(rest);
  const groups = rest === undefined ? h : [...h, ...Array<number>(8 - h.length - r.length).fill(0), ...r];
  const bytes = groups.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedV4(address: string): string | null {
  const b = v6Bytes(address);
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const quad = (i: number) => b.slice(i, i + 4).join(".");
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return quad(12); // ::ffff:a.b.c.d
  if (zero(0, 12) && !zero(12, 14)) return quad(12); // ::a.b.c.d (deprecated "compatible"); not :: or ::1
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) return quad(12); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return quad(2); // 2002:aabb:ccdd::/16
  return null;
}

/** What kind of address this is (an IP literal, v4 or v6, without brackets). */
export function classifyAddress(address: string): AddressClass {
  const family = isIP(address);
  if (family === 4) {
    for (const [cls, b] of V4) if (b.check(address, "ipv4")) return cls;
    return "public";
  }
  if (family === 6) {
    const zone = address.indexOf("%");
    const bare = zone >= 0 ? address.slice(0, zone) : address;
    for (const [cls, b] of V6) if (b.check(bare, "ipv6")) return cls;
    const v4 = embeddedV4(bare);
    return v4 === null ? "public" : classifyAddress(v4);
  }
  return "reserved";
}

export function isRefused(cls: AddressClass, allowPrivateNetworks: boolean): boolean {
  if (cls === "public") return false;
  return ALWAYS_REFUSED.has(cls) || !allowPrivateNetworks;
}

function refusal(host: string, address: string, cls: Exclude<AddressClass, "public">, allowPrivateNetworks: boolean): DestinationAddressError {
  const literal = host === address;
  const what = literal ? `Destination address ${address} is ${CLASS_TEXT[cls]}` : `Destination host "${host}" resolves to ${address}, ${CLASS_TEXT[cls]}`;
  const rule = allowPrivateNetworks
    ? "segmentd never sends to metadata, unspecified, multicast or reserved addresses"
    : "segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set";
  return new DestinationAddressError(URL_CODES.address, `${what}; ${rule}`, host, address, cls);
}

/** The host of a parsed URL without IPv6 brackets and without a trailing dot, lower-cased. */
export function hostOf(u: URL): string {
  let h = u.hostname.toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  while (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** An absolute URL of one of `schemes`, at most MAX_URL_LENGTH characters (the checks every destination URL shares). */
export function parseUrlOf(raw: string, what: string, schemes: readonly string[]): URL {
  if (raw.length > MAX_URL_LENGTH) throw new DestinationAddressError(URL_CODES.url, `${what} is longer than ${MAX_URL_LENGTH} characters`, "");
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new DestinationAddressError(URL_CODES.url, `${what} is not a valid absolute URL`, "");
  }
  if (!schemes.includes(u.protocol.slice(0, -1))) {
    throw new DestinationAddressError(URL_CODES.url, `${what} must use ${schemes.join(" or ")}, not "${u.protocol.slice(0, 20)}"`, "");
  }
  return u;
}

/**
 * The URL's form, without DNS: absolute http(s), no user:password@, at most 2048
 * characters. Returns the parsed URL. `what` names the field in messages.
 */
export function checkTargetUrl(raw: string, what = "Destination URL"): URL {
  const u = parseUrlOf(raw, what, ["http", "https"]);
  if (u.username !== "" || u.password !== "") {
    throw new DestinationAddressError(URL_CODES.url, `${what} must not contain credentials (user:password@); use the connection's auth instead`, hostOf(u));
  }
  if (hostOf(u) === "") throw new DestinationAddressError(URL_CODES.url, `${what} has no host`, "");
  return u;
}

export type Resolver = (host: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export interface TargetCheckOptions {
  allowPrivateNetworks: boolean;
  /** Unit tests only: resolve names without DNS. */
  resolve?: Resolver;
}

/** Names refused before any DNS: metadata service names, and `localhost` / `*.localhost` (RFC 6761: always loopback). */
function checkName(host: string, allowPrivateNetworks: boolean): void {
  if (METADATA_NAMES.has(host)) {
    throw new DestinationAddressError(URL_CODES.address, `Destination host "${host}" is a cloud metadata service; segmentd never sends to metadata addresses`, host, undefined, "metadata");
  }
  if ((host === "localhost" || host.endsWith(".localhost")) && !allowPrivateNetworks) throw refusal(host, "127.0.0.1", "loopback", false);
}

/**
 * Resolves the URL's host (every A and AAAA record) and refuses it when any address is
 * one it may not reach. Returns the addresses checked (connect to one of them to avoid
 * asking DNS twice). Throws `DestinationAddressError` (400, its code and message).
 */
export async function assertPublicTarget(url: string | URL, options: TargetCheckOptions): Promise<{ host: string; addresses: LookupAddress[] }> {
  const u = typeof url === "string" ? checkTargetUrl(url) : url;
  const host = hostOf(u);
  const allow = options.allowPrivateNetworks;
  const family = isIP(host);
  if (family !== 0) {
    const cls = classifyAddress(host);
    if (isRefused(cls, allow)) throw refusal(host, host, cls as Exclude<AddressClass, "public">, allow);
    return { host, addresses: [{ address: host, family }] };
  }
  checkName(host, allow);
  let addresses: LookupAddress[];
  try {
    addresses = await (options.resolve ?? systemResolver)(host);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new DestinationAddressError(URL_CODES.dns, `Destination host "${host}" could not be resolved${typeof code === "string" ? ` (${code})` : ""}`, host);
  }
  if (addresses.length === 0) throw new DestinationAddressError(URL_CODES.dns, `Destination host "${host}" could not be resolved`, host);
  for (const a of addresses) {
    const cls = classifyAddress(a.address);
    if (isRefused(cls, allow)) throw refusal(host, a.address, cls as Exclude<AddressClass, "public">, allow);
  }
  return { host, addresses };
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `dns.lookup`-compatible function for http.request / https.request / undici's
 * `connect.lookup`: resolves, refuses a forbidden address with the same error
 * `assertPublicTarget` gives, and answers only with checked addresses, so the socket
 * connects to exactly what was checked.
 */
export function safeLookup(options: TargetCheckOptions) {
  return (hostname: string, opts: { all?: boolean } | number | undefined, callback: LookupCallback): void => {
    const all = typeof opts === "object" && opts !== null && opts.all === true;
    const host = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
    const scheme = isIP(host) === 6 ? `http://[${host}]/` : `http://${host}/`;
    assertPublicTarget(scheme, options).then(
      ({ addresses }) => (all ? callback(null, addresses) : callback(null, addresses[0]!.address, addresses[0]!.family)),
      (err: Error) => callback(err as NodeJS.ErrnoException, all ? [] : "", 0),
    );
  };
}
