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

/// The lane's Debian base image (`cargo xtask` makes it).
const BASE_IMAGE: &str = "handoff-base:bookworm";
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

    let made = lifecycle::create_and_exec(&mcp, COLD).await;
    let (ids, mut create_ms, mut ready_ms) = (made.ids, made.create, made.ready);
    let ready = p50(&mut ready_ms);
    println!(
        "cold: sandbox_create (container start → daemon ready → sandbox made) p50 {:.0} ms; \
         create → first exec done p50 {ready:.0} ms, max {:.0} ms over {COLD} containers \
         (target < 600 ms) {}",
        p50(&mut create_ms),
        ready_ms.last().copied().unwrap_or_default(),
        verdict(ready < 600.0)
    );
    let mut engine_ms: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            docker(&["run", "--rm", "--network", "none", BASE_IMAGE, "true"]);
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    println!(
        "the engine alone: `docker run --rm {BASE_IMAGE} true` p50 {:.0} ms; workerd starts two \
         containers per sandbox, its network sidecar first",
        p50(&mut engine_ms)
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
    let memory = idle_memory(&ids);
    println!(
        "memory per idle container, p50 over {COLD}: processes' resident memory {:.1} MiB \
         (daemon + sandbox init; binaries' pages are shared between containers), charged to the \
         container's cgroup {:.1} MiB; its network sidecar {:.1} MiB resident (local lane \
         only; Cloudflare runs its own)",
        memory.resident, memory.charged, memory.sidecar_resident
    );

    let (mut pause, mut resume) = lifecycle::pause_resume(&mcp, &ids[1], ROUNDS).await;
    lifecycle::report_pause_resume(
        "containers (pause also removes the container, resume starts a new one)",
        &mut pause,
        &mut resume,
    );
    drop(worker);
}

struct Memory {
    resident: f64,
    charged: f64,
    sidecar_resident: f64,
}

/// Medians over the sandboxes' containers, in MiB: the resident memory of the processes in
/// each (`docker top`), what the engine charges the container (`docker stats`), and the
/// resident memory of each one's sidecar.
fn idle_memory(ids: &[String]) -> Memory {
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
    let resident_mib = |name: &str| -> f64 {
        let kib: u64 = docker(&["top", name, "-eo", "pid,rss"])
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        kib as f64 / 1024.0
    };
    let mut resident: Vec<f64> = names.iter().map(|n| resident_mib(n)).collect();
    let mut sidecar: Vec<f64> = names
        .iter()
        .map(|n| resident_mib(&format!("{n}-proxy")))
        .collect();
    let mut args = vec!["stats", "--no-stream", "--format", "{{.MemUsage}}"];
    args.extend(names.iter().map(String::as_str));
    let out = docker(&args);
    let mut charged: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next().and_then(to_mib))
        .collect();
    assert_eq!(charged.len(), names.len(), "docker stats: {out}");
    Memory {
        resident: p50(&mut resident),
        charged: p50(&mut charged),
        sidecar_resident: p50(&mut sidecar),
    }
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
