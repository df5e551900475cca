//! The short soak (the long one is `cargo xtask soak`): a minute of mixed traffic against a
//! stack of its own — runs (one cancelled), sandboxes made and deleted, polling, OAuth
//! refreshes — without an error, and nothing left behind once its sandboxes are deleted: no
//! process below the daemon, no sandbox folder, no cgroup. Memory is sampled and printed.

use handoff_tests::soak::{self, SoakPlan};
use handoff_tests::stack::RunStack;
use std::time::Duration;

#[tokio::test]
async fn a_minute_of_mixed_traffic_leaves_nothing_behind() {
    let stack = RunStack::start(&[]);
    let plan = SoakPlan {
        duration: Duration::from_secs(60),
        sample_every: Duration::from_secs(10),
        run_lanes: 1,
        only: Vec::new(),
    };
    let report = soak::run(&stack, &plan).await;
    report.print();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let ended = |status: &str| report.runs.get(status).copied().unwrap_or(0);
    assert!(ended("completed") >= 2, "{:?}", report.runs);
    assert_eq!(
        ended("completed") + ended("cancelled"),
        report.runs.values().sum::<usize>(),
        "every run completed or was cancelled: {:?}",
        report.runs
    );
    assert!(report.sandboxes >= 3, "{report:?}");
    assert!(report.refreshes >= 5, "{report:?}");
    assert!(report.tool_calls >= 100, "{report:?}");
    assert!(report.leftover_processes.is_empty(), "{report:?}");
    assert!(report.leftover_dirs.is_empty(), "{report:?}");
    assert!(report.leftover_cgroups.is_empty(), "{report:?}");
    // The memory curve was measured, and the daemon's own memory did not run away.
    let (first, last) = (
        &report.samples[0],
        &report.samples[report.samples.len() - 1],
    );
    assert!(report.samples.len() >= 6, "{:?}", report.samples);
    assert!(first.workerd > 0.0 && first.daemon > 0.0, "{first:?}");
    assert!(last.daemon < first.daemon + 64.0, "{:?}", report.samples);
}
