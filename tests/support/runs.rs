//! Small helpers for tests that start delegated runs.

use crate::Mcp;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A repository name no other test of this process uses.
pub fn repo_name(prefix: &str) -> String {
    static REPO: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        REPO.fetch_add(1, Ordering::SeqCst)
    )
}

/// A run's status.
pub fn status(run: &Value) -> &str {
    run["status"].as_str().unwrap_or_default()
}

/// Whether a run has ended.
pub fn terminal(run: &Value) -> bool {
    matches!(status(run), "completed" | "failed" | "cancelled")
}

/// The HTML of a run's page (its `webUiUrl`), asserting it holds `text`.
pub async fn page_saying(run: &Value, text: &str) -> String {
    view_saying(run, "", text).await
}

/// The HTML of one of a run's pages (`conversation`, …; "" the run page itself) opened with
/// its signed link, asserting it answers 200 and holds `text`.
pub async fn view_saying(run: &Value, view: &str, text: &str) -> String {
    let link = run["webUiUrl"].as_str().expect("the run has a page");
    let url = match (view, link.split_once('?')) {
        ("", _) => link.to_string(),
        (view, Some((page, query))) => format!("{page}/{view}?{query}"),
        (view, None) => format!("{link}/{view}"),
    };
    let page = crate::mcp::read(reqwest::get(&url).await.expect("the run's page")).await;
    assert_eq!(page.status, 200, "{url}: {}", page.body);
    assert!(page.body.contains(text), "{text:?} not in {}", page.body);
    page.body
}

/// The names of a run's phases, oldest first.
pub fn phases(run: &Value) -> Vec<&str> {
    run["phases"]
        .as_array()
        .map(|phases| phases.iter().filter_map(|p| p["phase"].as_str()).collect())
        .unwrap_or_default()
}

/// The process ids of `opencode serve` in the sandbox.
pub async fn agent_pids(mcp: &Mcp, sandbox: &str) -> Vec<String> {
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": sandbox, "command": "ps -eo pid=,args= | awk '$2 == \"opencode\" && $3 == \"serve\" {print $1}'"}),
        )
        .await;
    out["stdout"]
        .as_str()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The background processes the daemon has started in `sandbox` (running and ended), asked of
/// the daemon directly.
pub async fn daemon_processes(stack: &crate::stack::RunStack, sandbox: &str) -> Vec<Value> {
    // A client for the existing sandbox (no create: that would reset its spec).
    let daemon = crate::daemon::Client {
        http: reqwest::Client::new(),
        base: format!("{}/v1/sandboxes/{sandbox}", stack.daemon().url()),
        id: sandbox.to_string(),
        token: crate::links::daemon_token(sandbox, 300),
    };
    let listed = daemon
        .send(reqwest::Method::GET, "/processes", None)
        .await
        .json();
    listed["processes"].as_array().cloned().unwrap_or_default()
}

/// Whether a process the daemon lists is an `opencode serve`.
pub fn is_agent(process: &Value) -> bool {
    let command = process["command"].as_str().unwrap_or_default();
    command.contains("opencode") && command.contains("serve")
}

/// When the daemon started the sandbox's running `opencode serve` (ms since the epoch).
pub async fn agent_started_at(stack: &crate::stack::RunStack, sandbox: &str) -> i64 {
    let processes = daemon_processes(stack, sandbox).await;
    processes
        .iter()
        .find(|p| p["running"] == true && is_agent(p))
        .and_then(|p| p["started_at"].as_i64())
        .unwrap_or_else(|| panic!("no running OpenCode: {processes:#?}"))
}

/// The state letter(s) `ps` shows for `pid` in the sandbox (`T` when stopped).
pub async fn process_state(mcp: &Mcp, sandbox: &str, pid: &str) -> String {
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": sandbox, "command": format!("ps -o stat= -p {pid}")}),
        )
        .await;
    out["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// How many OpenCode servers run in a session's sandbox once none is left, or when `wait` has
/// passed (as `ps` counts them).
pub async fn agents_left(mcp: &Mcp, session: &str, wait: std::time::Duration) -> String {
    let sandbox = format!("sbx_{}", session.trim_start_matches("ses_"));
    let count = "ps -eo args | grep -c '^opencode serve' || true";
    let deadline = std::time::Instant::now() + wait;
    loop {
        let ps = mcp
            .call_ok(
                "sandbox_exec",
                json!({"sandboxId": sandbox, "command": count}),
            )
            .await;
        let agents = ps["stdout"].as_str().unwrap_or_default().trim().to_string();
        if agents == "0" || std::time::Instant::now() > deadline {
            return agents;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
