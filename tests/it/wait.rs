//! `opencode_wait`: one call follows a run until it moves on (or ends), or times out unchanged,
//! reporting progress while it waits; bad input is refused with what to do.

use crate::base;
use crate::sandboxes::call_streamed;
use handoff_tests::runs::terminal;
use handoff_tests::{stack, Mcp};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_wait_on_an_ended_run_answers_at_once() {
    let mcp = Mcp::connect(&base()).await;
    // Without a sandbox backend the run fails within moments.
    let (run_id, _) = mcp.start_run("Wait for me").await;
    mcp.wait_run(&run_id, Duration::from_secs(20), terminal)
        .await;
    let waited = mcp
        .call_ok(
            "opencode_wait",
            json!({"runId": run_id, "untilDone": true, "timeoutSeconds": 20}),
        )
        .await;
    assert_eq!(waited["changed"], false, "{waited:#}");
    assert!(
        waited["waitedMs"].as_u64().unwrap() < 2_000,
        "an ended run answers at once: {waited:#}"
    );
    assert_eq!(waited["run"]["status"], "failed");
    assert_eq!(
        waited["run"]["result"]["error"]["code"],
        "sandbox_unavailable"
    );
}

#[tokio::test]
async fn bad_waits_are_refused_with_what_to_do() {
    let mcp = Mcp::connect(&base()).await;
    let (run_id, _) = mcp.start_run("Refuse my waits").await;
    for (arguments, says) in [
        (
            json!({"runId": run_id, "timeoutSeconds": 51}),
            "timeoutSeconds",
        ),
        (
            json!({"runId": run_id, "timeoutSeconds": 0}),
            "timeoutSeconds",
        ),
        (
            json!({"runId": "run_0123456789abcdefghjkmnpqrs"}),
            "not found",
        ),
        (json!({"runId": "run_notarun"}), "runId"),
        (json!({"runId": "../etc/passwd"}), "runId"),
        (json!({"runId": run_id, "until": true}), "unknown field"),
    ] {
        let response = mcp.call("opencode_wait", arguments.clone()).await;
        let text = response.to_string();
        assert!(text.contains(says), "{arguments} should say {says}: {text}");
        assert!(
            response.get("error").is_some() || response["result"]["isError"] == true,
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_wait_on_a_quiet_run_times_out_unchanged_and_reports_progress_meanwhile() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    // The scripted model takes two minutes to answer: the run sits in `working`, thinking.
    let (run_id, _) = mcp.start_run("Take your time. [scenario:slow]").await;
    // Once the agent is thinking the progress line stays the same until the model answers.
    let working = mcp
        .wait_run(&run_id, Duration::from_secs(240), |r| {
            r["progress"]["message"] == "thinking" || terminal(r)
        })
        .await;
    assert_eq!(working["status"], "running", "{working:#}");

    let body = json!({
        "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {
            "name": "opencode_wait",
            "arguments": {"runId": run_id, "timeoutSeconds": 8},
            "_meta": {"progressToken": "w-1"}
        }
    })
    .to_string();
    let streamed = call_streamed(&mcp, body).await;
    let (last, notes) = streamed.messages.split_last().expect("events");
    assert!(!notes.is_empty(), "{:?}", streamed.messages);
    for note in notes {
        assert_eq!(note["params"]["progressToken"], "w-1");
        let message = note["params"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("waited") && message.contains("working"),
            "{note}"
        );
    }
    let out = &last["result"]["structuredContent"];
    assert_eq!(out["changed"], false, "{last}");
    assert_eq!(out["run"]["status"], "running", "{last}");
    let waited = out["waitedMs"].as_u64().unwrap();
    assert!(
        (6_000..12_000).contains(&waited),
        "waited {waited} ms: {last}"
    );

    // A wait ends as soon as the run does, woken by the write rather than at its next look:
    // cancel it 5.5 s into a 40 s wait, just after the wait asked the ledger again (it does at
    // the latest every 5 s), and it answers right after the cancel, not seconds later.
    let asked = Instant::now();
    let wait = mcp.call_ok(
        "opencode_wait",
        json!({"runId": run_id, "untilDone": true, "timeoutSeconds": 40}),
    );
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        let cancelled = mcp
            .call_ok("opencode_cancel_run", json!({"runId": run_id}))
            .await;
        (cancelled, asked.elapsed())
    };
    let (ended, (cancelled, cancelled_after)) = tokio::join!(wait, cancel);
    assert_eq!(cancelled["cancelled"], true, "{cancelled:#}");
    assert_eq!(ended["changed"], true, "{ended:#}");
    assert_eq!(ended["run"]["status"], "cancelled", "{ended:#}");
    let waited = ended["waitedMs"].as_u64().unwrap();
    let cancelled_after = cancelled_after.as_millis() as u64;
    assert!(
        (5_000..cancelled_after + 2_000).contains(&waited),
        "waited {waited} ms, cancelled after {cancelled_after} ms: {ended:#}"
    );
}
