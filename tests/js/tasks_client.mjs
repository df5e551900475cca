// The official MCP TypeScript SDK's task support (2025-11-25, `client.experimental.tasks`)
// against handoff: the SDK sees `execution.taskSupport` on opencode_run_task, makes the call
// task-augmented on its own, polls tasks/get and reads the result. Prints one JSON line.
//
//   HANDOFF_URL=http://127.0.0.1:8787 HANDOFF_TOKEN=… node tests/js/tasks_client.mjs

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const base = process.env.HANDOFF_URL;
const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.HANDOFF_TOKEN}` } },
});
const client = new Client({ name: "handoff-tasks-test", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
await client.listTools(); // the SDK learns which tools take tasks from here

const seen = { statuses: [] };
const stream = client.experimental.tasks.callToolStream({
  name: "opencode_run_task",
  arguments: { task: "A task driven by the TypeScript SDK" },
});
for await (const message of stream) {
  if (message.type === "taskCreated") {
    seen.taskId = message.task.taskId;
    seen.created = message.task.status;
  } else if (message.type === "taskStatus") {
    seen.statuses.push(message.task.status);
    seen.final = message.task.status;
  } else if (message.type === "result") {
    seen.result = message.result.structuredContent?.status;
  } else if (message.type === "error") {
    seen.error = String(message.error?.message ?? message.error);
  }
}
const result = await client.experimental.tasks.getTaskResult(seen.taskId, CallToolResultSchema);
seen.resultStatus = result.structuredContent?.status;
const listed = await client.experimental.tasks.listTasks();
seen.listed = listed.tasks.some((t) => t.taskId === seen.taskId);
await client.close();
console.log(JSON.stringify(seen));
