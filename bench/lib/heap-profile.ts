/**
 * A sampled heap profile of one measured phase (node:inspector, one sample per 16 KiB): the
 * objects allocated during the phase that the GC had not collected by its end, by allocation
 * site. On a server under load that is what the young generation promoted (live or since dead in
 * the old generation): where the scavenges' copying and the old generation's growth come from.
 * Open the file in Chrome DevTools (Memory tab) or sum it by site.
 */
import { writeFileSync } from "node:fs";

/** Starts sampling when `file` is given; the returned function stops and writes the profile (a no-op otherwise). */
export async function startHeapProfile(file: string | undefined): Promise<() => Promise<void>> {
  if (!file) return async () => {};
  const { Session } = await import("node:inspector/promises");
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.enable");
  await session.post("HeapProfiler.startSampling", { samplingInterval: 16384 });
  return async () => {
    const { profile } = await session.post("HeapProfiler.stopSampling");
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    console.log(`heap profile of the measured phase: ${file}`);
  };
}
