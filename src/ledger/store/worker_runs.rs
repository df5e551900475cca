//! Worker runs in the ledger: listing them apart from coding runs, their live log, and the
//! approval gate (the proposal recorded, then one decision — stamped here, never by the worker).

use super::*;
use crate::workers::{Approval, Decision};

/// A page of worker runs (of one worker, or all), newest first, optionally by status.
pub fn list_worker_runs(
    sql: &SqlStorage,
    worker: Option<&str>,
    status: Option<RunStatus>,
    before: Option<i64>,
    limit: u32,
) -> Result<(Vec<RunRecord>, Option<i64>)> {
    let filter = worker.map(|w| ("worker_name = ?", w));
    page_of_runs(
        sql,
        "worker_name IS NOT NULL",
        filter,
        status,
        before,
        limit,
    )
}

/// Replaces a running worker run's live log (counts as progress); ignored once it has ended.
pub fn set_live_log(sql: &SqlStorage, run_id: &str, text: &str, now: i64) -> Result<bool> {
    if get_status(sql, run_id)?.is_terminal() {
        return Ok(false);
    }
    sql.exec(
        "UPDATE runs SET live_log = ?, updated_at = ? WHERE id = ?",
        vec![text.into(), now.into(), run_id.into()],
    )?;
    Ok(true)
}

/// Stops a running worker run at its approval gate with its proposal. Returns whether it did
/// (false when the run is no longer running).
pub fn await_approval(
    sql: &SqlStorage,
    run_id: &str,
    approval: &Approval,
    now: i64,
) -> Result<bool> {
    if get_status(sql, run_id)? != RunStatus::Running {
        return Ok(false);
    }
    mark_phase(sql, run_id, "pending_approval", now)?;
    sql.exec(
        "UPDATE runs SET approval = ?, phase = 'pending_approval', progress_message = ?, \
         progress_at = ? WHERE id = ?",
        vec![
            serde_json::to_string(approval)?.into(),
            format!("waiting for approval: {}", approval.label).into(),
            now.into(),
            run_id.into(),
        ],
    )?;
    let (_, applied) = transition(sql, run_id, RunStatus::PendingApproval, None, None, now)?;
    Ok(applied)
}

/// Records the one decision on a pending approval and moves the run on: approved → running,
/// rejected or expired → cancelled (nothing done). A second decision is a conflict.
pub fn decide(
    sql: &SqlStorage,
    run_id: &str,
    decision: Decision,
    by: &str,
    reason: Option<&str>,
    now: i64,
) -> Result<RunRecord> {
    let run =
        get_run(sql, run_id)?.ok_or_else(|| Error::not_found(format!("run {run_id} not found")))?;
    let mut approval = run
        .worker
        .as_ref()
        .and_then(|w| w.approval.clone())
        .ok_or_else(|| {
            Error::conflict(format!(
                "run {run_id} is not waiting for approval (it is {})",
                run.status.as_str()
            ))
        })?;
    if approval.decision != Decision::Pending || run.status != RunStatus::PendingApproval {
        let when = approval
            .decided_at
            .map(|t| format!(" at {}", crate::time::rfc3339(t)))
            .unwrap_or_default();
        return Err(Error::conflict(format!(
            "run {run_id} was already decided: {}{when}; a decision is final",
            approval.decision.as_str()
        )));
    }
    approval.decision = decision;
    approval.decided_by = Some(by.to_string());
    approval.decided_at = Some(now);
    approval.reason = reason.map(str::to_string);
    sql.exec(
        "UPDATE runs SET approval = ? WHERE id = ?",
        vec![serde_json::to_string(&approval)?.into(), run_id.into()],
    )?;
    let (to, error) = match decision {
        Decision::Approved => (RunStatus::Running, None),
        Decision::Rejected => (
            RunStatus::Cancelled,
            Some(RunError {
                code: RunErrorCode::Rejected,
                message: format!(
                    "rejected by {by}{}; the worker did nothing beyond its proposal",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ),
            }),
        ),
        Decision::Expired | Decision::Pending => (
            RunStatus::Cancelled,
            Some(RunError {
                code: RunErrorCode::ApprovalExpired,
                message: "nobody approved the proposal in time; the worker did nothing beyond it"
                    .into(),
            }),
        ),
    };
    transition(sql, run_id, to, error.as_ref(), None, now)?;
    get_run(sql, run_id)?.ok_or_else(|| Error::not_found(format!("run {run_id} not found")))
}
