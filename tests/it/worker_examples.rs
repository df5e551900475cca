//! The example workers of `examples/workers/` (what `cargo xtask dev --demo` deploys) deploy and
//! run with the scripted model: the digest writes its file, the triage agent stops for approval
//! and posts its comment once approved.

use handoff_tests::stack;
use handoff_tests::workers::examples;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn the_example_workers_deploy_and_run() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let folders = examples();
    let names: Vec<&str> = folders.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["daily-digest", "triage-issue"]);
    for (_, files) in &folders {
        mcp.call_ok("workers_deploy", json!({"files": files})).await;
    }
    let digest = mcp
        .call_ok("workers_get", json!({"worker": "daily-digest"}))
        .await;
    assert_eq!(digest["schedule"]["cron"], json!("0 8 * * 1-5"));
    assert_eq!(digest["nextFires"].as_array().unwrap().len(), 3);

    let run_id = mcp
        .run_worker(
            "daily-digest",
            json!({"inputs": {"topic": "workers", "days": 2}}),
        )
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["result"], json!({"topic": "workers", "items": 2}));
    assert_eq!(run["outputs"][0]["path"], json!("digest.md"));

    let run_id = mcp.run_worker("triage-issue", json!({})).await;
    let run = mcp
        .wait_worker(&run_id, Duration::from_secs(120), |r| {
            r["status"] == "pending_approval" || r["status"] == "failed"
        })
        .await;
    assert_eq!(run["status"], json!("pending_approval"), "{run:#}");
    assert!(run["approval"]["proposal"]
        .as_str()
        .unwrap()
        .contains("Label: bug"));
    assert!(run["outputs"].as_array().unwrap().is_empty());
    mcp.call_ok("workers_approve", json!({"runId": run_id}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["outputs"][0]["path"], json!("comment.md"));
    let calls = run["toolCalls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(run["result"]["answer"]
        .as_str()
        .unwrap()
        .contains("Posted the triage comment"));
}

#[tokio::test]
async fn the_typescript_sdk_drives_the_workers_tools_and_accepts_every_output() {
    let stack = stack::shared();
    let worker = handoff_tests::workers::name("sdk");
    let seen = handoff_tests::mcp::node_script(
        "tests/js/workers_client.mjs",
        &[
            ("HANDOFF_URL", &stack.url()),
            ("HANDOFF_TOKEN", handoff_tests::TOKEN),
            ("WORKER", &worker),
        ],
    )
    .await;
    // The rollback to the only version is refused (it is current); nothing else may fail.
    let errors: Vec<&str> = seen["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .filter(|e| !e.starts_with("workers_rollback:"))
        .collect();
    assert!(errors.is_empty(), "{seen}");
    assert_eq!(seen["version"], 1, "{seen}");
    assert_eq!(seen["status"], "completed", "{seen}");
    assert_eq!(seen["outputs"], 1, "{seen}");
    assert_eq!(seen["result"], json!({"ok": true}), "{seen}");
    assert_eq!(seen["replayed"], true, "{seen}");
}
