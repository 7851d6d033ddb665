/**
 * Definitions API benchmark: seed 4,000 definitions in one sandbox, then load
 * it from a separate process (autocannon's CLI) and report p99 latency of
 *   1. GET  /segment/definitions?limit=100 (a 100-item page, default sort)
 *   2. POST /segment/definitions (create; unique names via autocannon's [<id>])
 *
 *   npm run bench:definitions
 *   BENCH_SECONDS=20 BENCH_CONNECTIONS=10 npm run bench:definitions
 *   SEGMENTD_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:definitions   (PostgreSQL store)
 */
import os from "node:os";
import { autocannon, startBenchServer } from "./lib/server.js";

const SEED = 4000;
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 10);

const bench = await startBenchServer({ definitions: 1_000_000 });
const { server, headers } = bench;
try {
  const ctx = server.services.tenants.resolve(server.config.organizations[0]!.id, "prod")!;
  const t0 = performance.now();
  for (let i = 0; i < SEED; i++) {
    await server.services.definitions.create(ctx, {
      name: `seed-${i}`,
      description: `seeded definition ${i}`,
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: `homeAddress.countryCode = "US" and person.age > ${i % 90}` },
    });
  }
  const seedMs = performance.now() - t0;
  const url = `${server.url}/data/core/ups/segment/definitions`;
  const list = await autocannon(`${url}?limit=100`, { headers, connections, seconds });
  const create = await autocannon(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({
      name: "bench [<id>]",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' },
    }),
    idReplacement: true,
    connections,
    seconds,
  });
  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  console.log(`segmentd definitions bench — store ${server.store.kind}, Node ${process.version}, ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`);
  console.log(`seeded ${SEED} definitions through the service in ${(seedMs / 1000).toFixed(1)} s (${(seedMs / SEED).toFixed(2)} ms each)`);
  console.log(`autocannon (separate process): ${connections} connections × ${seconds} s per scenario`);
  const row = (name: string, r: typeof list) =>
    console.log(`${name.padEnd(34)} p50 ${r.p50} ms  p90 ${r.p90} ms  p99 ${r.p99} ms  max ${r.max} ms  ${Math.round(r.rps)} req/s  (${r.requests} requests, non-2xx ${r.non2xx}, errors ${r.errors})`);
  row("GET list, 100-item page", list);
  row("POST create", create);
  if (list.non2xx > 0 || create.non2xx > 0 || list.errors > 0 || create.errors > 0) {
    console.error("some requests failed; the figures above are not valid");
    process.exitCode = 1;
  }
} finally {
  await bench.close();
}
