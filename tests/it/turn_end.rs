//! The end of an agent's turn is noticed when it happens, not at the session's next look: with
//! a poll interval far longer than the runs, a new session's run and a kept agent's follow-up
//! both end within seconds of the model's last answer (the session watches OpenCode's events
//! for `session.idle` while the agent is busy), and so does a turn that lasts longer than one
//! watch (the session watches again, asking in between whether the turn is still going).

use handoff_tests::runs::{repo_name, status, terminal};
use handoff_tests::stack::RunStack;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Far longer than either run takes: a run noticed only at its first look ends this long after
/// it was prompted.
const POLL_MS: u64 = 40_000;
/// How soon after the model's last answer a run must have ended.
const NOTICED_WITHIN: Duration = Duration::from_secs(12);

#[tokio::test]
async fn a_finished_turn_is_noticed_at_once_not_at_the_next_look() {
    let poll = POLL_MS.to_string();
    let stack = RunStack::start(&[("RUN_POLL_INTERVAL_MS", poll.as_str())]);
    let mcp = Mcp::connect(&stack.url()).await;
    let repository = stack.broken_repo(&repo_name("turn-end"));

    let first = run_to_its_end(
        &stack,
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
        "a new session's run",
    )
    .await;
    // The session's kept agent takes a follow-up, whose short turn is noticed the same way.
    run_to_its_end(
        &stack,
        &mcp,
        json!({"task": "Add follow-up notes. [scenario:followup]", "repository": repository,
            "sessionId": first["sessionId"]}),
        "a follow-up",
    )
    .await;
    // A turn longer than one watch (10 s): the model takes 15 s over its first answer.
    run_to_its_end(
        &stack,
        &mcp,
        json!({"task": "Run the test. [scenario:page-live]", "repository": repository,
            "sessionId": first["sessionId"]}),
        "a turn longer than one watch",
    )
    .await;
}

/// Starts a run, follows it to its end and checks that it completed soon after the model's
/// last answer; the run.
async fn run_to_its_end(stack: &RunStack, mcp: &Mcp, arguments: Value, what: &str) -> Value {
    let started = mcp.call_ok("opencode_run_task", arguments).await;
    let (run, ended) = follow(mcp, &started).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let gap = ended.saturating_duration_since(last_model_call(stack, &started));
    assert!(
        gap < NOTICED_WITHIN,
        "{what} ended {gap:?} after the model's last answer: {run:#}"
    );
    run
}

/// Polls the started run to its end; the run and when its end was seen.
async fn follow(mcp: &Mcp, started: &Value) -> (Value, Instant) {
    let run_id = started["runId"].as_str().expect("runId");
    let run = mcp
        .wait_run(run_id, Duration::from_millis(POLL_MS * 3), terminal)
        .await;
    (run, Instant::now())
}

/// When the scripted model last heard from the run.
fn last_model_call(stack: &RunStack, started: &Value) -> Instant {
    let run_id = started["runId"].as_str().expect("runId");
    stack
        .llm
        .all_requests()
        .iter()
        .filter(|r| r.run.as_deref() == Some(run_id))
        .map(|r| r.at)
        .max()
        .unwrap_or_else(|| panic!("the model never heard from {run_id}"))
}
