//! A session's OpenCode, started while the repository is cloned, serving its next runs: the
//! same process takes the next run's task, its session-scoped model token reaches the model only
//! for the session's run in progress (and counts there), a kept agent is frozen while it waits
//! and thawed for the next run (the first process to go when memory runs out: the session then
//! starts a new one), and it stops once it has waited `RUN_AGENT_KEEP_SECONDS`.

use handoff_tests::links::session_proxy_token;
use handoff_tests::mcp::read;
use handoff_tests::runs::{
    agent_pids, agent_started_at, process_state, repo_name, status, terminal,
};
use handoff_tests::stack::{RunStack, CANARY_ANTHROPIC_KEY, PROXY_SECRET};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(240);
/// A budget far above what the runs use, so their results show what was spent.
const BUDGET: u64 = 10_000_000;

async fn start(mcp: &Mcp, arguments: Value) -> (String, String) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    (
        out["runId"].as_str().unwrap().to_string(),
        out["sessionId"].as_str().unwrap().to_string(),
    )
}

/// A new session's first run (`scenario:fix-add` on a fresh broken repository `name`), waited
/// for and completed: its repository, session and sandbox.
async fn first_run(stack: &RunStack, mcp: &Mcp, name: &str) -> (String, String, String) {
    let repository = stack.broken_repo(&repo_name(name));
    let (run, session) = start(
        mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    let done = mcp.wait_run(&run, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&done), "completed", "{done:#}");
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    (repository, session, sandbox)
}

/// When a run entered `phase`, in ms since the epoch (from `2026-12-02T09:00:48.057Z`).
fn phase_started_at(run: &Value, phase: &str) -> i64 {
    let at = run["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["phase"] == phase)
        .and_then(|p| p["startedAt"].as_str())
        .unwrap_or_else(|| panic!("no {phase} phase: {run:#}"));
    let number = |range: std::ops::Range<usize>| at[range].parse::<i64>().expect("a timestamp");
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = number(11..13) * 3600 + number(14..16) * 60 + number(17..19);
    (days * 86_400 + seconds) * 1000 + number(20..23)
}

fn model_calls(run: &Value) -> u64 {
    run["budget"]["spent"]["modelCalls"].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn a_sessions_next_run_reuses_its_agent_until_it_waited_too_long() {
    let stack = RunStack::start(&[("RUN_AGENT_KEEP_SECONDS", "12")]);
    let mcp = Mcp::connect(&stack.url()).await;
    let repository = stack.broken_repo(&repo_name("reuse"));
    let (first, session) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:ticker-fix]", "repository": repository, "maxTokens": BUDGET}),
    )
    .await;
    let one = mcp.wait_run(&first, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&one), "completed", "{one:#}");
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    // OpenCode was started before the clone, not after it.
    let started = agent_started_at(&stack, &sandbox).await;
    let starting_agent = phase_started_at(&one, "starting_agent");
    assert!(
        started < starting_agent,
        "OpenCode started at {started}, after the clone ({starting_agent}): {one:#}"
    );
    let kept = agent_pids(&mcp, &sandbox).await;
    assert_eq!(
        kept.len(),
        1,
        "the agent keeps serving after its run: {kept:?}"
    );
    // While it waits, it is frozen: stopped (`T`), costing no CPU.
    let waited = Instant::now();
    loop {
        let state = process_state(&mcp, &sandbox, &kept[0]).await;
        if state.starts_with('T') {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(6),
            "the kept agent was never frozen (state {state:?})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // What the agent left running in the background is not: its commands lead groups of their
    // own, so the ticker it started keeps ticking.
    let ticks = || async {
        let read = json!({"sandboxId": sandbox, "command": "cat /home/sandbox/ticks.txt"});
        mcp.call_ok("sandbox_exec", read).await["stdout"].clone()
    };
    let before = ticks().await;
    assert!(before.as_str().is_some_and(|t| !t.is_empty()), "no ticks");
    // It ticks every 0.2 s; a loaded machine is given up to 5 s.
    let watched = Instant::now();
    while ticks().await == before {
        assert!(
            watched.elapsed() < Duration::from_secs(5),
            "the agent's background command stopped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The next run goes to the same OpenCode, and its model calls count to it alone.
    let (second, _) = start(
        &mcp,
        json!({"task": "Add follow-up notes. [scenario:followup]", "repository": repository, "sessionId": session, "maxTokens": BUDGET}),
    )
    .await;
    let two = mcp.wait_run(&second, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&two), "completed", "{two:#}");
    assert_eq!(
        agent_pids(&mcp, &sandbox).await,
        kept,
        "the same process served it"
    );
    let seen: Vec<_> = stack
        .llm
        .all_requests()
        .into_iter()
        .filter(|r| r.run.as_deref() == Some(second.as_str()))
        .collect();
    assert!(!seen.is_empty(), "the model heard the second run");
    assert!(seen.iter().all(|r| r.api_key == CANARY_ANTHROPIC_KEY));
    assert!(model_calls(&two) >= seen.len() as u64, "{two:#}");
    assert_eq!(
        model_calls(&mcp.get_run(&first).await),
        model_calls(&one),
        "nothing of the second run was counted to the first"
    );

    // With no run for it, the kept agent stops after RUN_AGENT_KEEP_SECONDS.
    let waited = Instant::now();
    while !agent_pids(&mcp, &sandbox).await.is_empty() {
        assert!(
            waited.elapsed() < Duration::from_secs(40),
            "the kept agent never stopped"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The next run starts a new one; while it works, the session's token reaches the model
    // for that run, and no other session's token does.
    let (third, _) = start(
        &mcp,
        json!({"task": "Wait. [scenario:slow]", "sessionId": session, "maxTokens": BUDGET}),
    )
    .await;
    let working = mcp
        .wait_run(&third, RUN_TIMEOUT, |r| {
            r["progress"]["phase"] == "working" || terminal(r)
        })
        .await;
    assert_eq!(status(&working), "running", "{working:#}");
    let fresh = agent_pids(&mcp, &sandbox).await;
    assert_eq!(fresh.len(), 1);
    assert_ne!(fresh, kept, "a new agent");
    let http = reqwest::Client::new();
    let messages = format!("{}/proxy/anthropic/v1/messages", stack.url());
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 16,
        "messages": [{"role": "user", "content": "hello"}]});
    let call = |token: String| {
        http.post(&messages)
            .header("x-api-key", token)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    let own = session_proxy_token(PROXY_SECRET, "handoff:proxy:anthropic", &session);
    let answered = read(call(own).await.unwrap()).await;
    assert_eq!(answered.status, 200, "{}", answered.body);
    let counted = mcp
        .wait_run(&third, Duration::from_secs(20), |r| model_calls(r) >= 1)
        .await;
    assert!(
        model_calls(&counted) >= 1,
        "counted to the run in progress: {counted:#}"
    );
    let stranger = session_proxy_token(PROXY_SECRET, "handoff:proxy:anthropic", "ses_nobody");
    let refused = read(call(stranger).await.unwrap()).await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(
        refused.body.contains("no run in progress"),
        "{}",
        refused.body
    );
    let as_git = session_proxy_token(PROXY_SECRET, "handoff:proxy:git", &session);
    let git = read(
        http.get(format!(
            "{}/proxy/git/acme/x.git/info/refs?service=git-upload-pack",
            stack.url()
        ))
        .bearer_auth(as_git)
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(git.status, 401, "{}", git.body);
    assert!(git.body.contains("scope"), "{}", git.body);
    mcp.call_ok("opencode_cancel_run", json!({"runId": third}))
        .await;
    let cancelled = mcp.wait_run(&third, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&cancelled), "cancelled");
    let after = read(
        call(session_proxy_token(
            PROXY_SECRET,
            "handoff:proxy:anthropic",
            &session,
        ))
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(after.status, 401, "between runs: {}", after.body);
}

#[tokio::test]
async fn a_kept_agent_that_expires_in_a_paused_sandbox_does_not_wake_it() {
    let stack = RunStack::start(&[("RUN_AGENT_KEEP_SECONDS", "8")]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (_, _, sandbox) = first_run(&stack, &mcp, "reuse-paused").await;
    assert_eq!(
        agent_pids(&mcp, &sandbox).await.len(),
        1,
        "the agent is kept when the sandbox pauses (else this test proves nothing)"
    );
    let paused = mcp
        .call_ok("sandbox_pause", json!({"sandboxId": sandbox}))
        .await;
    assert_eq!(paused["status"], "paused", "{paused:#}");
    // Past the kept agent's 8 s, when the session lets it go.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let info = mcp
        .call_ok("sandbox_info", json!({"sandboxId": sandbox}))
        .await;
    assert_eq!(
        info["status"], "paused",
        "the kept agent's expiry woke the sandbox: {info:#}"
    );
}

/// A kept agent waits frozen, marked as the first process the OOM killer takes (a working one
/// is worth more), and a session whose kept agent was taken starts a new one for its next run:
/// nothing of the session is lost with it.
#[tokio::test]
async fn a_kept_agent_goes_first_when_memory_runs_out_and_the_next_run_starts_a_new_one() {
    let stack = RunStack::start(&[]);
    let mcp = Mcp::connect(&stack.url()).await;
    let (repository, session, sandbox) = first_run(&stack, &mcp, "reuse-oom").await;
    let kept = agent_pids(&mcp, &sandbox).await;
    assert_eq!(kept.len(), 1, "the agent is kept: {kept:?}");
    let waited = Instant::now();
    while !process_state(&mcp, &sandbox, &kept[0])
        .await
        .starts_with('T')
    {
        assert!(
            waited.elapsed() < Duration::from_secs(6),
            "the kept agent was never frozen"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let score = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": sandbox, "command": format!("cat /proc/{}/oom_score_adj", kept[0])}),
        )
        .await;
    assert_eq!(
        score["stdout"].as_str().map(str::trim),
        Some("1000"),
        "the frozen agent is not the OOM killer's first choice: {score:#}"
    );
    // What the OOM killer does to it: SIGKILL, while it is stopped.
    let killed = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": sandbox, "command": format!("kill -9 {}", kept[0])}),
        )
        .await;
    assert_eq!(killed["exitCode"], 0, "{killed:#}");

    let (second, _) = start(
        &mcp,
        json!({"task": "Add follow-up notes. [scenario:followup]", "repository": repository, "sessionId": session}),
    )
    .await;
    let two = mcp.wait_run(&second, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&two), "completed", "{two:#}");
    let serving = agent_pids(&mcp, &sandbox).await;
    assert_eq!(serving.len(), 1, "{serving:?}");
    assert_ne!(serving, kept, "a new agent served the next run");
}
