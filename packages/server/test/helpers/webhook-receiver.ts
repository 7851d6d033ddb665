/**
 * A webhook receiver in its own process (activation delivery tests):
 *   node --conditions=source --import tsx webhook-receiver.ts '<json options>'
 * Appends every request (arrival time, headers, body) to `log` as one NDJSON line before it
 * answers, then answers as its options say: `failRate` of requests with 500, `hangRate` with no
 * answer for `hangMs` (longer than the sender's timeout), every one after `delayMs`.
 * `downForMs` (with `port`): prints READY at once but listens only after that long, so until then
 * every connection is refused (a receiver that is down).
 * Prints `READY <port>`.
 */
import { appendFileSync } from "node:fs";
import http from "node:http";

interface Options {
  port?: number;
  log: string;
  failRate?: number;
  hangRate?: number;
  hangMs?: number;
  delayMs?: number;
  /** Answer this status to every request (Retry-After with it when retryAfter is set). */
  status?: number;
  retryAfter?: string;
  /** Not listening (connection refused) for this long after READY; needs `port`. */
  downForMs?: number;
}

const o = JSON.parse(process.argv[2]!) as Options;
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const r = Math.random();
    const outcome = o.status !== undefined ? o.status : r < (o.failRate ?? 0) ? 500 : r < (o.failRate ?? 0) + (o.hangRate ?? 0) ? "hang" : 200;
    appendFileSync(o.log, `${JSON.stringify({ t: Date.now(), url: req.url, headers: req.headers, body, outcome })}\n`);
    const answer = () => {
      if (outcome === "hang") return; // the sender times out; the socket is closed later
      res.writeHead(outcome, outcome === 200 ? {} : { ...(o.retryAfter !== undefined ? { "retry-after": o.retryAfter } : {}) });
      res.end(outcome === 200 ? "ok" : `failing on purpose (${outcome})`);
    };
    if (outcome === "hang") setTimeout(() => res.destroy(), o.hangMs ?? 5000);
    else if ((o.delayMs ?? 0) > 0) setTimeout(answer, o.delayMs);
    else answer();
  });
});
server.keepAliveTimeout = 30_000;
if ((o.downForMs ?? 0) > 0) {
  if (o.port === undefined) throw new Error("downForMs needs a port");
  process.stdout.write(`READY ${o.port}\n`);
  setTimeout(() => server.listen(o.port, "127.0.0.1", () => process.stdout.write(`UP ${o.port}\n`)), o.downForMs);
} else {
  server.listen(o.port ?? 0, "127.0.0.1", () => {
    const a = server.address();
    process.stdout.write(`READY ${typeof a === "object" && a !== null ? a.port : 0}\n`);
  });
}
