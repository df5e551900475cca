// The hot path as other MCP servers are measured: the official MCP TypeScript SDK client
// (`Client` over `StreamableHTTPClientTransport`) against handoff. `cargo xtask bench runs` runs
// it after its own figures; by hand:
//
//   HANDOFF_URL=http://127.0.0.1:8787 HANDOFF_TOKEN=… RUN_ID=run_… node tests/js/bench_client.mjs
//
// Measures `initialize` (a fresh client's connect: initialize + initialized, and the initialize
// request alone), then
// `opencode_get_result` and `opencode_list_runs` with SEQUENTIAL calls on one client, then
// `opencode_get_result` with CLIENTS clients × PER_CLIENT calls each at once. Prints one JSON line
// of figures (milliseconds; calls per second).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const base = process.env.HANDOFF_URL;
const token = process.env.HANDOFF_TOKEN;
const runId = process.env.RUN_ID;
const sequential = Number(process.env.SEQUENTIAL ?? 300);
const clients = Number(process.env.CLIENTS ?? 10);
const perClient = Number(process.env.PER_CLIENT ?? 2000);
const connects = Number(process.env.CONNECTS ?? 50);

// How long each `initialize` request took on its own (until its response arrived): a connect
// is two requests, `initialize` and the `initialized` notification.
const initializeRequests = [];

/// fetch, timing the `initialize` requests the SDK sends through it.
async function timingFetch(url, init) {
  const started = performance.now();
  const response = await fetch(url, init);
  if (typeof init?.body === "string" && init.body.includes('"method":"initialize"')) {
    const copy = response.clone();
    await copy.text();
    initializeRequests.push(performance.now() - started);
  }
  return response;
}

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: timingFetch,
  });
  const client = new Client({ name: "handoff-bench", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
  return client;
}

function figures(samples, wallMs) {
  const sorted = [...samples].sort((a, b) => a - b);
  const pick = (q) => sorted[Math.round((sorted.length - 1) * q)];
  return {
    n: sorted.length,
    p50: pick(0.5),
    p99: pick(0.99),
    perSecond: (sorted.length / wallMs) * 1000,
  };
}

async function timed(calls, call) {
  const samples = [];
  const started = performance.now();
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    await call();
    samples.push(performance.now() - t);
  }
  return { samples, wall: performance.now() - started };
}

async function check(promise) {
  const result = await promise;
  if (result.isError) {
    throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  }
  return result;
}

const out = {};

// initialize: each a new client and MCP session (closed afterwards).
{
  const samples = [];
  const started = performance.now();
  for (let i = 0; i < connects; i++) {
    const t = performance.now();
    const client = await connect();
    samples.push(performance.now() - t);
    await client.close();
  }
  out.initialize = figures(samples, performance.now() - started);
  out.initializeRequest = figures(initializeRequests, performance.now() - started);
}

const client = await connect();
const get = () => check(client.callTool({ name: "opencode_get_result", arguments: { runId } }));
const list = () => check(client.callTool({ name: "opencode_list_runs", arguments: {} }));
for (let i = 0; i < 20; i++) {
  await get();
  await list();
}
{
  const { samples, wall } = await timed(sequential, get);
  out.getResult = figures(samples, wall);
}
{
  const { samples, wall } = await timed(sequential, list);
  out.listRuns = figures(samples, wall);
}

// Concurrency: each client its own session, all at once.
{
  const many = await Promise.all(Array.from({ length: clients }, connect));
  const started = performance.now();
  const all = await Promise.all(
    many.map((c) =>
      timed(perClient, () =>
        check(c.callTool({ name: "opencode_get_result", arguments: { runId } })),
      ).then((r) => r.samples),
    ),
  );
  out.getResultConcurrent = figures(all.flat(), performance.now() - started);
  out.getResultConcurrent.clients = clients;
  await Promise.all(many.map((c) => c.close()));
}
await client.close();
console.log(JSON.stringify(out));
