// The platform's floor for the runs benchmark: a lean JavaScript Worker served by the same
// wrangler dev as handoff, doing what one `opencode_get_result` needs at least — take a JSON
// request, check a bearer token, make one Durable Object round trip that reads one row with
// SQL, and answer JSON. What handoff spends above this is its own share.
import { DurableObject } from "cloudflare:workers";

export class Store extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, status TEXT NOT NULL, task TEXT NOT NULL, result TEXT)",
    );
    ctx.storage.sql.exec(
      "INSERT OR REPLACE INTO runs VALUES ('run_baseline', 'completed', 'fix the flaky test', 'opened a pull request')",
    );
  }

  async fetch(request) {
    const { runId } = await request.json();
    const row = this.ctx.storage.sql.exec("SELECT * FROM runs WHERE id = ?", runId).toArray()[0];
    return Response.json(row ?? null);
  }
}

export default {
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (pathname === "/health") {
      return Response.json({ status: "ok", name: "baseline" });
    }
    if (pathname === "/get" && request.method === "POST") {
      if (request.headers.get("authorization") !== `Bearer ${env.TOKEN}`) {
        return new Response("unauthorized", { status: 401 });
      }
      const call = await request.json();
      const stub = env.STORE.get(env.STORE.idFromName("ledger"));
      const reply = await stub.fetch("https://store/get", {
        method: "POST",
        body: JSON.stringify({ runId: call.params.runId }),
      });
      const run = await reply.json();
      return Response.json({ jsonrpc: "2.0", id: call.id, result: { run } });
    }
    return new Response("not found", { status: 404 });
  },
};
