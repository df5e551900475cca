//! `cargo xtask load`: 200 `opencode_run_task` calls at once against a fresh local stack with
//! the scripted model, spread over 8 sessions; half carry idempotency keys and every fourth of
//! those is cut off after sending and sent again. Prints runs lost and duplicated (targets 0),
//! acknowledgement p50/p99 and runs per minute. `HANDOFF_LOAD_CALLS` / `HANDOFF_LOAD_SESSIONS`
//! change the size.

use handoff_tests::load::{self, LoadPlan};
use handoff_tests::stack::RunStack;
use std::time::Duration;

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub async fn run() {
    let stack = RunStack::start(&[]);
    let plan = LoadPlan {
        calls: number("HANDOFF_LOAD_CALLS", 200),
        sessions: number("HANDOFF_LOAD_SESSIONS", 8),
        cut_every: 4,
        deadline: Duration::from_secs(1800),
    };
    println!(
        "load: {} calls over {} sessions, against the real stack (workerd, daemon, OpenCode, \
         scripted model)",
        plan.calls, plan.sessions
    );
    let report = load::run(&stack.url(), &plan).await;
    report.print();
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "load: target lost 0: {}; duplicates 0: {}; every run ended: {}",
        verdict(report.lost == 0),
        verdict(report.duplicates == 0 && report.unanswered_runs == 0),
        verdict(
            report
                .by_status
                .keys()
                .all(|s| matches!(s.as_str(), "completed" | "failed" | "cancelled"))
        )
    );
}
