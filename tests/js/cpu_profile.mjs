// A CPU profile of a workerd isolate over DevTools, for `cargo xtask bench profile`:
//   node cpu_profile.mjs <inspector-port> <seconds> <named.wasm> <out.cpuprofile> [bundle.js]
// Samples every 50 µs for <seconds>, writes the raw profile (open it in Chrome's DevTools) and
// prints the functions with the most self and inclusive time. The served wasm has no function
// names; they are read from the named copy the build keeps (same function indices).
import { readFileSync, writeFileSync } from "node:fs";

const [port, seconds, namedWasm, out, bundlePath] = process.argv.slice(2);

/// Function index → name, from the wasm's "name" custom section (subsection 1).
function wasmNames(path) {
  const names = new Map();
  const module = new WebAssembly.Module(readFileSync(path));
  const [section] = WebAssembly.Module.customSections(module, "name");
  if (!section) return names;
  const bytes = new Uint8Array(section);
  let at = 0;
  const leb = () => {
    let value = 0, shift = 0, byte;
    do {
      byte = bytes[at++];
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  const decoder = new TextDecoder();
  while (at < bytes.length) {
    const kind = bytes[at++];
    const size = leb();
    const end = at + size;
    if (kind === 1) {
      for (let count = leb(); count > 0; count--) {
        const index = leb();
        const length = leb();
        names.set(index, decoder.decode(bytes.subarray(at, at + length)));
        at += length;
      }
    }
    at = end;
  }
  return names;
}

const names = wasmNames(namedWasm);
setTimeout(() => {
  console.error("the inspector did not answer in time");
  process.exit(3);
}, (Number(seconds) + 30) * 1000).unref();
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const target = targets.find((t) => t.title.includes("handoff")) ?? targets[0];
// wrangler's inspector proxy takes local origins only; Node's client sends none by default.
const ws = new WebSocket(target.webSocketDebuggerUrl, { headers: { origin: "http://127.0.0.1" } });
await new Promise((resolve, reject) => {
  ws.onopen = resolve;
  ws.onerror = reject;
});
let nextId = 0;
const pending = new Map();
ws.onmessage = (message) => {
  const reply = JSON.parse(message.data);
  pending.get(reply.id)?.(reply);
  pending.delete(reply.id);
};
const send = (method, params = {}) =>
  new Promise((resolve) => {
    nextId += 1;
    pending.set(nextId, resolve);
    ws.send(JSON.stringify({ id: nextId, method, params }));
  });
await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: 50 });
await send("Profiler.start");
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
const { profile } = (await send("Profiler.stop")).result;
ws.close();

// JavaScript frames are told apart by where they are (the bundle is minified); the source
// around each of the busiest is printed below.
const label = ({ functionName, url, scriptId, lineNumber, columnNumber }) => {
  const index = /^(?:\$func|wasm-function\[)(\d+)/.exec(functionName)?.[1];
  if (index !== undefined) return names.get(Number(index)) ?? functionName;
  if (url.startsWith("wasm://") || !url) return functionName || "(anonymous)";
  return `${functionName || "(anonymous)"} @${scriptId}:${lineNumber}:${columnNumber}`;
};
for (const node of profile.nodes) node.callFrame.functionName = label(node.callFrame);
writeFileSync(out, JSON.stringify(profile));
// The bundle wrangler serves, to show where its busiest JavaScript is.
const bundle = bundlePath ? readFileSync(bundlePath, "utf8").split("\n") : [];
const sourceAt = (where) => {
  const [, line, column] = /@\d+:(\d+):(\d+)$/.exec(where) ?? [];
  const text = bundle[Number(line)] ?? "";
  return text.slice(Math.max(0, Number(column) - 10), Number(column) + 110).replace(/\s+/g, " ");
};

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const spent = new Map();
profile.samples.forEach((id, i) => spent.set(id, (spent.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const self = new Map();
const inclusive = new Map();
let total = 0;
let idle = 0;
for (const [id, micros] of spent) {
  const name = byId.get(id).callFrame.functionName;
  total += micros;
  if (name.startsWith("(idle)") || name.startsWith("(program)")) idle += micros;
  self.set(name, (self.get(name) ?? 0) + micros);
  const counted = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const frame = byId.get(at).callFrame.functionName;
    if (counted.has(frame)) continue;
    counted.add(frame);
    inclusive.set(frame, (inclusive.get(frame) ?? 0) + micros);
  }
}
const busy = total - idle;
const top = (table, count) =>
  [...table]
    .filter(([name]) => !name.startsWith("(idle)") && !name.startsWith("(root)"))
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, micros]) => `${(micros / 1000).toFixed(1).padStart(9)} ms ${((100 * micros) / busy).toFixed(1).padStart(5)} %  ${name.slice(0, 110)}`)
    .join("\n");
console.log(`profiled ${(total / 1000).toFixed(0)} ms, of which busy ${(busy / 1000).toFixed(0)} ms (percentages of busy)`);
console.log(`-- self time --\n${top(self, 40)}`);
console.log(`-- inclusive time --\n${top(inclusive, 50)}`);
// Busy time by layer. In the bundle, wasm-bindgen's glue comes first, then worker-build's shim
// (from `Error.stackTraceLimit`: the entry class and, from xtask/src/recovery.js, the wrapping
// that resets the wasm after a trap), then wrangler dev's middleware (not deployed).
const shimStart = bundle.findIndex((line) => line.includes("Error.stackTraceLimit"));
const middlewareStart = bundle.findIndex((line) => line.includes("wrangler/templates/middleware"));
const layers = new Map();
for (const [id, micros] of spent) {
  const { functionName: name, url, lineNumber: line } = byId.get(id).callFrame;
  if (name.startsWith("(idle)") || name.startsWith("(program)")) continue;
  let layer = "the runtime's own (fetch, Request, Response, SQL, the entrypoint…)";
  if (name.startsWith("(garbage")) layer = "garbage collection";
  else if (/^(js-to-wasm|wasm-to-js)/.test(name)) layer = "calls between JavaScript and wasm";
  else if (url.startsWith("wasm://")) layer = "handoff's Rust (wasm)";
  else if (url && middlewareStart >= 0 && line >= middlewareStart) layer = "wrangler dev's middleware (not deployed)";
  else if (url && shimStart >= 0 && line >= shimStart) layer = "the entry and its trap recovery (worker-build's shim, recovery.js)";
  else if (url) layer = "wasm-bindgen's glue";
  layers.set(layer, (layers.get(layer) ?? 0) + micros);
}
console.log("-- busy time by layer --");
for (const [layer, micros] of [...layers].sort((a, b) => b[1] - a[1])) {
  console.log(`${((100 * micros) / busy).toFixed(1).padStart(6)} %  ${layer}`);
}
console.log("-- the busiest JavaScript, where it is --");
const javascript = [...self].filter(([name]) => name.includes(" @")).sort((a, b) => b[1] - a[1]);
for (const [name] of javascript.slice(0, 8)) console.log(`${name}: ${sourceAt(name)}`);
// The inspector proxy does not always finish the close handshake.
process.exit(0);
