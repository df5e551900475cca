//! Nothing accepted is lost under load: many `opencode_run_task` calls at once (the short
//! version of `cargo xtask load`), half with idempotency keys and some of those cut off after
//! sending and sent again; every run ends, no key gets two runs, no run goes missing.

use handoff_tests::load::{self, LoadPlan};
use handoff_tests::stack;
use std::time::Duration;

#[tokio::test]
async fn concurrent_run_calls_lose_and_duplicate_nothing() {
    let stack = stack::shared();
    let plan = LoadPlan {
        calls: 24,
        sessions: 4,
        cut_every: 2,
        deadline: Duration::from_secs(400),
    };
    let report = load::run(&stack.url(), &plan).await;
    report.print();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.cut_off > 0, "no call was cut off: {report:?}");
    // Some cut-off attempts reached the server: their retries got the run they had started.
    assert!(report.deduplicated > 0, "{report:?}");
    assert_eq!(report.runs, plan.calls, "one run per call: {report:?}");
    assert_eq!(report.lost, 0, "{report:?}");
    assert_eq!(report.duplicates, 0, "{report:?}");
    assert_eq!(report.unanswered_runs, 0, "{report:?}");
    assert_eq!(
        report.by_status.get("completed"),
        Some(&plan.calls),
        "{report:?}"
    );
}
