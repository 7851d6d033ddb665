/**
 * Names on the wire between the hub and the edge sites (JetStream streams and subjects).
 *
 *   edge site (domain = site)  SEGMENTD_EV_<SITE>   segmentd.ev.<site>           events collected there
 *   hub (domain hub)           SEGMENTD_EV          sources every site's stream; segmentd.evd.<site> from outbox nodes
 *   hub                        SEGMENTD_CONFIG      segmentd.cfg.<kind>.<sandbox>.<id>   last value per subject
 *   hub                        SEGMENTD_PROJ        segmentd.proj.<site>.<tenant>.<profile>   last value per subject
 *
 * Subject tokens cannot hold `.`, `*`, `>` or whitespace: ids are encoded (`token`).
 */

export const HUB_DOMAIN = "hub";
export const HUB_EVENTS_STREAM = "SEGMENTD_EV";
export const CONFIG_STREAM = "SEGMENTD_CONFIG";
export const PROJECTION_STREAM = "SEGMENTD_PROJ";
/** The hub's durable consumer of SEGMENTD_EV. */
export const HUB_INGEST_CONSUMER = "segmentd-hub-ingest";
/** Core NATS (no stream): hubs sharing one database tell each other which cached configuration changed (hub-invalidation.ts). */
export const HUB_INVALIDATION_SUBJECT = "segmentd.hub.invalidate";
/** Core NATS requests for the hub that delivers a dataflow (resend, replay, export now). */
export const DELIVERY_COMMAND_SUBJECT = "segmentd.hub.delivery";
/** Core NATS requests for a chunk of an export run's file, answered by the hub that has it. */
export const EXPORT_FILE_SUBJECT = "segmentd.hub.files";
/** Core NATS: the hub's previews, estimates and edit impact, answered by every worker over its shard (fleet-reads.ts). */
export const SHARD_READ_SUBJECT = "segmentd.batch.read";

/** A site name: a JetStream domain, a stream-name suffix and a subject token at once. */
export const SITE_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

export function siteEventsStream(site: string): string {
  return `SEGMENTD_EV_${site.toUpperCase().replace(/-/g, "_")}`;
}

export function siteEventsSubject(site: string): string {
  return `segmentd.ev.${site}`;
}

/** Where an edge node without a site JetStream sends its outbox: straight to the hub's stream. */
export function directEventsSubject(site: string): string {
  return `segmentd.evd.${site}`;
}

export const DIRECT_EVENTS_SUBJECTS = "segmentd.evd.>";

/** One subject token for any string: letters, digits, `-` and `_` kept, anything else `~hh` (UTF-8 bytes). */
export function token(s: string): string {
  if (s === "") return "~";
  let out = "";
  for (const b of Buffer.from(s, "utf8")) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `~${b.toString(16).padStart(2, "0")}`;
  }
  return out;
}

export function untoken(t: string): string {
  if (t === "~") return "";
  const bytes: number[] = [];
  for (let i = 0; i < t.length; i++) {
    if (t[i] === "~") {
      bytes.push(parseInt(t.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(t.charCodeAt(i));
  }
  return Buffer.from(bytes).toString("utf8");
}

export type ConfigKind = "definition" | "mergePolicy" | "datastream";

export function configSubject(kind: ConfigKind, sandboxId: string, id: string): string {
  return `segmentd.cfg.${kind}.${token(sandboxId)}.${token(id)}`;
}

export function projectionSubject(site: string, tenantKey: string, profileId: string): string {
  return `segmentd.proj.${site}.${token(tenantKey)}.${token(profileId)}`;
}

export function siteProjectionFilter(site: string): string {
  return `segmentd.proj.${site}.>`;
}
