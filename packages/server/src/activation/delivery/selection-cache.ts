// A flow's webhook bodies, built from profile parts kept between requests. A profile's part —
// its selected identities and attributes as JSON text — is read from the store once and kept
// until the store's change feed (ProfileStore.changesSince) says the profile's data changed; a
// unit's body is then those parts and its memberships joined as text (one JSON build, no object
// per profile), so most requests make no store round trip and stringify nothing large.
//
// Kept only where the change feed sees every writer of the profiles: the embedded store (one
// process owns the data directory). PostgreSQL's feed holds this process's writes only (cluster
// workers write profiles too), so there every unit reads its profiles anew, as buildPayload does.
import type { ProfileSelection, ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { ProfileSelectors } from "../types.js";
import { attributePaths, serially, setPath, type Json } from "./payload.js";
import type { UnitItem } from "./state-store.js";

/** Profile parts kept per flow: beyond this the oldest are dropped (read again when needed). */
export const DEFAULT_CAPACITY = 50_000;

/**
 * A profile's part of a body, around its memberships: `{"identityMap":{…},"segmentMembership":{"ups":{`
 * before, `}},"_segmentd":{"profileId":"…","seqs":[` between, and `]}` with `,"<attribute>":…` for
 * each selected attribute present and `}` after.
 */
interface Part {
  head: string;
  middle: string;
  tail: string;
  /** All three are printable ASCII (then the body is encoded as Latin-1: a copy, the same bytes as UTF-8). */
  ascii: boolean;
}

const NON_ASCII = /[^ -~\t\n\r]/;

/** A membership's value up to its lastQualificationTime, per status. */
const STATUS_OPEN: Record<UnitItem["status"], string> = {
  realized: '{"status":"realized","lastQualificationTime":"',
  existing: '{"status":"existing","lastQualificationTime":"',
  exited: '{"status":"exited","lastQualificationTime":"',
};

export class SelectionCache {
  private readonly parts = new Map<string, Part>();
  /** The change feed's version the parts are valid at (null: none read yet). */
  private version: number | null = null;
  /** What the parts were made for (selectors and merge policy): a change empties the cache. */
  private key = "";
  /** One fill at a time: a fill's read and its feed version must not interleave with another's. */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly keep: boolean;
  private readonly keys = new Map<string, string>();
  /** No audience key seen was anything but ASCII (else bodies are encoded as UTF-8). */
  private asciiKeys = true;

  constructor(private readonly store: ProfileStore, private readonly scope: TenantScope, private readonly capacity = DEFAULT_CAPACITY) {
    this.keep = store.kind === "embedded" && capacity > 0;
  }

  /** The JSON request body for a unit's items: AEP's HTTP API destination array (payload.ts), as bytes. */
  async body(items: readonly UnitItem[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<Buffer> {
    // Profiles in the order of their first item, each with its items chained in unit order
    // (indexes, no object per profile); a repeated audience keeps its first place, the last value.
    const index = new Map<string, number>();
    const order: string[] = [];
    const first: number[] = [];
    const last: number[] = [];
    const next = new Int32Array(items.length).fill(-1);
    for (let k = 0; k < items.length; k++) {
      const pid = items[k]!.profileId;
      const p = index.get(pid);
      if (p === undefined) {
        index.set(pid, order.length);
        order.push(pid);
        first.push(k);
        last.push(k);
      } else {
        next[last[p]!] = k;
        last[p] = k;
      }
    }
    const parts = await this.partsOf(order, selectors, policy);
    const iso = new Map<number, string>();
    let ascii = true;
    // Pieces joined once (a string built by += is a rope, flattened again when encoded).
    const out: string[] = ["["];
    for (let p = 0; p < order.length; p++) {
      const part = parts[p]!;
      if (!part.ascii) ascii = false;
      if (p > 0) out.push(",");
      out.push(part.head);
      let seqs = "";
      let members = 0;
      for (let k = first[p]!; k !== -1; k = next[k]!) {
        const it = items[k]!;
        if (it.seq > 0) seqs = seqs === "" ? String(it.seq) : `${seqs},${it.seq}`;
        let shown = it;
        if (k !== last[p]) {
          // A repeated audience (a snapshot item and a log item, say): shown once, where it came first, with its last value.
          let seen = false;
          for (let j = first[p]!; j !== k; j = next[j]!) if (items[j]!.audienceId === it.audienceId) seen = true;
          if (seen) continue;
          for (let j = next[k]!; j !== -1; j = next[j]!) if (items[j]!.audienceId === it.audienceId) shown = items[j]!;
        } else if (members > 0) {
          let seen = false;
          for (let j = first[p]!; j !== k; j = next[j]!) if (items[j]!.audienceId === it.audienceId) seen = true;
          if (seen) continue;
        }
        let t = iso.get(shown.at);
        if (t === undefined) iso.set(shown.at, t = new Date(shown.at).toISOString());
        out.push(members > 0 ? "," : "", this.memberKey(it.audienceId), STATUS_OPEN[shown.status], t, "\"}");
        members++;
      }
      out.push(part.middle, seqs, part.tail);
    }
    out.push("]");
    // The rest (statuses, times, positions, punctuation) is ASCII.
    return Buffer.from(out.join(""), ascii && this.asciiKeys ? "latin1" : "utf8");
  }

  /** `"<audienceId>":` as JSON, kept per audience (a flow has few). */
  private memberKey(audienceId: string): string {
    let k = this.keys.get(audienceId);
    if (k === undefined) {
      if (this.keys.size >= 10_000) this.keys.clear();
      this.keys.set(audienceId, k = `${JSON.stringify(audienceId)}:`);
      if (NON_ASCII.test(k)) this.asciiKeys = false;
    }
    return k;
  }

  /**
   * Reads the parts of these profiles that are not kept yet (one store call), so that the bodies
   * of the units just cut read nothing. Only where parts are kept (the embedded store).
   */
  async prefetch(ids: readonly string[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<void> {
    if (this.keep && ids.length > 0) await this.partsOf(ids, selectors, policy);
  }

  /** Each profile's part, in order: kept ones as they are, the others read in one store call. */
  private partsOf(ids: readonly string[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<Part[]> {
    const run = this.chain.then(() => this.fill(ids, selectors, policy));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async fill(ids: readonly string[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<Part[]> {
    const paths = attributePaths(selectors);
    const namespaces = new Set(selectors.identityNamespaces.map((n) => n.toLowerCase()));
    const made = new Map<string, Part>();
    if (this.keep) {
      const key = JSON.stringify([paths, [...namespaces], policy]);
      if (key !== this.key) {
        this.parts.clear();
        this.key = key;
        this.version = null;
      }
      // Taken before the read: a write after it is reported next time, whether the read saw it or not.
      const changed = this.store.changesSince(this.scope, this.version);
      if (changed.profileIds === null) this.parts.clear();
      else for (const p of changed.profileIds) this.parts.delete(p);
      this.version = changed.version;
    }
    const missing = this.keep ? [...new Set(ids.filter((p) => !this.parts.has(p)))] : [...new Set(ids)];
    if (missing.length > 0) {
      const read: ProfileSelection[] = paths.length > 0
        ? await serially(this.store, () => this.store.profileSelections(this.scope, missing, policy, paths))
        : (await serially(this.store, () => this.store.graphIdentitiesOf(this.scope, missing))).map((identities) => ({ identities, values: [] }));
      const split = paths.map((p) => p.split("."));
      for (let k = 0; k < missing.length; k++) made.set(missing[k]!, partOf(missing[k]!, read[k], namespaces, split));
      if (this.keep) {
        for (const [p, part] of made) this.parts.set(p, part);
        this.evict();
      }
    }
    return ids.map((p) => made.get(p) ?? this.parts.get(p)!);
  }

  /** Over capacity: the oldest tenth goes (Map order is insertion order). */
  private evict(): void {
    if (this.parts.size <= this.capacity) return;
    let drop = this.parts.size - Math.floor(this.capacity * 0.9);
    for (const p of this.parts.keys()) {
      if (drop-- <= 0) break;
      this.parts.delete(p);
    }
  }
}

/** One profile's identities (selected namespaces) and attributes as buildPayload sets them, as JSON members. */
function partOf(profileId: string, sel: ProfileSelection | undefined, namespaces: ReadonlySet<string>, paths: ReadonlyArray<readonly string[]>): Part {
  const identityMap: Record<string, Array<{ id: string }>> = {};
  for (const id of sel?.identities ?? []) {
    if (namespaces.size > 0 && !namespaces.has(id.namespace.toLowerCase())) continue;
    (identityMap[id.namespace] ??= []).push({ id: id.id });
  }
  const attrs: Record<string, unknown> = {};
  for (let j = 0; j < paths.length; j++) {
    const v = sel?.values[j];
    if (v !== undefined) setPath(attrs, paths[j]!, v as Json);
  }
  const a = JSON.stringify(attrs);
  // "{}" → "", `{"x":…}` → `,"x":…` (members after _segmentd, as the payload object orders them).
  // Each made flat (join): a rope would be walked again by every body that joins it.
  const head = ['{"identityMap":', JSON.stringify(identityMap), ',"segmentMembership":{"ups":{'].join("");
  const middle = ['}},"_segmentd":{"profileId":', JSON.stringify(profileId), ',"seqs":['].join("");
  const tail = [']}', a.length > 2 ? `,${a.slice(1, -1)}` : "", "}"].join("");
  return { head, middle, tail, ascii: !NON_ASCII.test(head) && !NON_ASCII.test(middle) && !NON_ASCII.test(tail) };
}
