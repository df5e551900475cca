// A real third-party MCP client doing the OAuth dance against handoff: the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk) with its OAuth support. The script plays the
// browser: it opens the authorization URL the SDK hands over, approves on the consent page with
// the owner passphrase, and gives the code back to the SDK. Prints one JSON line with what it saw.
//
//   HANDOFF_URL=http://127.0.0.1:8787 HANDOFF_PASSPHRASE=… node tests/js/oauth_client.mjs

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const base = process.env.HANDOFF_URL;
const passphrase = process.env.HANDOFF_PASSPHRASE;
const redirectUrl = "http://127.0.0.1:9/oauth/callback"; // never contacted: the script reads Location

class MemoryProvider {
  constructor() {
    this.saved = {};
    this.authorizationUrl = undefined;
  }
  get redirectUrl() {
    return redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: "MCP TypeScript SDK test client",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    this.saved.state = crypto.randomUUID();
    return this.saved.state;
  }
  clientInformation() {
    return this.saved.client;
  }
  saveClientInformation(client) {
    this.saved.client = client;
  }
  tokens() {
    return this.saved.tokens;
  }
  saveTokens(tokens) {
    this.saved.tokens = tokens;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier) {
    this.saved.verifier = verifier;
  }
  codeVerifier() {
    return this.saved.verifier;
  }
}

function hidden(html, name) {
  const match = html.match(new RegExp(`name="${name}" value="([^"]*)"`));
  if (!match) throw new Error(`no ${name} field on the consent page: ${html.slice(0, 400)}`);
  return match[1];
}

// What a person does in the browser: open the page, type the passphrase, press Approve.
async function approveInBrowser(url) {
  const page = await fetch(url, { redirect: "manual" });
  if (page.status !== 200) throw new Error(`consent page answered ${page.status}: ${await page.text()}`);
  const cookies = page.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
  const html = await page.text();
  const form = new URLSearchParams({
    request: hidden(html, "request"),
    csrf: hidden(html, "csrf"),
    decision: "approve",
    passphrase,
  });
  const decided = await fetch(`${base}/oauth/consent`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: cookies, origin: base },
    body: form,
  });
  const location = decided.headers.get("location");
  if (decided.status !== 302 || !location) {
    throw new Error(`consent answered ${decided.status}: ${await decided.text()}`);
  }
  return new URL(location);
}

const provider = new MemoryProvider();
const endpoint = new URL(`${base}/mcp`);
const client = new Client({ name: "sdk-oauth-test", version: "1.0.0" });
let first = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
let needed_authorization = false;
try {
  await client.connect(first);
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  needed_authorization = true;
}
if (!needed_authorization || !provider.authorizationUrl) {
  throw new Error("the server did not ask for authorization");
}
const back = await approveInBrowser(provider.authorizationUrl);
if (back.searchParams.get("state") !== provider.saved.state) throw new Error("state did not round-trip");
await first.finishAuth(back.searchParams.get("code"));

const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
const connected = new Client({ name: "sdk-oauth-test", version: "1.0.0" });
await connected.connect(transport);
const tools = await connected.listTools();
const listed = await connected.callTool({ name: "opencode_list_runs", arguments: { limit: 1 } });
console.log(
  JSON.stringify({
    needed_authorization,
    iss: back.searchParams.get("iss"),
    client_id: provider.saved.client?.client_id,
    has_refresh_token: Boolean(provider.saved.tokens?.refresh_token),
    tools: tools.tools.map((t) => t.name),
    list_runs_is_error: Boolean(listed.isError),
  }),
);
await connected.close();
