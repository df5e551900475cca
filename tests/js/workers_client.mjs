// The official MCP TypeScript SDK drives the workers_* tools against handoff. The SDK checks
// every structuredContent against the tool's outputSchema, so a view that does not match its
// schema fails here. Prints one JSON line.
//
//   HANDOFF_URL=http://127.0.0.1:8787 HANDOFF_TOKEN=… WORKER=name node tests/js/workers_client.mjs

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.HANDOFF_URL;
const worker = process.env.WORKER;
const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.HANDOFF_TOKEN}` } },
});
const client = new Client({ name: "handoff-workers-test", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
await client.listTools(); // the SDK keeps the output schemas it validates against

const seen = { errors: [] };
const call = async (name, args) => {
  try {
    const result = await client.callTool({ name, arguments: args });
    if (result.isError) seen.errors.push(`${name}: ${result.content?.[0]?.text}`);
    return result.structuredContent ?? {};
  } catch (e) {
    seen.errors.push(`${name}: ${e.message}`);
    return {};
  }
};

const manifest = `schema_version: 1
name: ${worker}
runtime: sh
inputs:
  - {name: word, type: string, default: hi}
outputs:
  files:
    - {path: out.txt, media_type: text/plain}
triggers:
  schedule: {cron: "0 9 * * 1", timezone: Europe/Berlin}
  webhook: true
approvals: {required: false}
`;
const files = { "worker.yml": manifest, "run.sh": "printf '%s' \"$(cat inputs.json)\" > outputs/out.txt; echo '{\"ok\": true}' > result.json\n" };
const deployed = await call("workers_deploy", { files });
seen.version = deployed.version?.version;
await call("workers_get", { worker });
await call("workers_list", { limit: 100 });
await call("workers_versions", { worker });
const started = await call("workers_run", { worker, inputs: { word: "sdk" } });
seen.runId = started.runId;
let run = {};
for (let i = 0; i < 300 && !["completed", "failed", "cancelled"].includes(run.status); i++) {
  run = await call("workers_run_get", { runId: seen.runId });
  await new Promise((r) => setTimeout(r, 200));
}
seen.status = run.status;
seen.outputs = run.outputs?.length;
seen.result = run.result;
await call("workers_runs", { worker });
await call("workers_approvals", {});
await call("workers_secret_set", { name: "SDK_TOKEN", value: "sdk-secret-value-123", worker });
await call("workers_secrets_list", {});
await call("workers_secret_delete", { name: "SDK_TOKEN", worker });
const replay = await call("workers_run_replay", { runId: seen.runId });
seen.replayed = Boolean(replay.runId);
await call("workers_run_cancel", { runId: replay.runId });
await call("workers_rollback", { worker, version: 1 }).catch(() => {});
await call("workers_delete", { worker });
await client.close();
console.log(JSON.stringify(seen));
