/** Free TCP ports on 127.0.0.1 for processes that take consecutive ports (`segmentd cluster up`). */
import { createServer, type Server } from "node:net";

function listen(port: number): Promise<Server | null> {
  const s = createServer();
  return new Promise((r) => s.once("error", () => r(null)).listen(port, "127.0.0.1", () => r(s)));
}

/** The first of `n` consecutive ports free right now (held while checked, then released). */
export async function freePortRun(n: number): Promise<number> {
  for (;;) {
    const first = await listen(0);
    const port = (first!.address() as { port: number }).port;
    const held: Server[] = [first!];
    for (let i = 1; i < n; i++) {
      const s = await listen(port + i);
      if (s === null) break;
      held.push(s);
    }
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    if (held.length === n) return port;
  }
}
