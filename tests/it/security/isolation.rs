//! No silent downgrade: on a host where sandboxes cannot be isolated, the daemon runs none —
//! `sandbox_create` and delegated runs fail with an error that names what is missing, instead
//! of handing the agent a plain host process.

use handoff_tests::daemon::Daemon;
use handoff_tests::stack::RunStack;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn without_isolation_nothing_runs_and_the_error_names_what_is_missing() {
    // A host without bubblewrap (the daemon is pointed at a path where there is none).
    let daemon = Daemon::start_with(&["--bwrap", "/nonexistent/bwrap"]);
    let health: serde_json::Value = reqwest::get(format!("{}/v1/health", daemon.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["isolation"]["level"], "unavailable", "{health}");
    let stack = RunStack::with_daemon(daemon, &[]);
    let mcp = Mcp::connect(&stack.url()).await;

    let refused = mcp.call_err("sandbox_create", json!({})).await;
    assert!(
        refused.contains("bubblewrap") && refused.contains("isolated"),
        "{refused}"
    );

    let started = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Say hello. [scenario:fix-add]"}),
        )
        .await;
    let run_id = started["runId"].as_str().unwrap();
    let run = mcp
        .wait_run(run_id, Duration::from_secs(120), |r| {
            matches!(
                r["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            )
        })
        .await;
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(
        run["result"]["error"]["code"], "sandbox_unavailable",
        "{run:#}"
    );
    let message = run["result"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("bubblewrap"), "{message}");
    assert!(
        stack.llm.all_requests().is_empty(),
        "the model was asked although no sandbox could run"
    );
}
