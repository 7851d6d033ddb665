/** The inspector's CPU profiler on this (the main) thread (benches' `--cpu-profile FILE`). */
import { writeFileSync } from "node:fs";

/** Starts it unless `file` is ""; the returned function stops it and writes the profile to `file` (and says so after `label`). */
export async function startCpuProfile(file: string, label?: string): Promise<() => Promise<void>> {
  if (file === "") return async () => {};
  const { Session } = await import("node:inspector/promises");
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return async () => {
    const { profile } = await session.post("Profiler.stop");
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    if (label !== undefined) console.log(`  CPU profile of the main thread during ${label}: ${file}`);
  };
}
