//! `cargo xtask bench profile [get|list|ping|tools|initialize|health] [seconds]`: where the Worker's
//! CPU goes on one hot call. It starts a fresh local Worker with 100 runs, then one client
//! repeats the call while `tests/js/cpu_profile.mjs` samples workerd's isolate (the Worker and
//! its Durable Objects) over DevTools; it prints the functions with the most self and inclusive
//! time, named from the wasm the build keeps with its names, and writes the whole profile to
//! `target/bench-profile-<call>.cpuprofile` (Chrome DevTools opens it).

use crate::cpu::CpuSnapshot;
use crate::stats::{measure, report, Figures};
use handoff_tests::mcp::run_node;
use handoff_tests::{root, Mcp, Worker, WorkerOptions};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLS: [&str; 6] = ["get", "list", "ping", "tools", "initialize", "health"];
/// Unprofiled calls measured first, one after another.
const SAMPLES: usize = 1000;

pub async fn run(args: &[String]) {
    let call = args.first().map_or("get", String::as_str);
    if !CALLS.contains(&call) {
        eprintln!("bench profile: unknown call {call:?}; use one of {CALLS:?}");
        std::process::exit(2);
    }
    let seconds = match args.get(1).map(|s| s.parse::<u64>()) {
        None => 10,
        Some(Ok(seconds)) if (1..=600).contains(&seconds) => seconds,
        Some(_) => {
            eprintln!("bench profile: seconds must be a whole number from 1 to 600");
            std::process::exit(2);
        }
    };
    let worker = Worker::start(WorkerOptions::default());
    let base = worker.url("");
    let mcp = Arc::new(Mcp::connect(&base).await);
    for i in 0..100 {
        mcp.call_ok(
            "opencode_run_task",
            json!({"task": format!("profile seed {i}")}),
        )
        .await;
    }
    let run_id = mcp.start_run("profile target").await.0;
    crate::runs::wait_quiet(&mcp).await;
    let health = crate::stats::health(worker.url("/health"));
    let one = {
        let (base, call, health) = (base.clone(), call.to_string(), health.clone());
        move |mcp: Arc<Mcp>| {
            let (base, call, run_id) = (base.clone(), call.clone(), run_id.clone());
            let health = health.clone();
            async move {
                match call.as_str() {
                    "get" => drop(
                        mcp.call_ok("opencode_get_result", json!({"runId": run_id}))
                            .await,
                    ),
                    "list" => drop(mcp.call_ok("opencode_list_runs", json!({})).await),
                    "ping" => drop(mcp.request("ping", json!({})).await),
                    "tools" => drop(mcp.request("tools/list", json!({})).await),
                    "health" => health(mcp).await,
                    _ => drop(Mcp::connect(&base).await),
                }
            }
        }
    };
    // Unprofiled first: the call's latency beside wrangler dev's floor.
    // Latency varies with the machine; workerd's CPU per call compares builds more steadily.
    let floor = measured(&mcp, health).await;
    let this = measured(&mcp, one.clone()).await;
    for (name, (figures, cpu_ms)) in [("GET /health (no storage)", floor), (call, this)] {
        report(name, &figures);
        println!("{:<34} workerd CPU {cpu_ms:.2} ms per call", "");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let client = {
        let (mcp, stop, done) = (mcp.clone(), stop.clone(), done.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                one(mcp.clone()).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = root().join(format!("target/bench-profile-{call}.cpuprofile"));
    // The names of the wasm this stack serves (the tests' copy, not `build/`, which a build
    // may have changed since).
    let named = handoff_tests::bundle::named_wasm();
    let started = Instant::now();
    let before = done.load(Ordering::Relaxed);
    // A copy beside the profile: wrangler dev deletes its own when it stops, and the profile's
    // JavaScript line numbers point into it.
    let bundle = served_bundle(&worker)
        .and_then(|served| {
            let copy = out.with_extension("js");
            std::fs::copy(served, &copy).ok()?;
            Some(copy.display().to_string())
        })
        .unwrap_or_default();
    let (ok, stdout, stderr) = run_node(
        "tests/js/cpu_profile.mjs",
        &[
            &worker.inspector_port.to_string(),
            &seconds.to_string(),
            &named.display().to_string(),
            &out.display().to_string(),
            &bundle,
        ],
        &[],
        Duration::from_secs(seconds + 60),
    )
    .await;
    let calls = done.load(Ordering::Relaxed) - before;
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    client.await.ok();
    assert!(ok, "cpu_profile.mjs failed: {stdout}\n{stderr}");
    println!(
        "== CPU profile of `{call}`: {calls} calls in {elapsed:.1} s ({:.2} ms each, profiler attached) ==",
        1e3 * elapsed / calls.max(1) as f64
    );
    println!("{stdout}");
    match bundle.as_str() {
        "" => println!("whole profile: {}", out.display()),
        js => println!(
            "whole profile: {} (the JavaScript it points into: {js})",
            out.display()
        ),
    }
}

/// The JavaScript wrangler dev serves (its bundle of worker-build's shim and its own
/// middleware), where the profile's JavaScript line numbers point.
fn served_bundle(worker: &Worker) -> Option<String> {
    let tmp = worker.state_dir().parent()?.join(".wrangler/tmp");
    std::fs::read_dir(tmp)
        .ok()?
        .flatten()
        .map(|entry| entry.path().join("shim.js"))
        .find(|path| path.is_file())
        .map(|path| path.display().to_string())
}

/// `call` measured [`SAMPLES`] times with one client, and workerd's CPU milliseconds per call
/// meanwhile.
async fn measured<F, Fut>(mcp: &Arc<Mcp>, call: F) -> (Figures, f64)
where
    F: Fn(Arc<Mcp>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let before = CpuSnapshot::take(0);
    let figures = measure(mcp, 1, SAMPLES, call).await;
    let after = CpuSnapshot::take(0);
    // `measure` makes 20 warm-up calls of its own before the samples.
    let cpu_ms = 1e3 * before.workerd_until(&after) / (SAMPLES + 20) as f64;
    (figures, cpu_ms)
}
