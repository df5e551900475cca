//! `cargo xtask bench [runs|hot|bundle|bundle-split|sandboxes|containers|agent|agent-spare|agent-cold [N]|oauth|workers|load|wait|soak|profile]`: starts fresh local stacks and prints figures — what was
//! measured and how it compares with the targets. It never fails on a target.

mod agent;
mod bundle;
mod containers;
mod cpu;
mod lifecycle;
mod load;
mod memory;
mod oauth;
mod profile;
mod runs;
mod sandbox_features;
mod sandboxes;
mod soak;
mod stats;
mod ts_sdk;
mod wait;
mod workers;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().cloned().unwrap_or_else(|| "all".into());
    match which.as_str() {
        "runs" => runs::run(true).await,
        // Only the hot path beside the baseline (no 10,000 runs, no SDK client): for A/B rounds.
        "hot" => runs::run(false).await,
        // Only the bundle's size and what it is made of (no stack).
        "bundle" => bundle::report(),
        // The bundle split in two Workers (halves built by `cargo xtask bench bundle-split`).
        "bundle-split" => bundle::report_split(),
        "sandboxes" => sandboxes::run().await,
        "containers" => containers::run().await,
        "agent" => agent::run().await,
        // Only the agent bench's spare-session step (its own stack, about a minute).
        "agent-spare" => agent::spare_session().await,
        // Only the agent bench's cold step beside bare `opencode run`s, N rounds (default 5).
        "agent-cold" => {
            let rounds = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
            agent::cold_rounds(rounds).await
        }
        "oauth" => oauth::run().await,
        "workers" => workers::run().await,
        "load" => load::run().await,
        "wait" => wait::run().await,
        "soak" => soak::run().await,
        "profile" => profile::run(&args[1..]).await,
        "all" => {
            runs::run(true).await;
            wait::run().await;
            sandboxes::run().await;
            agent::run().await;
            oauth::run().await;
            workers::run().await;
        }
        other => {
            eprintln!(
                "bench: unknown benchmark {other:?}; use runs, hot, bundle, bundle-split, sandboxes, containers, agent, agent-spare, agent-cold [N], oauth, workers, load, wait, soak, profile or all"
            );
            std::process::exit(2);
        }
    }
}
