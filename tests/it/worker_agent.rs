//! Agent-mode workers (a SKILL.md run by OpenCode with only its allowed tools) and worker runs
//! across restarts, against the real stack.

use handoff_tests::stack::{self, RunStack};
use handoff_tests::workers::name;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn an_agent_worker_is_refused_the_tools_it_was_not_allowed() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("agent");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: skill\ntools: [read, write, list]\n\
         limits:\n  max_tool_iterations: 10\n"
    );
    let skill =
        "Summarise the state of things into outputs/summary.md. [scenario:worker-refused]\n";
    mcp.deploy(&[("worker.yml", &manifest), ("SKILL.md", skill)])
        .await;
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    let outputs: Vec<&str> = run["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["summary.md"], "the refused command wrote nothing");
    let calls = run["toolCalls"].as_array().unwrap();
    assert!(calls.len() >= 2, "{calls:#?}");
    // The shell was never offered, so the model's call to it was turned away as an invalid tool.
    assert_eq!(calls[0]["tool"], json!("invalid"), "{calls:#?}");
    assert!(!calls.iter().any(|c| c["tool"] == "bash"), "{calls:#?}");
    assert!(calls
        .iter()
        .any(|c| c["tool"] == "write" && c["status"] == "completed"));
    assert!(run["result"]["answer"]
        .as_str()
        .unwrap()
        .contains("Wrote outputs/summary.md"));
    assert!(run["tokens"]["input"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn an_agent_worker_is_stopped_past_its_token_limit() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("chatty");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: skill\ntools: [read]\nlimits:\n  max_tokens: 1000\n"
    );
    mcp.deploy(&[
        ("worker.yml", &manifest),
        (
            "SKILL.md",
            "Read this file, again and again. [scenario:worker-chatty]\n",
        ),
    ])
    .await;
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("failed"), "{run:#}");
    assert_eq!(run["error"]["code"], json!("limit_exceeded"));
    assert!(run["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limits.max_tokens"));
}

#[tokio::test]
async fn a_worker_run_survives_a_restart_of_the_worker_and_retries_once_when_its_process_is_lost() {
    // A short approval lifetime, for the lapse at the end.
    let mut stack = RunStack::start(&[("WORKER_APPROVAL_TTL_SECONDS", "3")]);
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("slow");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\n");
    mcp.deploy(&[
        ("worker.yml", &manifest),
        ("run.sh", "echo start; sleep 5; echo end\n"),
    ])
    .await;
    let running = |r: &serde_json::Value| {
        r["phase"] == "running"
            || r["status"] != "queued" && r["status"] != "starting" && r["status"] != "running"
    };
    let run_id = mcp.run_worker(&worker, json!({})).await;
    mcp.wait_worker(&run_id, Duration::from_secs(60), running)
        .await;
    stack.worker.restart();
    let mcp = mcp.reconnected();
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["attempts"], json!(1));
    assert_eq!(run["logs"]["stdout"], json!("start\nend\n"));
    // The daemon restarts under a running script: the process is lost, the run starts it once
    // more in a freshly prepared sandbox and completes.
    let second = mcp.run_worker(&worker, json!({})).await;
    mcp.wait_worker(&second, Duration::from_secs(60), running)
        .await;
    stack.daemon_mut().restart();
    let run = mcp.worker_ended(&second).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["attempts"], json!(2), "{run:#}");
    // Nobody decides: the approval lapses, the run is cancelled, nothing is done.
    let gated = name("lapse");
    let manifest = format!(
        "schema_version: 1\nname: {gated}\nruntime: sh\napprovals: {{required: true, label: Do it}}\n"
    );
    mcp.deploy(&[
        ("worker.yml", &manifest),
        (
            "run.sh",
            "echo \"$HANDOFF_PHASE\"; echo 'I would do it' > proposal.md\n",
        ),
    ])
    .await;
    let third = mcp.run_worker(&gated, json!({})).await;
    let run = mcp.worker_ended(&third).await;
    assert_eq!(run["status"], json!("cancelled"), "{run:#}");
    assert_eq!(run["error"]["code"], json!("approval_expired"));
    assert_eq!(run["approval"]["decision"], json!("expired"));
    assert_eq!(run["approval"]["proposal"], json!("I would do it\n"));
    let late = mcp
        .call_err("workers_approve", json!({"runId": third}))
        .await;
    assert!(late.contains("already decided"), "{late}");
}
