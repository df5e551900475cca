//! Faults in the middle of a run. A run whose agent stops mid-run is resumed when its sandbox
//! kept its files: OpenCode killed with `kill -9`, or the sandbox daemon stopped and started
//! again, in the middle of the agent's command. A new OpenCode carries on in the same
//! conversation (the model hears the resume), the run's timeline shows `resuming_agent`, and
//! the run ends with its work pushed and its pull request open. A Worker (workerd) killed and
//! started again mid-run picks the run up where it was, with the same agent. A provider that
//! answers 529 past OpenCode's own retries gets the turn handed back after a wait, and the run
//! completes once the provider is back.

use handoff_tests::runs::{agent_pids, phases, repo_name, status, terminal};
use handoff_tests::stack::{self, RunStack};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// Starts the stopped-midway task and waits until the agent runs its (slow) command.
async fn start_and_reach_the_command(mcp: &Mcp, stack: &RunStack) -> (String, String) {
    let repository = stack.broken_repo(&repo_name("resume"));
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "The test in test.sh fails. Fix it. [scenario:stopped-midway]", "repository": repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let session = out["sessionId"].as_str().unwrap().to_string();
    let busy = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["currentTool"] == "bash" || terminal(r)
        })
        .await;
    assert_eq!(status(&busy), "running", "{busy:#}");
    (
        run_id,
        format!("sbx_{}", session.trim_start_matches("ses_")),
    )
}

/// The run ended with the fix pushed and its pull request open, after one resume that the
/// model heard.
async fn assert_resumed_and_done(mcp: &Mcp, stack: &RunStack, run_id: &str) -> Value {
    let run = mcp.wait_run(run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let result = &run["result"];
    assert_eq!(result["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(result["pullRequestUrl"].is_string(), "{run:#}");
    let timeline = phases(&run);
    let resumed = timeline
        .iter()
        .position(|p| *p == "resuming_agent")
        .unwrap_or_else(|| panic!("no resume in the timeline: {timeline:?}"));
    assert_eq!(timeline.get(resumed + 1), Some(&"working"), "{timeline:?}");
    let heard = stack
        .llm
        .all_requests()
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id))
        .any(|r| r.last_user.contains("[handoff-resume:1:"));
    assert!(heard, "the model never heard the resume");
    run
}

#[tokio::test]
async fn a_run_whose_agent_is_killed_carries_on_in_a_new_one() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, sandbox) = start_and_reach_the_command(&mcp, stack).await;
    let before = agent_pids(&mcp, &sandbox).await;
    assert_eq!(before.len(), 1, "{before:?}");
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": sandbox, "command": format!("kill -9 {}", before[0])}),
    )
    .await;
    assert_resumed_and_done(&mcp, stack, &run_id).await;
    let after = agent_pids(&mcp, &sandbox).await;
    assert!(
        after.len() <= 1 && after != before,
        "{before:?} → {after:?}"
    );
}

#[tokio::test]
async fn a_run_survives_a_restart_of_the_sandbox_daemon() {
    let mut stack = RunStack::start(&[]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, _) = start_and_reach_the_command(&mcp, &stack).await;
    // The daemon goes down with everything it started, and comes back on the same folders.
    stack.daemon_mut().restart();
    assert_resumed_and_done(&mcp, &stack, &run_id).await;
}

#[tokio::test]
async fn a_run_survives_a_restart_of_workerd() {
    let mut stack = RunStack::start(&[]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, sandbox) = start_and_reach_the_command(&mcp, &stack).await;
    let before = agent_pids(&mcp, &sandbox).await;
    // The Worker goes down mid-run (its process group stopped) and comes back on the same
    // state; the agent in the sandbox kept working meanwhile.
    stack.worker.restart();
    let mcp = mcp.reconnected();
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_eq!(run["result"]["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(run["result"]["pullRequestUrl"].is_string(), "{run:#}");
    assert!(
        !phases(&run).contains(&"resuming_agent"),
        "the agent never stopped: {:?}",
        phases(&run)
    );
    assert_eq!(agent_pids(&mcp, &sandbox).await, before, "the same agent");
}

#[tokio::test]
async fn a_run_outlasts_a_provider_that_is_overloaded_for_a_while() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let repository = stack.broken_repo(&repo_name("overloaded"));
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "The test in test.sh fails. Fix it. [scenario:overloaded]", "repository": repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let waiting = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("model provider"))
                || terminal(r)
        })
        .await;
    assert_eq!(
        status(&waiting),
        "running",
        "the wait is shown: {waiting:#}"
    );
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_eq!(run["result"]["changedFiles"], json!(["add.sh"]), "{run:#}");
    let requests: Vec<_> = stack
        .llm
        .all_requests()
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
        .collect();
    assert!(
        requests.len() > handoff_tests::llm::OVERLOADED_REQUESTS,
        "{}",
        requests.len()
    );
    assert!(
        requests
            .iter()
            .any(|r| r.last_user.contains("[handoff-retry:2:")),
        "the turn was handed back twice"
    );
}
