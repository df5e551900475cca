//! Faults in the middle of a run. A run whose agent stops mid-run is resumed when its sandbox
//! kept its files: OpenCode killed with `kill -9`, or the sandbox daemon stopped and started
//! again, in the middle of the agent's command. A new OpenCode carries on in the same
//! conversation (the model hears the resume), the run's timeline shows `resuming_agent`, and
//! the run ends with its work pushed and its pull request open. A Worker (workerd) killed and
//! started again mid-run picks the run up where it was, with the same agent. A provider that
//! answers 529 past OpenCode's own retries gets the turn handed back after a wait, and the run
//! completes once the provider is back. A model that starts answering and then sends nothing
//! is stopped after `RUN_MODEL_STALL_SECONDS` and handed its turn back the same way; one that
//! never comes back ends the run failed, saying so. A cut in the network between the Worker and
//! the daemon is waited out (the run says it waits) and the run completes once it heals; one
//! that hid whether the agent got its task does not have it sent twice, nor one that hid the
//! agent's start a second agent started; one that outlasts
//! `RUN_DAEMON_OUTAGE_SECONDS` while the work is committed fails keeping the agent's turn. A run
//! whose agent fills the sandbox's disk fails saying the disk is full, and its work is delivered
//! by the session's next run once space is freed.

use handoff_tests::daemon::Daemon;
use handoff_tests::relay::Relay;
use handoff_tests::runs::{
    agent_pids, daemon_processes, is_agent, phases, repo_name, status, terminal,
};
use handoff_tests::stack::{self, RunStack};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// Waits until the run's progress says `words`; the run must still be going then.
async fn until_it_says(mcp: &Mcp, run_id: &str, words: &str) {
    let seen = mcp
        .wait_run(run_id, RUN_TIMEOUT, |r| {
            r["progress"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(words))
                || terminal(r)
        })
        .await;
    assert_eq!(status(&seen), "running", "{seen:#}");
}

/// Waits for the run's end: completed, with the fix to add.sh in its pull request.
async fn until_fixed(mcp: &Mcp, run_id: &str) -> Value {
    let run = mcp.wait_run(run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    assert_eq!(run["result"]["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(run["result"]["pullRequestUrl"].is_string(), "{run:#}");
    run
}

/// Starts the fix-add.sh task on a new broken repository with the model's `scenario`;
/// returns (runId, sessionId, repository).
async fn start_fix(mcp: &Mcp, stack: &RunStack, scenario: &str) -> (String, String, String) {
    let repository = stack.broken_repo(&repo_name(scenario));
    let task = format!("The test in test.sh fails. Fix it. [scenario:{scenario}]");
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": task, "repository": &repository}),
        )
        .await;
    let id = |key: &str| out[key].as_str().unwrap().to_string();
    (id("runId"), id("sessionId"), repository)
}

/// Starts the stopped-midway task and waits until the agent runs its (slow) command.
async fn start_and_reach_the_command(mcp: &Mcp, stack: &RunStack) -> (String, String) {
    let (run_id, session, _) = start_fix(mcp, stack, "stopped-midway").await;
    let busy = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["currentTool"] == "bash" || terminal(r)
        })
        .await;
    assert_eq!(status(&busy), "running", "{busy:#}");
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    // The agent reports its tool as running a moment before the shell starts it; the fix is
    // on disk once the command's `sleep` runs (a fault before that would lose the fix too).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = mcp
            .call_ok(
                "sandbox_exec",
                json!({"sandboxId": &sandbox, "command": "ps -eo args= | grep -cx 'sleep 15' || true"}),
            )
            .await;
        if out["stdout"].as_str().unwrap_or_default().trim() != "0" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the agent's command never started: {out:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (run_id, sandbox)
}

/// The run ended with the fix pushed and its pull request open, after one resume that the
/// model heard.
async fn assert_resumed_and_done(mcp: &Mcp, stack: &RunStack, run_id: &str) -> Value {
    let run = until_fixed(mcp, run_id).await;
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
    let run = until_fixed(&mcp, &run_id).await;
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
    let (run_id, ..) = start_fix(&mcp, stack, "overloaded").await;
    until_it_says(&mcp, &run_id, "model provider").await;
    until_fixed(&mcp, &run_id).await;
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

/// The failed run's error code and message.
fn error_of(run: &Value) -> (&str, &str) {
    let error = &run["result"]["error"];
    (
        error["code"].as_str().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_model_that_hangs_is_stopped_and_handed_back_its_turn_a_few_times() {
    // A model silent for 5 s counts as hung here (the default is 180 s).
    let stack = RunStack::start(&[("RUN_MODEL_STALL_SECONDS", "5")]);
    let mcp = Mcp::connect(&stack.url()).await;
    // Two answers hang mid-stream, then the provider is back: the run completes.
    let (twice, ..) = start_fix(&mcp, &stack, "hangs-twice").await;
    // Every answer hangs: the run stops after the last hand-back, saying why.
    let (always, ..) = start_fix(&mcp, &stack, "hangs").await;
    until_it_says(&mcp, &twice, "sent nothing for").await;
    until_fixed(&mcp, &twice).await;
    let heard = |run_id: &str, marker: &str| {
        stack
            .llm
            .all_requests()
            .into_iter()
            .filter(|r| r.run.as_deref() == Some(run_id))
            .any(|r| r.last_user.contains(marker))
    };
    assert!(heard(&twice, "[handoff-retry:2:"), "handed back twice");

    let run = mcp.wait_run(&always, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let (code, message) = error_of(&run);
    assert_eq!(code, "agent_failed", "{run:#}");
    assert!(
        message.contains("sent nothing for") && message.contains("handed back 4 times"),
        "{message}"
    );
    assert!(heard(&always, "[handoff-retry:4:"), "handed back 4 times");
}

#[tokio::test]
async fn runs_outlast_cuts_in_the_network_between_worker_and_daemon() {
    // The Worker reaches the daemon through a line the test can cut.
    let daemon = Daemon::start();
    let line = Relay::start(daemon.port);
    let stack = RunStack::with_daemon(daemon, &[("SANDBOX_DAEMON_URL", &line.url())]);
    let mcp = Mcp::connect(&stack.url()).await;
    a_run_outlasts_the_line_going_down(&stack, &mcp, &line).await;
    a_task_whose_handing_over_went_unanswered_is_handed_over_once(&stack, &mcp, &line).await;
    a_run_cut_off_while_its_work_is_committed_pushes_it_once_back(&stack, &mcp, &line).await;
}

async fn a_run_outlasts_the_line_going_down(stack: &RunStack, mcp: &Mcp, line: &Relay) {
    let (run_id, _) = start_and_reach_the_command(mcp, stack).await;
    line.cut();
    // Nothing crosses: the run waits for the sandbox, saying so, and does not fail.
    until_it_says(mcp, &run_id, "not answering").await;
    line.heal();
    // The agent worked on meanwhile; its run ends as if nothing happened.
    let run = until_fixed(mcp, &run_id).await;
    assert!(
        !phases(&run).contains(&"resuming_agent"),
        "the agent never stopped: {:?}",
        phases(&run)
    );
}

/// The line goes down as the agent takes the task, so the Worker never hears that it did; when
/// it heals the agent is 30 steps into the task, further back than a glance at its latest
/// messages sees. The Worker hands the task over again only if the agent does not have it: the
/// model hears it once and the run is the one turn of 111 steps.
async fn a_task_whose_handing_over_went_unanswered_is_handed_over_once(
    stack: &RunStack,
    mcp: &Mcp,
    line: &Relay,
) {
    let repository = stack.broken_repo(&repo_name("long-turn"));
    let task = "The test in test.sh fails. Fix it, then keep checking. [scenario:long-turn]";
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": task, "repository": &repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    line.cut_at_reply_to(&format!("[handoff:{run_id}]"));
    let of_run = || {
        stack
            .llm
            .all_requests()
            .into_iter()
            .filter(|r| r.run.as_deref() == Some(run_id.as_str()))
            .collect::<Vec<_>>()
    };
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while of_run().iter().all(|r| r.step < 30) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never got 30 steps in"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        line.is_cut(),
        "the line went down as the task was handed over"
    );
    line.heal();
    let run = until_fixed(mcp, &run_id).await;
    assert_eq!(run["progress"]["steps"], 111, "{:#}", run["progress"]);
    let heard = of_run().iter().map(|r| r.prompts).max();
    assert_eq!(heard, Some(1), "how many times the model heard the task");
}

/// Starts a run whose `git add` takes seconds a file (the scenario's clean filter) and takes
/// the line down as its work is committed; returns (runId, repository).
async fn cut_off_while_pushing(stack: &RunStack, mcp: &Mcp, line: &Relay) -> (String, String) {
    let (run_id, _, repository) = start_fix(mcp, stack, "slow-push").await;
    let pushing = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["phase"] == "pushing" || terminal(r)
        })
        .await;
    assert_eq!(status(&pushing), "running", "{pushing:#}");
    line.refuse();
    (run_id, repository)
}

/// The daemon goes out of reach while the run's work is committed (the scenario's clean filter
/// makes `git add` take seconds a file): the run waits for it, as for an outage at any other
/// time, instead of failing with the work unpushed, and pushes it and opens its pull request
/// once the sandbox is back.
async fn a_run_cut_off_while_its_work_is_committed_pushes_it_once_back(
    stack: &RunStack,
    mcp: &Mcp,
    line: &Relay,
) {
    let (run_id, repository) = cut_off_while_pushing(stack, mcp, line).await;
    until_it_says(mcp, &run_id, "not answering").await;
    // At once: the daemon stopped the git command cut off (SIGTERM: its lock on the index went
    // with it), so the commit tried again does not meet it.
    line.heal();
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let branch = format!("handoff/{run_id}");
    assert_eq!(run["result"]["branch"], json!(branch), "{run:#}");
    assert!(run["result"]["pullRequestUrl"].is_string(), "{run:#}");
    let name = repository
        .trim_end_matches(".git")
        .rsplit('/')
        .next()
        .unwrap();
    let fixed = stack.forge.file_on_branch("acme", name, &branch, "add.sh");
    assert_eq!(
        fixed.as_deref(),
        Some("#!/bin/sh\necho $(( $1 + $2 ))\n"),
        "{run:#}"
    );
}

#[tokio::test]
async fn runs_outlast_lost_answers_and_fail_keeping_their_turn_when_the_sandbox_stays_away() {
    // The daemon, behind a line the test takes down, is waited for 10 s here; every run starts
    // its own agent (no spare sessions).
    let daemon = Daemon::start();
    let line = Relay::start(daemon.port);
    let stack = RunStack::with_daemon(
        daemon,
        &[
            ("SANDBOX_DAEMON_URL", &line.url()),
            ("RUN_DAEMON_OUTAGE_SECONDS", "10"),
            ("RUN_SPARE_SESSIONS", "0"),
        ],
    );
    let mcp = Mcp::connect(&stack.url()).await;
    an_agent_start_whose_answer_was_lost_starts_one_agent(&stack, &mcp, &line).await;
    a_run_whose_sandbox_stays_away_while_its_work_is_committed_fails_keeping_its_turn(
        &stack, &mcp, &line,
    )
    .await;
}

/// The line goes down as the daemon answers the start of the run's agent, so the session never
/// hears that it started: the start sent again (with the same key) gets that agent, and the
/// sandbox has started one.
async fn an_agent_start_whose_answer_was_lost_starts_one_agent(
    stack: &RunStack,
    mcp: &Mcp,
    line: &Relay,
) {
    line.cut_at_reply_to(r#""opencode","serve""#);
    let (run_id, session, _) = start_fix(mcp, stack, "fix-add").await;
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    while !line.is_cut() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent was never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    line.heal();
    until_fixed(mcp, &run_id).await;
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let processes = daemon_processes(stack, &sandbox).await;
    let agents: Vec<&Value> = processes.iter().filter(|p| is_agent(p)).collect();
    assert_eq!(agents.len(), 1, "agents started: {agents:#?}");
}

/// The daemon goes out of reach while the run's work is committed and stays away: the run
/// fails `sandbox_lost` once `RUN_DAEMON_OUTAGE_SECONDS` have passed, keeping its agent's turn.
async fn a_run_whose_sandbox_stays_away_while_its_work_is_committed_fails_keeping_its_turn(
    stack: &RunStack,
    mcp: &Mcp,
    line: &Relay,
) {
    let (run_id, _) = cut_off_while_pushing(stack, mcp, line).await;
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let (code, message) = error_of(&run);
    assert_eq!(code, "sandbox_lost", "{run:#}");
    assert!(
        message.contains("sandbox daemon did not answer"),
        "{message}"
    );
    // What the agent's turn left is kept with the failure: its last words, usage and
    // conversation (read before the work was committed; the sandbox never came back).
    let result = &run["result"];
    assert_eq!(result["summary"], "Fixed add.sh (slowly).", "{run:#}");
    assert!(result["tokens"]["input"].as_u64() > Some(0), "{run:#}");
    let transcript = result["transcriptUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("no transcript: {run:#}"));
    let read = handoff_tests::mcp::read(reqwest::get(transcript).await.unwrap()).await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert!(read.body.contains("Fixed add.sh"), "{}", read.body);
}

#[tokio::test]
async fn a_run_that_fills_its_disk_fails_saying_so_and_its_work_stays() {
    // Sandboxes with a 200 MB disk, which the agent's command fills.
    let daemon = Daemon::start_with(&["--isolation", "namespaces", "--disk-mb", "200"]);
    let stack = RunStack::with_daemon(daemon, &[]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, session, repository) = start_fix(&mcp, &stack, "fills-disk").await;
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let (code, message) = error_of(&run);
    assert_eq!(code, "push_failed", "{run:#}");
    assert!(
        message.starts_with("the sandbox's disk is full"),
        "{message}"
    );
    // What the agent's turn left is kept with the failure: its usage and conversation (its
    // last words may be lost to the full disk, where OpenCode keeps its messages).
    let result = &run["result"];
    assert!(result["tokens"]["output"].as_u64() > Some(0), "{run:#}");
    assert!(result["transcriptUrl"].is_string(), "{run:#}");
    // Nothing is lost: the fix is in the session's workspace, and once space is freed the
    // session's next run delivers it.
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let dir = repository.rsplit('/').next().unwrap();
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": sandbox, "command": format!("rm /home/sandbox/{dir}/fill.bin")}),
    )
    .await;
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Check the change and finish. [scenario:no-change]", "sessionId": session, "repository": &repository}),
        )
        .await;
    let next = out["runId"].as_str().unwrap().to_string();
    until_fixed(&mcp, &next).await;
}
