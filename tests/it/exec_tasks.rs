//! `sandbox_exec` as an MCP task: the command runs as a background process of the sandbox, the
//! task follows it to its end (exit code, output, time limit) and cancelling kills it.

use handoff_tests::mcp::{send, RawResponse};
use handoff_tests::worker::with_sandboxes;
use handoff_tests::{Mcp, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn sandbox(mcp: &Mcp) -> String {
    let out = mcp.call_ok("sandbox_create", json!({})).await;
    out["sandboxId"].as_str().unwrap().to_string()
}

async fn exec_task(mcp: &Mcp, arguments: Value) -> Value {
    let response = mcp
        .request(
            "tools/call",
            json!({"name": "sandbox_exec", "arguments": arguments, "task": {}}),
        )
        .await;
    let task = response["result"]["task"].clone();
    assert!(task["taskId"].is_string(), "{response}");
    task
}

#[tokio::test]
async fn a_command_task_runs_in_the_background_and_ends_with_its_output() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let id = sandbox(&mcp).await;
    let started = Instant::now();
    let task = exec_task(
        &mcp,
        json!({"sandboxId": id, "command": "sleep 2; echo done; echo oops >&2; exit 3"}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answers at once"
    );
    let task_id = task["taskId"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("xtk_"), "{task}");
    assert_eq!(task["status"], "working");
    assert_eq!(task["pollInterval"], 2000);
    let got = mcp.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got["result"]["status"], "working", "{got}");

    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    let out = &result["result"]["structuredContent"];
    assert_eq!(out["exitCode"], 3, "{result}");
    assert_eq!(out["stdout"], "done\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["timedOut"], false);
    assert!(out["durationMs"].as_u64().unwrap() >= 2000, "{out}");
    let ended = mcp.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(ended["result"]["status"], "completed", "{ended}");
    let listed = mcp.request("tasks/list", json!({})).await;
    assert!(listed["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["taskId"] == task_id.as_str()));
    // Bad input is refused before anything starts.
    for (arguments, says) in [
        (json!({"sandboxId": id, "command": ""}), "command"),
        (
            json!({"sandboxId": id, "command": "true", "timeoutMs": 0}),
            "timeoutMs",
        ),
        (
            json!({"sandboxId": "sbx_nope", "command": "true"}),
            "sandboxId",
        ),
        (
            json!({"sandboxId": id, "command": "true", "cwd": "../.."}),
            "inside /home/sandbox",
        ),
    ] {
        let refused = mcp
            .request(
                "tools/call",
                json!({"name": "sandbox_exec", "arguments": arguments, "task": {}}),
            )
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{arguments}: {refused}");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(says),
            "{refused}"
        );
    }
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

#[tokio::test]
async fn a_command_task_keeps_its_time_limit_and_cancelling_kills_it() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let id = sandbox(&mcp).await;
    let limited = exec_task(
        &mcp,
        json!({"sandboxId": id, "command": "sleep 30", "timeoutMs": 1500}),
    )
    .await;
    let result = mcp
        .request("tasks/result", json!({"taskId": limited["taskId"]}))
        .await;
    let out = &result["result"]["structuredContent"];
    assert_eq!(out["timedOut"], true, "{result}");
    assert!(out["exitCode"].is_null());

    let long = exec_task(
        &mcp,
        json!({"sandboxId": id, "command": "echo started > marker; sleep 300; echo late > marker"}),
    )
    .await;
    let task_id = long["taskId"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled = mcp
        .request("tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let again = mcp
        .request("tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(again["error"]["code"], -32602);
    let processes = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": "ps -eo args | grep -c '^sleep 300' || true"}),
        )
        .await;
    assert_eq!(
        processes["stdout"], "0\n",
        "the command is gone: {processes}"
    );
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

#[tokio::test]
async fn a_command_task_whose_sandbox_paused_ends_without_waking_it() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let id = sandbox(&mcp).await;
    let task = exec_task(&mcp, json!({"sandboxId": id, "command": "sleep 300"})).await;
    let task_id = task["taskId"].as_str().unwrap();
    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused", "{paused:#}");

    // Pausing stopped the command: the task ends as lost, and finding that out does not
    // start the sandbox again (a container and a snapshot restore, in production).
    let got = mcp.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got["result"]["status"], "failed", "{got}");
    let said = got["result"]["statusMessage"].to_string();
    assert!(said.contains("paused"), "{got}");
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    assert_eq!(info["status"], "paused", "still paused: {info:#}");
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    assert_eq!(info["status"], "paused", "still paused: {info:#}");
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

/// A modern `tools/call` of `sandbox_exec` from a client that declares the tasks extension.
async fn modern_exec(base: &str, arguments: Value) -> RawResponse {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "sandbox_exec", "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "handoff-tests", "version": "1"}}}});
    send(
        &reqwest::Client::new(),
        &format!("{base}/mcp"),
        TOKEN,
        None,
        Some("2026-07-28"),
        &body.to_string(),
        &[("mcp-method", "tools/call"), ("mcp-name", "sandbox_exec")],
    )
    .await
}

#[tokio::test]
async fn modern_clients_get_a_task_for_a_long_exec_only() {
    let base = with_sandboxes().1.url("");
    let mcp = Mcp::connect(&base).await;
    let id = sandbox(&mcp).await;
    let short = modern_exec(&base, json!({"sandboxId": id, "command": "echo hi"})).await;
    let short = short.json();
    assert_eq!(short["result"]["resultType"], "complete", "{short}");
    assert_eq!(short["result"]["structuredContent"]["stdout"], "hi\n");
    let long = modern_exec(
        &base,
        json!({"sandboxId": id, "command": "echo long", "timeoutMs": 120000}),
    )
    .await;
    let long = long.json();
    assert_eq!(long["result"]["resultType"], "task", "{long}");
    assert!(long["result"]["taskId"]
        .as_str()
        .unwrap()
        .starts_with("xtk_"));
    // The legacy session sees the same task.
    let task_id = long["result"]["taskId"].as_str().unwrap();
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(
        result["result"]["structuredContent"]["stdout"], "long\n",
        "{result}"
    );
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}
