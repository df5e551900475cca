//! Every accepted run reaches a terminal state: the watchdog fails runs whose sandbox stopped
//! answering, cancel ends active runs for good, and runs, MCP sessions and alarms survive a
//! restart of `wrangler dev`. The sandbox backend here is a daemon URL that accepts connections
//! and never answers, so runs hang in `starting` exactly like they would on a stuck sandbox.

use handoff_tests::blackhole::BlackHole;
use handoff_tests::{Mcp, Worker, WorkerOptions};
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const STALL_SECS: u64 = 3;

fn hung_backend_options(hole: &BlackHole) -> WorkerOptions {
    WorkerOptions::default()
        .var("SANDBOX_DAEMON_URL", hole.url())
        .var("SANDBOX_DAEMON_SECRET", handoff_tests::DAEMON_SECRET)
        .var("RUN_STALL_TIMEOUT_SECONDS", STALL_SECS.to_string())
        .var("HANDOFF_ALLOWED_ORIGINS", "https://inspector.example")
}

/// An instance whose sandbox backend hangs, shared by the tests in this file that do not restart.
pub(crate) fn hung() -> &'static Worker {
    static HOLE: OnceLock<BlackHole> = OnceLock::new();
    static WORKER: OnceLock<Worker> = OnceLock::new();
    let hole = HOLE.get_or_init(BlackHole::start);
    WORKER.get_or_init(|| {
        let worker = Worker::start(hung_backend_options(hole));
        handoff_tests::worker::stop_group_at_exit(&worker);
        worker
    })
}

fn status(run: &Value) -> &str {
    run["status"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn the_watchdog_fails_a_run_that_makes_no_progress() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let (run_id, _) = mcp.start_run("a task whose sandbox hangs").await;
    let started = Instant::now();
    let starting = mcp
        .wait_run(&run_id, Duration::from_secs(10), |r| status(r) != "queued")
        .await;
    assert_eq!(status(&starting), "starting", "{starting:#}");
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(STALL_SECS + 15), |r| {
            status(r) == "failed"
        })
        .await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(STALL_SECS - 1),
        "not before the stall timeout: {waited:?}"
    );
    assert_eq!(run["result"]["error"]["code"], "timed_out", "{run:#}");
    let message = run["result"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no progress") && message.contains("preparing_sandbox"),
        "{message}"
    );
    assert!(run["completedAt"].is_string());
}

/// On this backend a spare session's preparation hangs on its sandbox: a new session must not
/// be handed that spare, or its run would wait behind the preparation.
#[tokio::test]
async fn a_new_session_never_waits_for_a_spare_still_being_prepared() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let (first, _) = mcp.start_run("a task that leaves a spare").await;
    mcp.call_ok("opencode_cancel_run", json!({"runId": first}))
        .await;
    // The spare starts its preparation once that run has ended (it looks every 10 s here).
    tokio::time::sleep(Duration::from_secs(12)).await;
    let (second, _) = mcp.start_run("a task after it").await;
    let run = mcp
        .wait_run(&second, Duration::from_secs(10), |r| status(r) != "queued")
        .await;
    assert_eq!(status(&run), "starting", "{run:#}");
}

#[tokio::test]
async fn cancelling_an_active_run_is_final() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let (run_id, _) = mcp.start_run("a task to cancel").await;
    mcp.wait_run(&run_id, Duration::from_secs(10), |r| {
        status(r) == "starting"
    })
    .await;
    let cancel = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancel["cancelled"], true, "{cancel}");
    assert_eq!(cancel["status"], "cancelled");
    let again = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(again["cancelled"], false);
    assert!(again["message"]
        .as_str()
        .unwrap()
        .contains("already cancelled"));
    // Past the stall timeout the watchdog must leave the cancelled run alone.
    tokio::time::sleep(Duration::from_secs(STALL_SECS + 2)).await;
    let run = mcp.get_run(&run_id).await;
    assert_eq!(status(&run), "cancelled", "{run:#}");
    assert_eq!(run["result"]["error"]["code"], "cancelled");
    let statuses: Vec<&str> = run["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "starting", "cancelled"]);
}

#[tokio::test]
async fn configured_origins_are_allowed() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let allowed = mcp
        .post(&ping, &[("origin", "https://inspector.example")])
        .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, hung().url("/mcp"))
        .header("origin", "https://inspector.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status().as_u16(), 204);
    assert!(preflight.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("mcp-session-id"));
    let other = mcp
        .post(&ping, &[("origin", "https://inspector.example.evil")])
        .await;
    assert_eq!(other.status, 403);
}

#[tokio::test]
async fn runs_sessions_and_alarms_survive_a_restart() {
    let hole = BlackHole::start();
    let mut worker = Worker::start(hung_backend_options(&hole));
    let mcp = Mcp::connect(&worker.url("")).await;
    let (run_id, session_id) = mcp.start_run("a task interrupted by a restart").await;
    let task = mcp
        .start_task(json!({"task": "an MCP task across a restart"}), json!({}))
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    mcp.wait_run(&run_id, Duration::from_secs(10), |r| {
        status(r) == "starting"
    })
    .await;

    // Down for longer than the stall timeout: the watchdog alarm comes due while nothing runs.
    worker.stop();
    let stopped_at = Instant::now();
    std::thread::sleep(Duration::from_secs(STALL_SECS + 2));
    worker.restart();

    // The MCP session, the run and its alarm all come back.
    let mcp = mcp.reconnected();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(20), |r| status(r) == "failed")
        .await;
    assert!(stopped_at.elapsed() > Duration::from_secs(STALL_SECS));
    assert_eq!(run["result"]["error"]["code"], "timed_out", "{run:#}");
    assert_eq!(run["sessionId"], json!(session_id));
    assert_eq!(run["task"], "a task interrupted by a restart");
    let listed = mcp
        .call_ok("opencode_list_runs", json!({"sessionId": session_id}))
        .await;
    assert_eq!(listed["runs"][0]["runId"], json!(run_id));
    let sessions = mcp.call_ok("opencode_list_sessions", json!({})).await;
    assert!(sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["sessionId"] == json!(session_id)));

    // The task came back with its run, and the session's stream replays its status changes
    // from before the restart.
    let got = mcp.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got["result"]["taskId"], json!(task_id), "{got}");
    let replayed = handoff_tests::mcp::read_events(
        mcp.open_stream(Some("0.0")).await,
        Duration::from_secs(20),
        |events| {
            events.iter().any(|e| {
                e.data["params"]["taskId"] == json!(task_id)
                    && e.data["params"]["status"] == "failed"
            })
        },
    )
    .await;
    assert!(
        replayed
            .iter()
            .any(|e| e.data["method"] == "notifications/tasks/status"
                && e.data["params"]["taskId"] == json!(task_id)),
        "{replayed:#?}"
    );
}
