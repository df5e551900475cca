//! MCP tasks in both eras, backed by the run ledger: a task-augmented `opencode_run_task` makes
//! its run a task (task id = run id); `tasks/get`, `tasks/result`, `tasks/list` and
//! `tasks/cancel` (2025-11-25) and the `io.modelcontextprotocol/tasks` extension (2026-07-28)
//! read and cancel that run; the result is what `opencode_get_result` answers.

use crate::base;
use crate::durability::hung;
use handoff_tests::mcp::{read_events, send, RawResponse};
use handoff_tests::{stack, Mcp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

const HOUR_MS: i64 = 3_600_000;

/// Polls `tasks/get` until the task's status is `status`.
async fn wait_task(mcp: &Mcp, task_id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let task = mcp.request("tasks/get", json!({"taskId": task_id})).await;
        if task["result"]["status"] == status {
            return task["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task_id} never became {status}");
}

#[tokio::test]
async fn the_initialize_era_advertises_tasks_and_run_task_takes_them() {
    let mcp = Mcp::connect(&base()).await;
    let init = send(
        &mcp.http,
        &mcp.endpoint,
        TOKEN,
        None,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}})
        .to_string(),
        &[],
    )
    .await
    .json();
    let tasks = &init["result"]["capabilities"]["tasks"];
    assert!(tasks["list"].is_object(), "{init}");
    assert!(tasks["cancel"].is_object(), "{init}");
    assert!(tasks["requests"]["tools"]["call"].is_object(), "{init}");
    let listed = mcp.request("tools/list", json!({})).await;
    for tool in listed["result"]["tools"].as_array().unwrap() {
        let support = &tool["execution"]["taskSupport"];
        let name = tool["name"].as_str().unwrap_or_default();
        if [
            "opencode_run_task",
            "sandbox_exec",
            "workers_run",
            "workers_run_replay",
        ]
        .contains(&name)
        {
            assert_eq!(support, "optional", "{tool}");
        } else {
            assert!(support.is_null(), "{tool}");
        }
    }
}

#[tokio::test]
async fn a_task_is_a_durable_run_from_creation_to_result() {
    let mcp = Mcp::connect(&base()).await;
    // Without a sandbox backend the run fails within moments: a complete life in little time.
    let task = mcp
        .start_task(json!({"task": "Be a task"}), json!({"ttl": 2 * HOUR_MS}))
        .await;
    let task_id = task["taskId"].as_str().unwrap();
    assert!(task_id.starts_with("run_"), "{task}");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 2 * HOUR_MS, "the TTL asked for is granted");
    assert_eq!(task["pollInterval"], 5000);
    assert!(task["createdAt"].is_string() && task["lastUpdatedAt"].is_string());

    // The task is the run: opencode_get_result reads it too.
    let run = mcp.get_run(task_id).await;
    assert_eq!(run["task"], "Be a task");

    let ended = wait_task(&mcp, task_id, "failed").await;
    assert!(
        ended["statusMessage"].as_str().unwrap().contains("sandbox"),
        "{ended}"
    );
    assert!(ended.get("pollInterval").is_none(), "no polling once ended");
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    let result = &result["result"];
    assert_eq!(result["isError"], true, "a failed run is an error result");
    assert_eq!(result["structuredContent"]["runId"], task_id);
    assert_eq!(result["structuredContent"]["status"], "failed");
    assert_eq!(
        result["structuredContent"]["result"]["error"]["code"],
        "sandbox_unavailable"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );

    let listed = mcp.request("tasks/list", json!({})).await;
    let tasks = listed["result"]["tasks"].as_array().unwrap();
    assert!(tasks.iter().any(|t| t["taskId"] == task_id), "{listed}");

    let again = mcp
        .request("tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(again["error"]["code"], -32602, "an ended task: {again}");
    assert!(again["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already ended"));
}

#[tokio::test]
async fn ttls_are_bounded_and_bad_task_requests_are_refused() {
    let mcp = Mcp::connect(&base()).await;
    let short = mcp
        .start_task(json!({"task": "Short ttl"}), json!({"ttl": 1}))
        .await;
    assert_eq!(short["ttl"], HOUR_MS, "at least an hour: {short}");
    let default = mcp.start_task(json!({"task": "No ttl"}), json!({})).await;
    assert_eq!(default["ttl"], 7 * 24 * HOUR_MS, "{default}");

    for (params, says) in [
        (
            json!({"name": "opencode_run_task", "arguments": {"task": "x"}, "task": {"ttl": -5}}),
            "task.ttl",
        ),
        (
            json!({"name": "opencode_run_task", "arguments": {"task": "x"}, "task": "soon"}),
            "`task` must be an object",
        ),
        (
            json!({"name": "opencode_list_runs", "arguments": {}, "task": {}}),
            "does not take task-augmented calls",
        ),
        (
            json!({"name": "opencode_run_task", "arguments": {"task": ""}, "task": {}}),
            "task",
        ),
    ] {
        let response = mcp.request("tools/call", params.clone()).await;
        let error = &response["error"];
        assert!(error["code"].is_i64(), "{params} → {response}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{params} should say {says}: {response}"
        );
    }
    for (params, code) in [
        (json!({"taskId": "run_0123456789abcdefghjkmnpqrs"}), -32602),
        (json!({"taskId": "../../etc/passwd"}), -32602),
        (json!({}), -32602),
    ] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let response = mcp.request(method, params.clone()).await;
            assert_eq!(
                response["error"]["code"], code,
                "{method} {params}: {response}"
            );
        }
    }
    let bad_cursor = mcp.request("tasks/list", json!({"cursor": "nope"})).await;
    assert_eq!(bad_cursor["error"]["code"], -32602);
    // A plain run is not a task.
    let (run_id, _) = mcp.start_run("Not a task").await;
    let plain = mcp.request("tasks/get", json!({"taskId": run_id})).await;
    assert_eq!(plain["error"]["code"], -32602, "{plain}");
}

#[tokio::test]
async fn older_sessions_have_no_tasks_and_their_calls_ignore_task() {
    let mcp = Mcp::connect_as(&base(), TOKEN, "2025-06-18").await;
    let get = mcp
        .request(
            "tasks/get",
            json!({"taskId": "run_0123456789abcdefghjkmnpqrs"}),
        )
        .await;
    assert_eq!(get["error"]["code"], -32601, "{get}");
    let call = mcp
        .request(
            "tools/call",
            json!({"name": "opencode_run_task", "arguments": {"task": "Old client"}, "task": {}}),
        )
        .await;
    assert!(
        call["result"]["structuredContent"]["runId"].is_string(),
        "{call}"
    );
}

#[tokio::test]
async fn cancelling_a_task_cancels_its_run_and_the_stream_says_so() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let stream = mcp.open_stream(None).await;
    let task = mcp
        .start_task(json!({"task": "A task to cancel"}), json!({}))
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    let cancelled = mcp
        .request("tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["result"]["taskId"], task_id.as_str());
    let run = mcp.get_run(&task_id).await;
    assert_eq!(run["status"], "cancelled");
    assert_eq!(run["result"]["error"]["code"], "cancelled");

    let events = read_events(stream, Duration::from_secs(20), |events| {
        events
            .iter()
            .any(|e| e.data["params"]["status"] == "cancelled")
    })
    .await;
    let statuses: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["method"] == "notifications/tasks/status")
        .filter(|e| e.data["params"]["taskId"] == task_id.as_str())
        .map(|e| &e.data["params"]["status"])
        .collect();
    assert_eq!(
        statuses.last().copied(),
        Some(&json!("cancelled")),
        "{events:#?}"
    );
    assert!(
        events.iter().all(|e| e.id.is_some()),
        "every event has an id: {events:#?}"
    );
    let result = mcp
        .request("tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["structuredContent"]["status"], "cancelled");
}

#[tokio::test]
async fn tasks_result_waits_for_the_run_with_progress_until_it_ends() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let task = mcp
        .start_task(
            json!({"task": "Think for a long time. [scenario:slow]"}),
            json!({}),
        )
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/result",
        "params": {"taskId": task_id, "_meta": {"progressToken": "wait-1"}}});
    let waiting = mcp.post_streaming(body.to_string()).await;
    assert_eq!(
        waiting.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let canceller = mcp.reconnected();
    let cancel_id = task_id.clone();
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(8)).await;
        canceller
            .request("tasks/cancel", json!({"taskId": cancel_id}))
            .await
    });
    let events = read_events(waiting, Duration::from_secs(60), |events| {
        events.iter().any(|e| e.data["id"] == 7)
    })
    .await;
    let cancelled = cancel.await.unwrap();
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let progress: Vec<_> = events
        .iter()
        .filter(|e| e.data["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "progress while it waits: {events:#?}");
    assert!(progress.iter().all(|e| e.id.is_some()), "{events:#?}");
    assert_eq!(progress[0].data["params"]["progressToken"], "wait-1");
    let ids: std::collections::HashSet<_> = events.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids.len(), events.len(), "ids are unique: {events:#?}");
    let last = &events.last().unwrap().data;
    assert_eq!(last["id"], 7);
    assert_eq!(last["result"]["structuredContent"]["status"], "cancelled");
    assert_eq!(last["result"]["isError"], true);
}

/// A 2026-07-28 request; `extensions` is the client's declared extensions.
async fn modern(method: &str, mut params: Value, extensions: Value) -> RawResponse {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        "io.modelcontextprotocol/clientInfo": {"name": "handoff-tests", "version": "1"}
    });
    let name = params["name"].as_str().map(str::to_string);
    let mut headers = vec![("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": "t-1", "method": method, "params": params});
    send(
        &reqwest::Client::new(),
        &format!("{}/mcp", base()),
        TOKEN,
        None,
        Some("2026-07-28"),
        &body.to_string(),
        &headers,
    )
    .await
}

const EXTENSION: &str = "io.modelcontextprotocol/tasks";

#[tokio::test]
async fn the_tasks_extension_runs_tasks_for_clients_that_declare_it() {
    let declared = json!({ EXTENSION: {} });
    let discovered = modern("server/discover", json!({}), json!({})).await.json();
    assert!(
        discovered["result"]["capabilities"]["extensions"][EXTENSION].is_object(),
        "{discovered}"
    );
    let call = json!({"name": "opencode_run_task", "arguments": {"task": "A modern task"}});
    let created = modern("tools/call", call.clone(), declared.clone()).await;
    assert_eq!(created.status, 200, "{}", created.body);
    let created = created.json()["result"].clone();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttlMs"], 7 * 24 * HOUR_MS);
    assert_eq!(created["pollIntervalMs"], 5000);
    let task_id = created["taskId"].as_str().unwrap().to_string();

    // Without the extension the same call answers as always.
    let plain = modern("tools/call", call, json!({})).await.json();
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert!(plain["result"]["structuredContent"]["runId"].is_string());

    // tasks/get carries the result inline once done; a failed run is a completed request with
    // an isError result.
    let mut done = Value::Null;
    for _ in 0..200 {
        let got = modern("tasks/get", json!({"taskId": task_id}), declared.clone()).await;
        assert_eq!(got.status, 200, "{}", got.body);
        done = got.json()["result"].clone();
        if done["status"] != "working" {
            break;
        }
        assert!(done.get("result").is_none(), "no result while working");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["result"]["isError"], true);
    assert_eq!(done["result"]["structuredContent"]["status"], "failed");

    let update = modern(
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {}}),
        declared.clone(),
    )
    .await;
    assert_eq!(update.error_code(), -32602, "{}", update.body);
    let cancel = modern("tasks/cancel", json!({"taskId": task_id}), declared.clone()).await;
    assert_eq!(
        cancel.error_code(),
        -32602,
        "an ended task: {}",
        cancel.body
    );
    let undeclared = modern("tasks/get", json!({"taskId": task_id}), json!({})).await;
    assert_eq!(undeclared.status, 400);
    assert_eq!(undeclared.error_code(), -32021);
    assert!(
        undeclared.json()["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION]
            .is_object(),
        "{}",
        undeclared.body
    );
    for gone in ["tasks/list", "tasks/result"] {
        let r = modern(gone, json!({"taskId": task_id}), declared.clone()).await;
        assert_eq!(
            r.error_code(),
            -32601,
            "{gone} is not in this era: {}",
            r.body
        );
    }
}

#[tokio::test]
async fn the_typescript_sdk_runs_a_task_end_to_end() {
    let base = base();
    let seen = handoff_tests::mcp::node_script(
        "tests/js/tasks_client.mjs",
        &[("HANDOFF_URL", &base), ("HANDOFF_TOKEN", TOKEN)],
    )
    .await;
    assert_eq!(seen["created"], "working", "{seen}");
    assert!(seen["taskId"].as_str().unwrap().starts_with("run_"));
    assert_eq!(seen["final"], "failed", "{seen}");
    assert_eq!(seen["resultStatus"], "failed", "{seen}");
    assert_eq!(seen["listed"], true, "{seen}");
}
