//! A run stopped in the middle of its agent's turn — cancelled, or out of time
//! (`RUN_MAX_DURATION_SECONDS`) — keeps what the agent did until then: its latest words, the
//! tokens it used and its conversation. A run out of time is stopped a little before its
//! deadline, so its work so far is pushed to its branch too.

use crate::agent_runs::start;
use handoff_tests::callbacks::Receiver;
use handoff_tests::daemon::Daemon;
use handoff_tests::mcp::read;
use handoff_tests::relay::Relay;
use handoff_tests::runs::{agents_left, repo_name, status, terminal};
use handoff_tests::stack::{self, RunStack, SHORT_RUN_SECONDS};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Runs `echo kept-$((6 * 7))`, then waits on a model call that does not come back.
const TASK: &str = "Check, then wait. [scenario:checks-then-waits]";

/// The run's result holds the turn so far: usage, and a conversation with the command's output.
async fn assert_turn_kept(run: &Value) {
    let result = &run["result"];
    let tokens = &result["tokens"];
    let used = tokens["input"].as_u64().unwrap_or(0) + tokens["output"].as_u64().unwrap_or(0);
    assert!(used > 0, "no tokens kept: {run:#}");
    let url = result["transcriptUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("no transcript: {run:#}"));
    let transcript = read(reqwest::get(url).await.unwrap()).await;
    assert_eq!(transcript.status, 200, "{}", transcript.body);
    assert!(
        transcript.body.contains("kept-42"),
        "the command's output is not in the conversation"
    );
}

/// Stops the session's OpenCode (SIGSTOP): it takes connections and answers none, so every
/// ask of it times out.
async fn freeze_agent(mcp: &Mcp, session: &str) {
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let freeze = json!({"sandboxId": sandbox, "command": "pkill -STOP -f '^opencode serve'"});
    let hung = mcp.call_ok("sandbox_exec", freeze).await;
    assert_eq!(hung["exitCode"], 0, "{hung:#}");
}

/// The error message of a run that must have ended `failed` with `timed_out`.
fn timed_out_message(run: &Value) -> &str {
    assert_eq!(status(run), "failed", "{run:#}");
    let error = &run["result"]["error"];
    assert_eq!(error["code"], "timed_out", "{run:#}");
    error["message"].as_str().unwrap_or_default()
}

/// The run once its agent's command has run and the step is written down whole, output and
/// usage (the agent then waits on the model). A step merely started is not enough: a stop
/// while the command runs leaves it without its output.
async fn busy(mcp: &Mcp, run_id: &str) -> Value {
    let run = mcp
        .wait_run(run_id, Duration::from_secs(120), |r| {
            step_is(r, "completed") || terminal(r)
        })
        .await;
    assert_eq!(status(&run), "running", "{run:#}");
    run
}

/// Whether the run's latest step is a command in this state.
fn step_is(run: &Value, state: &str) -> bool {
    let steps = run["progress"]["recentSteps"].as_array();
    steps
        .and_then(|s| s.last())
        .is_some_and(|s| s["tool"] == "bash" && s["status"] == state)
}

#[tokio::test]
async fn a_cancelled_run_keeps_what_its_agent_did_until_then() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let receiver = Receiver::start(&[]);
    let (run_id, _) = start(
        &mcp,
        json!({"task": TASK, "callbackUrl": receiver.url("/cancelled")}),
    )
    .await;
    busy(&mcp, &run_id).await;
    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancelled["cancelled"], true);
    // The cancel answers at once; the agent is stopped and its turn kept just after.
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(60), |r| {
            !r["result"]["transcriptUrl"].is_null()
        })
        .await;
    assert_eq!(status(&run), "cancelled", "{run:#}");
    assert_eq!(run["result"]["error"]["code"], "cancelled", "{run:#}");
    assert_turn_kept(&run).await;

    // The callback waited for the turn: its one POST carries it.
    let got = receiver
        .wait_for("/cancelled", 1, Duration::from_secs(60))
        .await;
    assert_eq!(got.len(), 1, "{got:#?}");
    let posted = &got[0].json()["run"];
    assert_eq!(status(posted), "cancelled", "{posted:#}");
    assert_turn_kept(posted).await;
}

#[tokio::test]
async fn a_run_out_of_time_keeps_what_its_agent_did_until_then_and_pushes_its_work() {
    let stack = stack::short_runs();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("late");
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(&mcp, json!({"task": TASK, "repository": repository})).await;
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(90), terminal)
        .await;
    let message = timed_out_message(&run);
    assert!(
        message.contains(&format!("time limit of {SHORT_RUN_SECONDS} s"))
            && message.contains("on its branch"),
        "{message}"
    );
    assert_turn_kept(&run).await;
    // The agent was stopped before the deadline, while its git token was good.
    assert_work_on_branch(stack, &name, &run_id, &run);
}

/// The file the agent's command wrote is on the run's branch, and no pull request was opened
/// for the unfinished work.
fn assert_work_on_branch(stack: &RunStack, name: &str, run_id: &str, run: &Value) {
    let branch = format!("handoff/{run_id}");
    assert_eq!(run["result"]["branch"], json!(branch), "{run:#}");
    let kept = stack
        .forge
        .file_on_branch("acme", name, &branch, "kept.txt")
        .unwrap_or_else(|| panic!("kept.txt is not on {branch}: {run:#}"));
    assert_eq!(kept.trim(), "kept-42");
    assert!(run["result"]["pullRequestUrl"].is_null(), "{run:#}");
    assert!(!stack.forge.pulls().iter().any(|p| p.repo == name));
}

#[tokio::test]
async fn a_run_whose_sandbox_is_out_of_reach_at_its_deadline_is_stopped_once_it_is_back() {
    // The Worker reaches the daemon through a line the test can take down.
    let daemon = Daemon::start();
    let line = Relay::start(daemon.port);
    let seconds = SHORT_RUN_SECONDS.to_string();
    let stack = RunStack::with_daemon(
        daemon,
        &[
            ("SANDBOX_DAEMON_URL", &line.url()),
            ("RUN_MAX_DURATION_SECONDS", &seconds),
        ],
    );
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("cut-late");
    let repository = stack.broken_repo(&name);
    let (run_id, _) = start(&mcp, json!({"task": TASK, "repository": repository})).await;
    busy(&mcp, &run_id).await;
    // The daemon is out of reach (every call fails at once, as while it restarts) until the
    // session has found so at the run's time limit: the agent, working on by itself, cannot
    // be stopped, and the run waits for its sandbox as it does for any outage instead of
    // giving up. (On a loaded machine the agent may take so long to start that the limit
    // comes before the cut, which then meets the run pushing: it waits all the same.)
    line.refuse();
    let waiting = mcp
        .wait_run(&run_id, Duration::from_secs(120), |r| {
            terminal(r)
                || progress_says(r, "time limit")
                || (r["progress"]["phase"] == "finishing" && progress_says(r, "not answering"))
        })
        .await;
    let cut_while_pushing = waiting["progress"]["phase"] == "finishing";
    assert_eq!(status(&waiting), "running", "{waiting:#}");
    line.heal();
    // Once it is back, the agent is stopped and its work pushed, late.
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(150), terminal)
        .await;
    let message = timed_out_message(&run);
    assert!(
        (cut_while_pushing || message.contains("took longer than"))
            && message.contains("on its branch"),
        "{message}"
    );
    assert_turn_kept(&run).await;
    assert_work_on_branch(&stack, &name, &run_id, &run);
}

/// Whether the run's progress line says `words`.
fn progress_says(run: &Value, words: &str) -> bool {
    run["progress"]["message"]
        .as_str()
        .is_some_and(|m| m.contains(words))
}

#[tokio::test]
async fn a_cancel_answers_at_once_when_the_agent_hangs_and_the_agent_is_stopped_all_the_same() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let (run_id, session) = start(&mcp, json!({"task": TASK})).await;
    busy(&mcp, &run_id).await;
    freeze_agent(&mcp, &session).await;

    let asked = Instant::now();
    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    let took = asked.elapsed();
    assert_eq!(cancelled["cancelled"], true, "{cancelled:#}");
    assert!(took < Duration::from_secs(15), "the cancel waited {took:?}");

    // The session then kills it (after one unanswered abort): nothing of it runs on.
    let agents = agents_left(&mcp, &session, Duration::from_secs(120)).await;
    assert_eq!(agents, "0", "the hung agent was not stopped");
    assert_eq!(status(&mcp.get_run(&run_id).await), "cancelled");
}

#[tokio::test]
async fn a_run_whose_agent_hangs_ends_timed_out_by_its_deadline_and_its_agent_is_stopped() {
    let stack = stack::short_runs();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("hung");
    let repository = stack.broken_repo(&name);
    let started = Instant::now();
    let (run_id, session) = start(&mcp, json!({"task": TASK, "repository": repository})).await;
    busy(&mcp, &run_id).await;
    // Frozen 15 s before its deadline (or at once if later), so the deadline is well under a
    // request timeout (30 s) away.
    let freeze_at = started + Duration::from_secs(SHORT_RUN_SECONDS - 15);
    tokio::time::sleep_until(freeze_at.into()).await;
    freeze_agent(&mcp, &session).await;
    let frozen = Instant::now();

    // Every ask of the agent now times out, the abort too: the run still ends by its deadline
    // (no look waits on the agent for a whole request timeout, 30 s, once the agent is due to
    // stop), without a finish that cannot read the agent (nothing pushed), and the agent is
    // killed.
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(150), terminal)
        .await;
    // The first ask after the freeze would have held the run a whole request timeout.
    let took = frozen.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "the run ended {took:?} after its agent hung"
    );
    let message = timed_out_message(&run);
    assert!(
        message.contains("RUN_MAX_DURATION_SECONDS") && message.contains("did not answer"),
        "{message}"
    );
    assert!(run["result"]["branch"].is_null(), "{run:#}");
    let agents = agents_left(&mcp, &session, Duration::from_secs(60)).await;
    assert_eq!(agents, "0", "the hung agent was not stopped");
}

#[tokio::test]
async fn a_run_cancelled_while_its_agents_command_runs_reports_the_tokens_it_used() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    // Its one command takes 15 s; OpenCode writes the usage of the answer that asked for it
    // only once the command is done.
    let task = "Fix it, slowly. [scenario:stopped-midway]";
    let (run_id, _) = start(&mcp, json!({"task": task})).await;
    let running = mcp
        .wait_run(&run_id, Duration::from_secs(120), |r| {
            step_is(r, "running") || terminal(r)
        })
        .await;
    assert_eq!(status(&running), "running", "{running:#}");
    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancelled["cancelled"], true, "{cancelled:#}");
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(60), |r| {
            !r["result"]["transcriptUrl"].is_null()
        })
        .await;
    assert_eq!(status(&run), "cancelled", "{run:#}");
    // The scripted model's answer counts 120 tokens in and 30 out: the credential proxy
    // counted it as it passed, and that count is the run's.
    let tokens = &run["result"]["tokens"];
    assert!(tokens["input"].as_u64() >= Some(120), "{run:#}");
    assert!(tokens["output"].as_u64() >= Some(30), "{run:#}");
}
