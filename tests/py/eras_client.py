"""The official Python MCP SDK against handoff, in both eras: mode="auto" probes server/discover and
must settle on 2026-07-28; mode="legacy" must use the initialize handshake (2025-11-25). Each
lists the tools, starts a run and reads it back. Prints one JSON object per mode."""

import asyncio
import json
import sys

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference


async def use(url: str, token: str, mode: str) -> dict:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        tools = await client.list_tools()
        started = await client.call_tool("opencode_run_task", {"task": f"python sdk task ({mode})"})
        run_id = started.structured_content["runId"]
        got = await client.call_tool("opencode_get_result", {"runId": run_id})
        uri = f"handoff://runs/{run_id}"
        read = await client.read_resource(uri)
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("delegate", {"task": "fix the flaky test"})
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="review_run"), {"name": "runId", "value": run_id[:8]}
        )
        honored = None
        if client.protocol_version >= "2026-07-28":
            async with client.listen(resource_subscriptions=[uri]) as sub:
                honored = list(sub.honored.resource_subscriptions or [])
        return {
            "readRunId": json.loads(read.contents[0].text)["runId"],
            "templates": sorted(t.uri_template for t in templates.resource_templates),
            "prompts": sorted(p.name for p in prompts.prompts),
            "promptText": prompt.messages[0].content.text,
            "completes": run_id in completion.completion.values,
            "listenHonored": honored,
            "mode": mode,
            "version": client.protocol_version,
            "tools": len(tools.tools),
            "runId": run_id,
            "readBack": got.structured_content["runId"],
            "isError": bool(started.is_error),
        }


async def main() -> None:
    url, token = sys.argv[1], sys.argv[2]
    for mode in ("auto", "legacy"):
        print(json.dumps(await use(url, token, mode)), flush=True)


asyncio.run(main())
