//! `cargo xtask soak`: an hour (`HANDOFF_SOAK_SECONDS`) of mixed traffic against a fresh local
//! stack — two sessions running delegated runs back to back (every fourth cancelled), sandboxes
//! made, used and deleted, polling and listing a few times a second, an OAuth client refreshing
//! every 5 s — printing the memory curve of workerd, the daemon and the sandboxes, the growth
//! from the first quarter to the last, and what was left once the soak's sandboxes were deleted.
//! `HANDOFF_SOAK_ONLY=runs,sandboxes,polling,oauth` keeps some kinds of traffic only (to find
//! which one a trend comes from).

use handoff_tests::soak::{self, SoakPlan};
use handoff_tests::stack::RunStack;
use std::time::Duration;

pub async fn run() {
    let seconds = std::env::var("HANDOFF_SOAK_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600u64);
    let stack = RunStack::start(&[]);
    let plan = SoakPlan {
        duration: Duration::from_secs(seconds),
        sample_every: Duration::from_secs((seconds / 60).max(5)),
        run_lanes: 2,
        only: std::env::var("HANDOFF_SOAK_ONLY")
            .unwrap_or_default()
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
    };
    println!("soak: {seconds} s of mixed traffic against the real stack");
    let report = soak::run(&stack, &plan).await;
    report.print();
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let failed = report
        .runs
        .keys()
        .any(|s| !matches!(s.as_str(), "completed" | "cancelled"));
    println!(
        "soak: target no errors: {}; every run completed or cancelled: {}; nothing left: {}",
        verdict(report.errors.is_empty()),
        verdict(!failed),
        verdict(
            report.leftover_processes.is_empty()
                && report.leftover_dirs.is_empty()
                && report.leftover_cgroups.is_empty()
        )
    );
}
