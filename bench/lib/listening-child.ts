/**
 * A server the bench runs as a process of its own (an edge node, the bare endpoint): started
 * with Node and these arguments, ready once it prints "listening on <url>", stopped by SIGTERM.
 */
import { spawn, type ChildProcess } from "node:child_process";

export interface ListeningChild {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

export async function startListeningChild(nodeArgs: string[], env: Record<string, string>, label: string): Promise<ListeningChild> {
  const child = spawn(process.execPath, nodeArgs, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  let out = "";
  child.stderr!.on("data", (d: Buffer) => process.stderr.write(`[${label}] ${d.toString()}`));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`the ${label} exited (${code}):\n${out}`)));
  });
  return {
    url,
    child,
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
