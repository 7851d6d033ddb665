/** `segmentd token`: print the development tenant's credentials and curl lines again. */
import type { Command } from "commander";
import { readDevCredentials, curlExamples } from "../services/dev-bootstrap.js";
import { addLocationOptions, configFromCli, type ServerCliOptions } from "./serve-command.js";

export function registerTokenCommand(program: Command): void {
  addLocationOptions(program.command("token").description("print the development credentials (created by the first `segmentd serve`); --port and --host only change the printed curl lines")).action(
    (o: ServerCliOptions & { json?: boolean }) => {
      const config = configFromCli(o);
      const c = readDevCredentials(config.dataDir);
      if (!c) {
        process.stderr.write(`no development credentials in ${config.dataDir}; run \`segmentd serve\` once first\n`);
        process.exitCode = 1;
        return;
      }
      if (o.json) {
        process.stdout.write(JSON.stringify(c, null, 2) + "\n");
        return;
      }
      const host = config.host.includes(":") ? `[${config.host}]` : config.host;
      const url = `http://${host}:${config.port}`;
      const out = (line: string) => process.stdout.write(line + "\n");
      out(`org id:          ${c.orgId}`);
      out(`sandbox:         ${c.sandboxName} (${c.sandboxId})`);
      out(`api key:         ${c.apiKey}`);
      out(`token:           ${c.token}`);
      out(`operator token:  ${c.operatorToken}`);
      out("");
      for (const line of curlExamples(url, c)) out(line);
    },
  ).option("--json", "print the credentials as JSON");
}
