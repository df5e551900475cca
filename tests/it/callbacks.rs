//! Completion callbacks: a run that names a `callbackUrl` is POSTed there when it ends, signed
//! with the deployment's secret, retried after a failure with the same delivery id, and its
//! attempts show in the run; internal targets are refused before anything starts.

use handoff_tests::callbacks::{Receiver, CALLBACK_SECRET};
use handoff_tests::runs::terminal;
use handoff_tests::stack;
use handoff_tests::workers::name;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Polls `opencode_get_result` until the run's callback reached `state`.
async fn callback_state(mcp: &Mcp, tool: &str, run_id: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let run = mcp.call_ok(tool, json!({"runId": run_id})).await;
        if run["callback"]["state"] == state || tokio::time::Instant::now() > deadline {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn an_ended_run_is_posted_signed_and_retried_after_a_500() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let receiver = Receiver::start(&[500]);
    let target = receiver.url("/coding");
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Look around. [scenario:no-change]", "callbackUrl": target}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let running = mcp
        .call_ok("opencode_get_result", json!({"runId": run_id}))
        .await;
    assert_eq!(running["callback"]["url"], json!(target), "{running:#}");
    let ended = mcp
        .wait_run(&run_id, Duration::from_secs(240), terminal)
        .await;
    assert_eq!(ended["status"], "completed", "{ended:#}");

    // The first attempt got a 500; the second, a second later, the same delivery.
    let got = receiver.wait_for("/coding", 2, DELIVERY_TIMEOUT).await;
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got[0].delivery.starts_with("dlv_"), "{got:#?}");
    assert_eq!(got[0].delivery, got[1].delivery);
    for received in &got {
        assert_eq!(received.event, "run.ended");
        assert!(received.signed_with(CALLBACK_SECRET), "{received:#?}");
        assert!(!received.signed_with("another-secret-0123456789abcdef0123"));
    }
    let body = got[1].json();
    assert_eq!(body["event"], "run.ended");
    assert_eq!(body["deliveryId"], json!(got[0].delivery));
    let run = &body["run"];
    assert_eq!(run["runId"], json!(run_id), "{body:#}");
    assert_eq!(run["status"], "completed");
    assert!(run["result"]["summary"]
        .as_str()
        .unwrap()
        .contains("Nothing needed changing"));
    assert!(run["webUiUrl"].as_str().unwrap().contains("/runs/"));
    // A body whose bytes changed no longer matches its signature.
    let mut forged = got[1].clone();
    forged.body = forged.body.replace("completed", "failed");
    assert!(!forged.signed_with(CALLBACK_SECRET));

    let seen = callback_state(&mcp, "opencode_get_result", &run_id, "delivered").await;
    let callback = &seen["callback"];
    assert_eq!(callback["state"], "delivered", "{seen:#}");
    assert_eq!(callback["deliveryId"], json!(got[0].delivery));
    assert_eq!(callback["attemptCount"], json!(2));
    let statuses: Vec<&Value> = callback["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["status"])
        .collect();
    assert_eq!(statuses, [&json!(500), &json!(200)], "{callback:#}");
    assert!(callback["nextAttemptAt"].is_null());
    // Delivered means done: nothing more arrives.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.received("/coding").len(), 2);
}

#[tokio::test]
async fn a_worker_run_is_posted_with_its_worker_view() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let receiver = Receiver::start(&[]);
    let worker = name("callback");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\nentrypoint: run.sh\n");
    mcp.deploy(&[
        ("worker.yml", &manifest),
        ("run.sh", "echo '{\"ok\": true}' > result.json\n"),
    ])
    .await;
    let target = receiver.url("/worker");
    let run_id = mcp
        .run_worker(&worker, json!({"callbackUrl": target}))
        .await;
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], "completed", "{run:#}");
    let got = receiver.wait_for("/worker", 1, DELIVERY_TIMEOUT).await;
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].signed_with(CALLBACK_SECRET));
    let body = got[0].json();
    assert_eq!(body["run"]["runId"], json!(run_id), "{body:#}");
    assert_eq!(body["run"]["worker"], json!(worker));
    assert_eq!(body["run"]["result"], json!({"ok": true}));
    let seen = callback_state(&mcp, "workers_run_get", &run_id, "delivered").await;
    assert_eq!(seen["callback"]["attemptCount"], json!(1), "{seen:#}");
}

#[tokio::test]
async fn internal_callback_targets_are_refused_and_never_called() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let receiver = Receiver::start(&[]);
    let port = receiver.port;
    // 127.0.0.1 is exempt on the test stack (CALLBACK_ALLOW_PRIVATE_HOSTS); every other way to
    // reach the receiver or another internal address is not.
    for target in [
        format!("http://localhost:{port}/refused"),
        format!("http://127.0.0.2:{port}/refused"),
        format!("http://[::1]:{port}/refused"),
        format!("http://0.0.0.0:{port}/refused"),
        format!("https://localhost:{port}/refused"),
        "https://10.0.0.1/refused".to_string(),
        "https://169.254.169.254/latest/meta-data".to_string(),
        "https://[fd00::1]/refused".to_string(),
        "http://example.com/refused".to_string(),
        "https://user:pw@example.com/refused".to_string(),
        "not a url".to_string(),
    ] {
        let error = mcp
            .call_err(
                "opencode_run_task",
                json!({"task": "Nothing. [scenario:no-change]", "callbackUrl": target}),
            )
            .await;
        assert!(error.contains("callbackUrl"), "{target}: {error}");
    }
    let worker_error = mcp
        .call_err(
            "workers_run",
            json!({"worker": "anything", "callbackUrl": format!("http://localhost:{port}/refused")}),
        )
        .await;
    assert!(worker_error.contains("callbackUrl"), "{worker_error}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(receiver.received("/refused").is_empty());
}
