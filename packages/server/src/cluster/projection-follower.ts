/**
 * Several hubs share which profiles each edge site holds: every hub follows the projection
 * stream's subjects (`segmentd.proj.<site>.<tenant>.<profile>`, headers only) from where its
 * start-up read of the stream's subjects ended, and notes each profile another hub projected to
 * a site, or told it to forget. A hub that changes such a profile (an ingestion, a job, a
 * lifecycle delete through it) then projects the change to the site, whichever hub consumed the
 * site's events of it.
 */
import { headers, type MsgHdrs } from "@nats-io/transport-node";
import type { JetStreamClient, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { FeedReader } from "./feed-reader.js";
import type { RemoteLocationStore } from "./remote-location.js";
import { PROJECTION_STREAM, untoken } from "./subjects.js";

const FILTER = "segmentd.proj.>";
/** The header saying what a projection stream message is: `forget` or `projection`. */
export const PROJECTION_KIND_HEADER = "Segmentd-Proj-Kind";

/** The headers a projection stream message is published with. */
export function projectionHeaders(forget: boolean): MsgHdrs {
  const h = headers();
  h.set(PROJECTION_KIND_HEADER, forget ? "forget" : "projection");
  return h;
}

export interface ProjectionFollowerDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The hub's view of a site (attached on first use); undefined for a location this process serves itself. */
  site(location: string): RemoteLocationStore | undefined;
  onError(err: unknown): void;
}

export class ProjectionFollower {
  private reader: FeedReader | null = null;

  constructor(private readonly deps: ProjectionFollowerDeps) {}

  /**
   * Notes every profile the stream holds a projection of (last value each subject), then follows
   * the stream from the sequence that read saw.
   */
  async start(): Promise<void> {
    const info = await this.deps.jsm.streams.info(PROJECTION_STREAM, { subjects_filter: FILTER });
    for (const subject of Object.keys(info.state.subjects ?? {})) this.note(subject, false);
    this.reader = new FeedReader({
      js: this.deps.js,
      stream: PROJECTION_STREAM,
      filter: FILTER,
      startAfter: info.state.last_seq,
      headersOnly: true,
      apply: async (batch: JsMsg[]) => {
        for (const m of batch) this.note(m.subject, m.headers?.get(PROJECTION_KIND_HEADER) === "forget");
      },
      onError: this.deps.onError,
    });
    this.reader.start();
  }

  /** Resolves once the follower has read what the stream held (tests). */
  caughtUp(): Promise<void> {
    return this.reader?.caughtUp() ?? Promise.resolve();
  }

  async stop(): Promise<void> {
    await this.reader?.stop();
  }

  private note(subject: string, forget: boolean): void {
    const [, , site, tk, pid] = subject.split(".");
    if (site === undefined || tk === undefined || pid === undefined) return;
    const store = this.deps.site(site);
    if (store === undefined) return;
    if (forget) store.unnoteProjected(untoken(tk), untoken(pid));
    else store.noteProjected(untoken(tk), untoken(pid));
  }
}
