//! `cargo xtask bench wait`: how soon `opencode_wait` answers once its run ends, and how soon a
//! `GET /mcp` stream reports a task's end. A fresh local Worker without a sandbox backend, so
//! each run fails moments after it starts; a wait asked for right after `opencode_run_task`
//! follows it (`untilDone`). The lag is the time between the run's `completedAt` (the task's
//! `lastUpdatedAt`) and the answer (the event) reaching the client, both on this host's clock
//! (the trip back is in it).

use crate::cpu::CpuSnapshot;
use crate::lifecycle::p50;
use handoff_tests::mcp::{read_events, SseEvent};
use handoff_tests::{Mcp, Worker, WorkerOptions};
use serde_json::json;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ROUNDS: usize = 30;
const DAY_MS: i64 = 86_400_000;

pub async fn run() {
    println!("\n== opencode_wait: from the run's end to the answer ==");
    let worker = Worker::start(WorkerOptions::default());
    let mcp = Mcp::connect(&worker.url("")).await;
    let mut lags = Vec::new();
    let mut ended_first = 0;
    for i in 0..ROUNDS {
        let (run_id, _) = mcp.start_run(&format!("wait bench {i}")).await;
        let waited = mcp
            .call_ok(
                "opencode_wait",
                json!({"runId": run_id, "untilDone": true, "timeoutSeconds": 30}),
            )
            .await;
        let received = now_ms_of_day();
        // A run that ended before the wait began says nothing about waking.
        if waited["changed"] != true {
            ended_first += 1;
            continue;
        }
        let Some(completed) = waited["run"]["completedAt"].as_str().and_then(ms_of_day) else {
            continue;
        };
        lags.push((received - completed).rem_euclid(DAY_MS) as f64);
    }
    if lags.is_empty() {
        println!("no run ended while a wait followed it ({ended_first} ended first)");
        return;
    }
    let n = lags.len();
    let median = p50(&mut lags);
    println!(
        "answered {median:.0} ms after the run ended (median of {n}; max {:.0} ms; {ended_first} \
         runs had ended before their wait began)",
        lags[n - 1]
    );
    stream_lag(&mcp).await;
    idle_streams(&worker).await;
}

/// A task's `failed` status on a `GET /mcp` stream.
fn is_failed(event: &SseEvent) -> bool {
    event.data["method"] == "notifications/tasks/status"
        && event.data["params"]["status"] == "failed"
}

/// Open `GET /mcp` streams with nothing to report: what they cost workerd (the Worker and its
/// ledger) while they wait.
async fn idle_streams(worker: &Worker) {
    const STREAMS: usize = 20;
    const SECONDS: u64 = 30;
    println!("\n== {STREAMS} idle GET /mcp streams, {SECONDS} s ==");
    let before = CpuSnapshot::take(0);
    tokio::time::sleep(Duration::from_secs(SECONDS)).await;
    let quiet = before.workerd_until(&CpuSnapshot::take(0));
    let mut open = Vec::new();
    for _ in 0..STREAMS {
        let mcp = Mcp::connect(&worker.url("")).await;
        let stream = mcp.open_stream(None).await;
        open.push((mcp, stream));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = CpuSnapshot::take(0);
    tokio::time::sleep(Duration::from_secs(SECONDS)).await;
    let spent = before.workerd_until(&CpuSnapshot::take(0));
    let per_minute = (spent - quiet) / STREAMS as f64 * 60.0 / SECONDS as f64;
    println!(
        "workerd used {spent:.2} CPU-s ({quiet:.2} in the {SECONDS} s before, without them): \
         {:.1} CPU-ms per stream and minute",
        per_minute * 1000.0
    );
    drop(open);
}

/// Task-augmented runs started one a second while the session's `GET /mcp` stream is open: how
/// long after each task ended its `failed` status came on the stream.
async fn stream_lag(mcp: &Mcp) {
    println!("\n== GET /mcp: from a task's end to its status on the stream ==");
    let stream = mcp.open_stream(None).await;
    let (opened, opened_ms) = (Instant::now(), now_ms_of_day());
    let ended = |events: &[SseEvent]| events.iter().filter(|e| is_failed(e)).count();
    let events = tokio::spawn(read_events(
        stream,
        Duration::from_secs(ROUNDS as u64 * 2 + 30),
        move |events| ended(events) >= ROUNDS,
    ));
    for i in 0..ROUNDS {
        mcp.start_task(json!({"task": format!("stream bench {i}")}), json!({}))
            .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let Ok(events) = events.await else {
        return println!("the stream's reader failed");
    };
    let mut lags: Vec<f64> = events
        .iter()
        .filter(|e| is_failed(e))
        .filter_map(|e| {
            let ended = ms_of_day(e.data["params"]["lastUpdatedAt"].as_str()?)?;
            let arrived = opened_ms + e.at.duration_since(opened).as_millis() as i64;
            Some((arrived - ended).rem_euclid(DAY_MS) as f64)
        })
        .collect();
    if lags.is_empty() {
        return println!("no task's end came on the stream");
    }
    let n = lags.len();
    let median = p50(&mut lags);
    println!(
        "reported {median:.0} ms after the task ended (median of {n} of {ROUNDS}; max {:.0} ms)",
        lags[n - 1]
    );
}

/// Milliseconds since midnight UTC now.
fn now_ms_of_day() -> i64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    ms.rem_euclid(DAY_MS)
}

/// Milliseconds since midnight of an RFC 3339 time as handoff writes it (`…THH:MM:SS.mmmZ`).
fn ms_of_day(rfc3339: &str) -> Option<i64> {
    let time = rfc3339.split_once('T')?.1.strip_suffix('Z')?;
    let (hms, millis) = time.split_once('.')?;
    let mut parts = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
    Some(((h * 60 + m) * 60 + s) * 1000 + millis.parse::<i64>().ok()?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_time_of_day_handoff_writes() {
        assert_eq!(
            super::ms_of_day("2026-12-05T01:02:03.045Z"),
            Some(3_723_045)
        );
        assert_eq!(super::ms_of_day("2026-12-05 01:02:03Z"), None);
    }
}
