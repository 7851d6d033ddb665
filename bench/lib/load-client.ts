/**
 * Benches run their load generator as a separate process, so that it never
 * shares the server's event loop. Kept apart from the server-side helpers so
 * that the client process loads nothing of the server.
 */
import { spawn } from "node:child_process";

/**
 * Run this bench file again as the load client (`--client ...args`) in its own
 * process and return the JSON it prints on stdout.
 */
export function runLoadClient<T>(benchFile: string, args: string[]): Promise<T> {
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", benchFile, "--client", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) =>
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`load client exited ${code}`)))),
  );
}
