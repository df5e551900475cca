//! The hot path through the official MCP TypeScript SDK client (`tests/js/bench_client.mjs`),
//! with the N other MCP servers are measured with: 300 sequential calls, 10 clients × 2,000
//! (`HANDOFF_BENCH_PER_CLIENT` changes the 2,000), and 50 fresh connections for `initialize`.

use crate::stats::verdict;
use handoff_tests::TOKEN;
use serde_json::Value;
use std::time::Duration;

pub async fn run(base: &str, run_id: &str, floor_ms: f64) {
    let per_client = std::env::var("HANDOFF_BENCH_PER_CLIENT").unwrap_or_else(|_| "2000".into());
    println!("\n== The official TypeScript SDK client (tests/js/bench_client.mjs) ==");
    let (ok, stdout, stderr) = handoff_tests::mcp::run_node(
        "tests/js/bench_client.mjs",
        &[],
        &[
            ("HANDOFF_URL", base),
            ("HANDOFF_TOKEN", TOKEN),
            ("RUN_ID", run_id),
            ("PER_CLIENT", &per_client),
        ],
        Duration::from_secs(1200),
    )
    .await;
    let figures: Value = match stdout.trim().lines().last().map(serde_json::from_str) {
        Some(Ok(v)) if ok => v,
        _ => {
            println!("the TypeScript client failed:\n{stdout}\n{stderr}");
            return;
        }
    };
    println!(
        "{:<34} {:>8} {:>8} {:>9}",
        "call", "p50 ms", "p99 ms", "req/s"
    );
    let line = |name: &str, f: &Value| {
        println!(
            "{name:<34} {:>8.2} {:>8.2} {:>9.0}",
            f["p50"].as_f64().unwrap_or(f64::NAN),
            f["p99"].as_f64().unwrap_or(f64::NAN),
            f["perSecond"].as_f64().unwrap_or(f64::NAN)
        )
    };
    line("initialize (connect), fresh client", &figures["initialize"]);
    line(
        "… the initialize request alone",
        &figures["initializeRequest"],
    );
    line("opencode_get_result, 1 client", &figures["getResult"]);
    line("opencode_list_runs, 1 client", &figures["listRuns"]);
    line(
        &format!(
            "opencode_get_result, {} clients",
            figures["getResultConcurrent"]["clients"]
        ),
        &figures["getResultConcurrent"],
    );
    let p50 = |key: &str| figures[key]["p50"].as_f64().unwrap_or(f64::NAN);
    let target = floor_ms + 1.0;
    println!(
        "get_result p50 {:.2} ms, list_runs p50 {:.2} ms (target <= floor + 1 = {target:.2} ms): {} / {}",
        p50("getResult"),
        p50("listRuns"),
        verdict(p50("getResult") <= target),
        verdict(p50("listRuns") <= target)
    );
    let rate = figures["getResultConcurrent"]["perSecond"]
        .as_f64()
        .unwrap_or(0.0);
    println!(
        "10 clients: {rate:.0} req/s (target >= 450) {}; the initialize request p50 {:.2} ms (target <= 8 ms) {} (a whole connect, two requests: {:.2} ms)",
        verdict(rate >= 450.0),
        p50("initializeRequest"),
        verdict(p50("initializeRequest") <= 8.0),
        p50("initialize")
    );
}
