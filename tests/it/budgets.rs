//! Budgets: the credential proxy counts the tokens of every model answer and refuses calls once
//! a run reaches its budget; the run then ends failed with `budget_exceeded`, what it used,
//! and its work so far on its branch (no pull request).

use handoff_tests::runs::{repo_name, terminal};
use handoff_tests::stack;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_run_over_its_token_budget_stops_with_its_work_pushed() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("budget");
    let repository = stack.broken_repo(&name);
    // Budgets are checked when the run starts.
    for (field, value) in [
        ("maxTokens", json!(0)),
        ("maxCostUsd", json!(-1)),
        ("maxDurationSeconds", json!(0)),
        ("maxDurationSeconds", json!(10_000_000)),
    ] {
        let error = mcp
            .call_err(
                "opencode_run_task",
                json!({"task": "x [scenario:no-change]", field: value}),
            )
            .await;
        assert!(error.contains(field), "{field}: {error}");
    }
    // Each scripted answer counts 150 tokens: the fourth call would go over 400.
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Fix it, then test it again and again. [scenario:over-budget]",
                   "repository": repository, "maxTokens": 400}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(240), terminal)
        .await;
    assert_eq!(run["status"], "failed", "{run:#}");
    let error = &run["result"]["error"];
    assert_eq!(error["code"], "budget_exceeded", "{run:#}");
    assert!(
        error["message"].as_str().unwrap().contains("maxTokens"),
        "{error}"
    );
    let budget = &run["budget"];
    assert_eq!(budget["limits"]["maxTokens"], json!(400), "{run:#}");
    let spent = budget["spent"]["tokens"].as_u64().unwrap();
    assert!((400..=1000).contains(&spent), "{budget:#}");
    assert!(
        budget["spent"]["modelCalls"].as_u64().unwrap() >= 3,
        "{budget:#}"
    );
    assert!(budget["exceeded"].as_str().is_some(), "{budget:#}");

    // The fix the agent made before it was stopped is on the run's branch; no pull request.
    let branch = format!("handoff/{run_id}");
    assert_eq!(run["result"]["branch"], json!(branch), "{run:#}");
    let fixed = stack
        .forge
        .file_on_branch("acme", &name, &branch, "add.sh")
        .unwrap();
    assert!(fixed.contains("$1 + $2"), "{fixed}");
    assert!(run["result"]["pullRequestUrl"].is_null());
    assert!(!stack.forge.pulls().iter().any(|p| p.repo == name));

    // The agent never got far: the model saw a handful of calls, not the script's thirty.
    let calls = stack
        .llm
        .requests("over-budget")
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
        .count();
    assert!((3..=6).contains(&calls), "{calls} model calls");
}

#[tokio::test]
async fn the_proxy_counts_openai_compatible_answers_too() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Look around. [scenario:no-change]", "model": "openai/gpt-scripted",
                   "maxTokens": 1_000_000, "maxCostUsd": 50}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(240), terminal)
        .await;
    assert_eq!(run["status"], "completed", "{run:#}");
    let budget = &run["budget"];
    assert_eq!(budget["limits"]["maxCostUsd"], json!(50.0), "{budget:#}");
    let calls = budget["spent"]["modelCalls"].as_u64().unwrap();
    // Each scripted answer reports 150 tokens in its final usage chunk.
    assert!(calls >= 1, "{budget:#}");
    assert!(
        budget["spent"]["tokens"].as_u64().unwrap() >= 150 * calls,
        "{budget:#}"
    );
    assert!(budget["exceeded"].is_null(), "{budget:#}");
    assert!(budget["spent"]["seconds"].is_u64(), "{budget:#}");
}

#[tokio::test]
async fn a_worker_run_over_its_time_budget_is_stopped() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = handoff_tests::workers::name("budget");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\nentrypoint: run.sh\n");
    mcp.deploy(&[("worker.yml", &manifest), ("run.sh", "sleep 60\n")])
        .await;
    let started = std::time::Instant::now();
    let run_id = mcp
        .run_worker(&worker, json!({"maxDurationSeconds": 2}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["error"]["code"], "budget_exceeded", "{run:#}");
    assert!(
        run["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maxDurationSeconds"),
        "{run:#}"
    );
    assert_eq!(run["budget"]["limits"]["maxDurationSeconds"], json!(2));
    assert!(started.elapsed() < Duration::from_secs(45), "{run:#}");
}
