//! `opencode_wait`: one tool call that follows a run for up to 50 seconds, so a client without
//! MCP tasks (a phone, say) polls far less. It waits inside the ledger (`await_run`), which
//! answers as soon as the run is written (or, for `untilDone`, ends), at the latest after
//! [`SLICE_MS`]; it returns as soon as the run moved on, and between slices reports what it
//! sees as progress. One ledger call per write of the run or per slice, not one a second.

use super::params::{check_id, WaitParams};
use super::runs::{fetch_run, not_found_hint, read_only, view};
use super::views::WaitOutput;
use super::{Ctx, ToolHandler};
use crate::error::Result;
use crate::ids;
use crate::ledger::api::{AwaitRun, MAX_AWAIT_MS};
use crate::runs::RunRecord;
use crate::time::now_ms;
use rmcp::model::ToolAnnotations;

pub struct Wait;

/// The longest the ledger is asked to wait at once: at least this often the wait reports progress.
const SLICE_MS: u32 = 5_000;
const _: () = assert!(SLICE_MS <= MAX_AWAIT_MS);
/// Less time than this left and the wait ends rather than asking the ledger again.
const MIN_SLICE_MS: u64 = 100;

/// What counts as the run moving on: its status, phase, progress message or step count. (The
/// driver repeats an unchanged progress line now and then to feed the watchdog; that is no change.)
#[derive(Debug, PartialEq, Eq)]
struct Fingerprint {
    status: crate::runs::RunStatus,
    phase: Option<String>,
    message: Option<String>,
    steps: Option<u32>,
}

impl Fingerprint {
    fn of(run: &RunRecord) -> Self {
        let progress = run.progress.as_ref();
        Fingerprint {
            status: run.status,
            phase: progress.map(|p| p.phase.clone()),
            message: progress.map(|p| p.message.clone()),
            steps: progress.and_then(|p| p.detail.as_ref()).map(|d| d.steps),
        }
    }
}

/// Whether a wait that began at `first` is over at `now`.
fn moved_on(first: &Fingerprint, now: &RunRecord, until_done: bool) -> bool {
    if until_done {
        now.status.is_terminal()
    } else {
        now.status.is_terminal() || Fingerprint::of(now) != *first
    }
}

impl ToolHandler for Wait {
    const NAME: &'static str = "opencode_wait";
    const TITLE: &'static str = "Wait for a run to move on";
    type Params = WaitParams;
    type Output = WaitOutput;

    fn annotations() -> ToolAnnotations {
        read_only()
    }

    async fn run(ctx: &Ctx<'_>, params: WaitParams) -> Result<WaitOutput> {
        check_id("runId", ids::RUN, &params.run_id)?;
        let timeout_ms = u64::from(params.timeout_secs()?) * 1000;
        let until_done = params.until_done.unwrap_or(false);
        let started = now_ms();
        let mut run = fetch_run(ctx, &params.run_id).await?;
        let first = Fingerprint::of(&run);
        let mut changed = false;
        if !run.status.is_terminal() {
            loop {
                let waited = (now_ms() - started).max(0) as u64;
                let left = timeout_ms.saturating_sub(waited);
                if left < MIN_SLICE_MS {
                    break;
                }
                ctx.report(&waiting_line(&run, waited));
                let op = AwaitRun {
                    run_id: params.run_id.clone(),
                    after: run.updated_at,
                    wait_ms: left.min(u64::from(SLICE_MS)) as u32,
                    until_terminal: until_done,
                };
                run = ctx.ledger.call(op).await.map_err(not_found_hint)?;
                if moved_on(&first, &run, until_done) {
                    changed = true;
                    break;
                }
            }
        }
        Ok(WaitOutput {
            changed,
            waited_ms: (now_ms() - started).max(0) as u64,
            run: view(ctx, run),
        })
    }

    fn summary(out: &WaitOutput) -> String {
        let run = &out.run;
        let progress = run
            .progress
            .as_ref()
            .map(|p| format!(" ({}: {})", p.phase, p.message))
            .unwrap_or_default();
        let verdict = if out.changed {
            "moved on"
        } else if run.status.is_terminal() {
            "has ended"
        } else {
            "has not changed; call opencode_wait again to keep waiting"
        };
        format!(
            "Run {} is {}{progress}: it {verdict} after {} s.",
            run.run_id,
            run.status.as_str(),
            out.waited_ms / 1000
        )
    }
}

/// The progress line while waiting.
fn waiting_line(run: &RunRecord, waited_ms: u64) -> String {
    let doing = run
        .progress
        .as_ref()
        .map(|p| format!("{}: {}", p.phase, p.message))
        .unwrap_or_else(|| run.status.as_str().to_string());
    format!("waited {} s; run {}", waited_ms / 1000, doing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{Progress, RunStatus};

    fn run(status: RunStatus, message: &str) -> RunRecord {
        let mut run: RunRecord = serde_json::from_value(serde_json::json!({
            "id": "run_x", "session_id": "ses_x", "created_by": "t", "status": "running",
            "task": "t", "title": "t", "model": null, "repository": null, "branch": null,
            "created_at": 0, "updated_at": 0, "started_at": null, "completed_at": null, "origin": null,
            "progress": null, "outcome": null, "error": null, "transitions": []
        }))
        .expect("a run record");
        run.status = status;
        run.progress = Some(Progress {
            phase: "working".into(),
            message: message.into(),
            updated_at: 1,
            detail: None,
        });
        run
    }

    #[test]
    fn only_a_real_change_ends_a_wait() {
        let first = Fingerprint::of(&run(RunStatus::Running, "thinking"));
        let mut same = run(RunStatus::Running, "thinking");
        if let Some(p) = same.progress.as_mut() {
            // The driver rewrote the same line later: not a change.
            p.updated_at = 99;
        }
        assert!(!moved_on(&first, &same, false));
        assert!(moved_on(
            &first,
            &run(RunStatus::Running, "step 1: bash ls"),
            false
        ));
        assert!(moved_on(&first, &run(RunStatus::Completed, "done"), false));
        // untilDone waits through progress, not through the end.
        assert!(!moved_on(
            &first,
            &run(RunStatus::Running, "step 1: bash ls"),
            true
        ));
        assert!(moved_on(&first, &run(RunStatus::Failed, "failed"), true));
    }
}
