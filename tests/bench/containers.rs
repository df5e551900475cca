//! The sandbox benchmark on the production path: every sandbox in a container of its own,
//! started by workerd's container runtime from the project's image (the container lane's
//! setup, which `cargo xtask bench` prepares where an engine can run). Printed beside the
//! local daemon's figures and Cloudflare's published ones.

use crate::lifecycle::{self, p50};
use crate::sandboxes::ROUNDS;
use crate::stats::{measure, report, verdict};
use handoff_tests::containers::{container_of, docker};
use handoff_tests::{Mcp, Worker, WorkerOptions};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Sandboxes started cold (a new container each).
const COLD: usize = 8;

pub async fn run() {
    println!("\n== Sandboxes in containers ==");
    if std::env::var("HANDOFF_CONTAINER_IMAGE_VARS").is_err() {
        println!(
            "NOT RUN: no container lane (`cargo xtask bench` sets it up where a Docker engine runs \
             or can be started as root)"
        );
        return;
    }
    let started = Instant::now();
    let worker = Worker::start(WorkerOptions::default().containers());
    println!(
        "Worker with containers ready in {:.1} s (includes building the image when it changed)",
        started.elapsed().as_secs_f64()
    );
    let mcp = Arc::new(Mcp::connect(&worker.url("")).await);

    let (ids, mut create_ms, mut ready_ms) = lifecycle::create_and_exec(&mcp, COLD).await;
    let ready = p50(&mut ready_ms);
    println!(
        "cold: sandbox_create (container start → daemon ready → sandbox made) p50 {:.0} ms; \
         create → first exec done p50 {ready:.0} ms, max {:.0} ms over {COLD} containers \
         (target < 600 ms) {}",
        p50(&mut create_ms),
        ready_ms.last().copied().unwrap_or_default(),
        verdict(ready < 600.0)
    );
    println!(
        "Cloudflare's published figures (not measured here): Sandbox SDK 1.0 median start → \
         first command under 600 ms; SDK 0.x about 4 s"
    );

    println!(
        "{:<34} {:>8} {:>8} {:>9}",
        "call", "p50 ms", "p99 ms", "req/s"
    );
    let exec = {
        let id = ids[0].clone();
        move |mcp: Arc<Mcp>| {
            let id = id.clone();
            async move {
                mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": "true"}))
                    .await;
            }
        }
    };
    report(
        "sandbox_exec true, 1 client",
        &measure(&mcp, 1, 200, exec.clone()).await,
    );
    report(
        "sandbox_exec true, 10 clients",
        &measure(&mcp, 10, 20, exec).await,
    );

    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (sandbox, sidecar) = idle_memory_mib(&ids);
    println!(
        "memory per idle container (docker stats): sandbox container p50 {sandbox:.1} MiB \
         (daemon + sandbox init), its network sidecar p50 {sidecar:.1} MiB (local lane only; \
         Cloudflare runs its own)"
    );

    let (mut pause, mut resume) = lifecycle::pause_resume(&mcp, &ids[1], ROUNDS).await;
    lifecycle::report_pause_resume(
        "containers (pause also removes the container, resume starts a new one)",
        &mut pause,
        &mut resume,
    );
    drop(worker);
}

/// Median memory use of the sandboxes' containers and of their sidecars, in MiB.
fn idle_memory_mib(ids: &[String]) -> (f64, f64) {
    let names: Vec<String> = ids
        .iter()
        .map(|id| {
            container_of(id).inspect["Name"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string()
        })
        .collect();
    let mut args = vec![
        "stats",
        "--no-stream",
        "--format",
        "{{.Name}} {{.MemUsage}}",
    ];
    let sidecars: Vec<String> = names.iter().map(|n| format!("{n}-proxy")).collect();
    args.extend(names.iter().map(String::as_str));
    args.extend(sidecars.iter().map(String::as_str));
    let out = docker(&args);
    let (mut own, mut beside) = (Vec::new(), Vec::new());
    for line in out.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(usage)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(mib) = to_mib(usage) else { continue };
        if name.ends_with("-proxy") {
            beside.push(mib);
        } else {
            own.push(mib);
        }
    }
    assert!(!own.is_empty() && !beside.is_empty(), "docker stats: {out}");
    (p50(&mut own), p50(&mut beside))
}

/// `12.5MiB` → 12.5.
fn to_mib(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "B" => 1.0 / (1024.0 * 1024.0),
        "KiB" | "kB" => 1.0 / 1024.0,
        "MiB" | "MB" => 1.0,
        "GiB" | "GB" => 1024.0,
        _ => return None,
    };
    Some(value * scale)
}
