//! Spare sessions: a coding run that starts a new session has the caller's next new session
//! prepared once it ends (its sandbox and OpenCode started, then frozen), so that session's
//! first run finds its agent waiting; the spare's agent cannot reach the model before a run
//! takes it (its warm-up prompt's model call is refused), a spare no run takes is deleted once
//! its agent has waited `RUN_AGENT_KEEP_SECONDS` and forgotten (the next new session is a new
//! one), and each client has its own.

use handoff_tests::links::session_proxy_token;
use handoff_tests::mcp::read;
use handoff_tests::runs::{
    agent_pids, agent_started_at, process_state, repo_name, status, terminal,
};
use handoff_tests::stack::{RunStack, CANARY_ANTHROPIC_KEY, PROXY_SECRET};
use handoff_tests::{Mcp, OTHER_TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const RUN_TIMEOUT: Duration = Duration::from_secs(240);
const TASK: &str = "Fix the test. [scenario:fix-add]";
/// OpenCode's log files in a session's sandbox (its XDG data folder).
const AGENT_LOGS: &str = "/home/sandbox/.handoff/opencode/data/opencode/log";

async fn start(mcp: &Mcp, arguments: Value) -> (String, String) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    (
        out["runId"].as_str().unwrap().to_string(),
        out["sessionId"].as_str().unwrap().to_string(),
    )
}

/// Starts a run and follows it to its end, which must be `completed`: its id, its session's
/// and the run as `opencode_get_result` last showed it.
async fn complete(mcp: &Mcp, arguments: Value) -> (String, String, Value) {
    let (run, session) = start(mcp, arguments).await;
    let ended = mcp.wait_run(&run, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&ended), "completed", "{ended:#}");
    (run, session, ended)
}

fn sandbox_of(session: &str) -> String {
    format!("sbx_{}", session.trim_start_matches("ses_"))
}

/// The caller's sandboxes.
async fn sandboxes(mcp: &Mcp) -> Vec<String> {
    let listed = mcp.call_ok("sandbox_list", json!({"limit": 100})).await;
    listed["sandboxes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["sandboxId"].as_str().map(str::to_string))
        .collect()
}

/// Waits for a session sandbox other than `known` whose OpenCode is frozen: the spare, ready.
async fn ready_spare(mcp: &Mcp, known: &[String]) -> String {
    let waited = Instant::now();
    loop {
        for sandbox in sandboxes(mcp).await {
            if known.contains(&sandbox) {
                continue;
            }
            let pids = agent_pids(mcp, &sandbox).await;
            if pids.len() == 1
                && process_state(mcp, &sandbox, &pids[0])
                    .await
                    .starts_with('T')
            {
                return sandbox;
            }
        }
        assert!(
            waited.elapsed() < Duration::from_secs(90),
            "no spare session with a frozen agent appeared; sandboxes: {:?}",
            sandboxes(mcp).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_new_sessions_run_finds_its_agent_waiting_and_an_unused_spare_is_deleted() {
    let stack = RunStack::start(&[
        ("RUN_SPARE_SESSIONS", "1"),
        ("RUN_AGENT_KEEP_SECONDS", "30"),
    ]);
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("spare");
    let repository = stack.broken_repo(&name);
    let (_, first_session, _) =
        complete(&mcp, json!({"task": TASK, "repository": repository})).await;

    // The run made a spare session: a sandbox of the caller's with OpenCode started and frozen.
    let spare = ready_spare(&mcp, &[sandbox_of(&first_session)]).await;
    let spare_session = format!("ses_{}", spare.trim_start_matches("sbx_"));
    // Its agent's token reaches no model while no run has taken the session.
    let messages = format!("{}/proxy/anthropic/v1/messages", stack.url());
    let token = session_proxy_token(PROXY_SECRET, "handoff:proxy:anthropic", &spare_session);
    let refused = read(
        reqwest::Client::new()
            .post(&messages)
            .header("x-api-key", token)
            .header("anthropic-version", "2023-06-01")
            .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 16,
                "messages": [{"role": "user", "content": "hello"}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(
        refused.body.contains("no run in progress"),
        "{}",
        refused.body
    );
    // It is no session of the caller's yet.
    let sessions = mcp.call_ok("opencode_list_sessions", json!({})).await;
    assert!(
        !sessions.to_string().contains(&spare_session),
        "{sessions:#}"
    );

    // The caller's next new session is the spare: its run finds the agent already started.
    let asked = now_ms();
    let (second, second_session, two) =
        complete(&mcp, json!({"task": TASK, "repository": repository})).await;
    assert_eq!(second_session, spare_session, "the spare was taken over");
    let started = agent_started_at(&stack, &spare).await;
    assert!(
        started < asked,
        "OpenCode started at {started}, after the run was asked for ({asked}): {two:#}"
    );
    let heard: Vec<_> = stack
        .llm
        .all_requests()
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(second.as_str()))
        .collect();
    assert!(!heard.is_empty(), "the model heard the run");
    assert!(heard.iter().all(|r| r.api_key == CANARY_ANTHROPIC_KEY));
    // OpenCode knew the run's folder as the git repository it is, though it first saw it
    // before the clone (below).
    let folder = format!("/home/sandbox/{name}");
    assert!(
        heard.iter().all(
            |r| r.system.contains(&format!("Working directory: {folder}\n"))
                && r.system.contains("Is directory a git repo: yes")
        ),
        "{}",
        heard[0].system
    );
    // Before that run, the spare's OpenCode served a warm-up prompt in the folder the run was
    // to clone into, whose model call the proxy refused: the model heard nothing from the
    // spare. (OpenCode's log, read now: a frozen OpenCode may not have written it out yet.)
    let log = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": spare.as_str(), "command": format!("cat {AGENT_LOGS}/*.log")}),
        )
        .await;
    let log = log["stdout"].as_str().unwrap_or_default();
    let warm = log
        .lines()
        .filter(|l| l.contains("stream error") && l.contains("no run in progress"))
        .count();
    assert!(
        log.contains(&format!("directory={folder}")) && warm >= 1,
        "no refused warm-up prompt in OpenCode's log:\n{log}"
    );
    assert!(
        !stack
            .llm
            .all_requests()
            .iter()
            .any(|r| r.last_user.contains("Reply OK.")),
        "the warm-up prompt reached the model"
    );

    // That run made the next spare; no run takes it, so it is deleted once its agent has
    // waited its time. The sessions' own sandboxes stay.
    let known = [sandbox_of(&first_session), spare.clone()];
    let unused = ready_spare(&mcp, &known).await;
    let waited = Instant::now();
    while sandboxes(&mcp).await.contains(&unused) {
        assert!(
            waited.elapsed() < Duration::from_secs(120),
            "the unused spare {unused} was never deleted"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let left = sandboxes(&mcp).await;
    assert!(known.iter().all(|s| left.contains(s)), "{left:?}");

    // The deleted spare is forgotten: the next new session is a new one, and it makes a spare.
    let (_, third_session, _) =
        complete(&mcp, json!({"task": TASK, "repository": repository})).await;
    assert_ne!(
        sandbox_of(&third_session),
        unused,
        "a deleted spare was handed out"
    );

    // Another client's new session does not take this client's spare (each has its own).
    let mut known = known.to_vec();
    known.extend([unused, sandbox_of(&third_session)]);
    let spare = ready_spare(&mcp, &known).await;
    let other = Mcp::connect_as(&stack.url(), OTHER_TOKEN, "2025-11-25").await;
    let (stranger_run, stranger_session) =
        start(&other, json!({"task": "Wait. [scenario:slow]"})).await;
    assert_ne!(
        sandbox_of(&stranger_session),
        spare,
        "another client took the spare"
    );
    other
        .call_ok("opencode_cancel_run", json!({"runId": stranger_run}))
        .await;

    // A run of another repository takes the spare too: it clones beside the folder the
    // warm-up prepared, which goes.
    let elsewhere = repo_name("spare-other");
    let other_repository = stack.broken_repo(&elsewhere);
    let (_, fourth_session, _) =
        complete(&mcp, json!({"task": TASK, "repository": other_repository})).await;
    assert_eq!(
        sandbox_of(&fourth_session),
        spare,
        "the spare was taken over"
    );
    let listed = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": spare.as_str(), "command": "ls -A /home/sandbox"}),
        )
        .await;
    let listed = listed["stdout"].as_str().unwrap_or_default();
    let folders: Vec<&str> = listed.lines().collect();
    assert!(
        folders.contains(&elsewhere.as_str()) && !folders.contains(&name.as_str()),
        "{listed}"
    );
}
