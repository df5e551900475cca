//! The background-worker benchmark: deploy time (a small folder and a ~900 KB one), manual
//! run → first log line visible through workers_run_get, run → completed for a trivial script,
//! and schedule jitter (when the run was accepted against its fire time) over 20 fires.

use crate::lifecycle::p50;
use handoff_tests::stack::RunStack;
use handoff_tests::workers::name;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const DEPLOYS: usize = 20;
const RUNS: usize = 10;
const FIRES: usize = 20;

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn p99(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() as f64 * 0.99) as usize).min(samples.len() - 1)]
}

fn epoch_ms(text: &str) -> f64 {
    // RFC 3339 UTC with milliseconds, as handoff writes them: 2026-12-01T22:09:30.764Z.
    let (date, time) = text
        .trim_end_matches('Z')
        .split_once('T')
        .unwrap_or_default();
    let d: Vec<i64> = date.split('-').filter_map(|p| p.parse().ok()).collect();
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').filter_map(|p| p.parse().ok()).collect();
    let (y, m, day) = (d[0], d[1], d[2]);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    secs as f64 * 1000.0 + frac.parse::<f64>().unwrap_or(0.0)
}

pub async fn run() {
    let stack = RunStack::start(&[("WORKER_MIN_SCHEDULE_SECONDS", "1")]);
    let mcp = Mcp::connect(&stack.url()).await;
    println!("\n== Background workers ==");

    let worker = name("bench");
    let manifest = format!("schema_version: 1\nname: {worker}\nruntime: sh\n");
    let mut deploy_ms = Vec::new();
    for i in 0..DEPLOYS {
        let script = format!("echo first; sleep 1; echo done # {i}\n");
        let started = Instant::now();
        mcp.deploy(&[("worker.yml", &manifest), ("run.sh", &script)])
            .await;
        deploy_ms.push(ms(started));
    }
    // Four files of 225 KB (a file may have 256 KiB, a folder 1 MiB).
    let part: String = (0..225)
        .map(|i| format!("# line {i:04} {}\n", "x".repeat(988)))
        .collect();
    let mut big_ms = Vec::new();
    for i in 0..5 {
        let started = Instant::now();
        let last = format!("{part}# {i}\n");
        mcp.deploy(&[
            ("worker.yml", &manifest),
            ("run.sh", "echo first\n"),
            ("data/a.txt", &part),
            ("data/b.txt", &part),
            ("data/c.txt", &part),
            ("data/d.txt", &last),
        ])
        .await;
        big_ms.push(ms(started));
    }
    println!(
        "workers_deploy p50 {:.1} ms, p99 {:.1} ms over {DEPLOYS} versions; a 900 KB folder p50 {:.1} ms",
        p50(&mut deploy_ms.clone()),
        p99(&mut deploy_ms),
        p50(&mut big_ms)
    );

    mcp.deploy(&[
        ("worker.yml", &manifest),
        ("run.sh", "echo first; sleep 2; echo done\n"),
    ])
    .await;
    let (mut first_line, mut completed) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let started = Instant::now();
        let run_id = mcp.run_worker(&worker, json!({})).await;
        loop {
            let run = mcp.worker_run(&run_id).await;
            let live = run["liveLog"]
                .as_str()
                .unwrap_or_default()
                .contains("first");
            let ended = run["logTail"]
                .as_str()
                .unwrap_or_default()
                .contains("first");
            if live || ended {
                first_line.push(ms(started));
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let run = mcp.worker_ended(&run_id).await;
        assert_eq!(run["status"], "completed", "{run:#}");
        completed.push(ms(started));
    }
    println!(
        "workers_run → first log line in workers_run_get p50 {:.0} ms, p99 {:.0} ms; → completed p50 {:.0} ms (the script sleeps 2 s) over {RUNS} runs",
        p50(&mut first_line.clone()),
        p99(&mut first_line),
        p50(&mut completed)
    );

    let ticker = name("tick");
    let schedule = format!(
        "schema_version: 1\nname: {ticker}\nruntime: sh\ntriggers:\n  manual: false\n  schedule:\n    cron: \"*/2 * * * * *\"\n"
    );
    mcp.deploy(&[("worker.yml", &schedule), ("run.sh", "true\n")])
        .await;
    let deadline = Instant::now() + Duration::from_secs(FIRES as u64 * 2 + 60);
    let runs: Vec<Value> = loop {
        let out = mcp
            .call_ok("workers_runs", json!({"worker": ticker, "limit": 100}))
            .await;
        let runs = out["runs"].as_array().cloned().unwrap_or_default();
        if runs.len() >= FIRES || Instant::now() > deadline {
            break runs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    mcp.call_ok("workers_delete", json!({"worker": ticker}))
        .await;
    let mut jitter: Vec<f64> = runs
        .iter()
        .take(FIRES)
        .filter_map(|r| Some(epoch_ms(r["createdAt"].as_str()?) - epoch_ms(r["dueAt"].as_str()?)))
        .collect();
    let count = jitter.len();
    let max = jitter.iter().cloned().fold(f64::MIN, f64::max);
    println!(
        "schedule jitter (run accepted − fire time) p50 {:.0} ms, p99 {:.0} ms, max {max:.0} ms over {count} fires of */2 s",
        p50(&mut jitter.clone()),
        p99(&mut jitter)
    );
}
