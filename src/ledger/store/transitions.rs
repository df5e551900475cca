//! Status changes and progress reports: the one place a run's status moves, and only along
//! `RunStatus::can_become`, so terminal statuses are final whoever reports late.

use super::*;
use crate::artifacts::Artifact;

pub(super) fn insert_transition(
    sql: &SqlStorage,
    run_id: &str,
    status: RunStatus,
    at: i64,
) -> Result<()> {
    sql.exec(
        "INSERT INTO run_transitions (run_id, status, at) VALUES (?, ?, ?)",
        vec![run_id.into(), status.as_str().into(), at.into()],
    )?;
    Ok(())
}

pub fn mark_dispatched(sql: &SqlStorage, run_id: &str, now: i64) -> Result<()> {
    sql.exec(
        "UPDATE runs SET dispatched_at = ? WHERE id = ?",
        vec![now.into(), run_id.into()],
    )?;
    Ok(())
}

/// Moves a run to `to` if its current status allows it; returns the status it ends up in and
/// whether anything changed. Terminal statuses are final; a run that ended elsewhere
/// (cancelled, timed out) with no outcome yet takes the one its driver reports late — what its
/// agent did until then — and keeps its status and error.
pub fn transition(
    sql: &SqlStorage,
    run_id: &str,
    to: RunStatus,
    error: Option<&RunError>,
    outcome: Option<&RunOutcome>,
    now: i64,
) -> Result<(RunStatus, bool)> {
    let current = get_status(sql, run_id)?;
    let outcome_json = outcome.map(serde_json::to_string).transpose()?;
    if !current.can_become(to) {
        if let (true, Some(json)) = (current.is_terminal(), outcome_json) {
            sql.exec(
                "UPDATE runs SET outcome = ?, updated_at = ? WHERE id = ? AND outcome IS NULL",
                vec![json.into(), now.into(), run_id.into()],
            )?;
            release_delivery(sql, run_id, now)?;
        }
        return Ok((current, false));
    }
    let (phase, message) = match final_progress(to, outcome, error) {
        Some((phase, message)) => (Some(phase.to_string()), Some(message)),
        None => (None, None),
    };
    if let Some(phase) = &phase {
        mark_phase(sql, run_id, phase, now)?;
    }
    sql.exec(
        "UPDATE runs SET status = ?, updated_at = ?, \
           started_at = CASE WHEN started_at IS NULL AND ? IN ('starting', 'running') THEN ? ELSE started_at END, \
           completed_at = CASE WHEN ? IN ('completed', 'failed', 'cancelled') THEN ? ELSE completed_at END, \
           error_code = COALESCE(?, error_code), error_message = COALESCE(?, error_message), \
           outcome = COALESCE(?, outcome), \
           phase = COALESCE(?, phase), progress_message = COALESCE(?, progress_message), \
           progress_at = CASE WHEN ? IS NULL THEN progress_at ELSE ? END \
         WHERE id = ?",
        vec![
            to.as_str().into(),
            now.into(),
            to.as_str().into(),
            now.into(),
            to.as_str().into(),
            now.into(),
            error.map(|e| e.code.as_str()).into(),
            error.map(|e| e.message.clone()).into(),
            outcome_json.into(),
            phase.clone().into(),
            message.into(),
            phase.into(),
            now.into(),
            run_id.into(),
        ],
    )?;
    if current != to {
        insert_transition(sql, run_id, to, now)?;
        if to.is_terminal() {
            open_delivery(sql, run_id, now)?;
        }
    }
    Ok((to, true))
}

/// Adds the tokens the credential proxy counted in one model call's answer to its run: `total`
/// is what budgets count, `usage` the same by kind (all zero when the proxy that counted them
/// did not tell kinds apart).
pub fn record_usage(sql: &SqlStorage, run_id: &str, total: u64, usage: &Tokens) -> Result<()> {
    let count = |n: u64| V::from(n.min(i64::MAX as u64) as i64);
    sql.exec(
        "UPDATE runs SET metered_tokens = metered_tokens + ?, metered_input = metered_input + ?, \
         metered_output = metered_output + ?, metered_reasoning = metered_reasoning + ?, \
         metered_cache_read = metered_cache_read + ?, \
         metered_cache_write = metered_cache_write + ?, model_calls = model_calls + 1 \
         WHERE id = ?",
        vec![
            count(total),
            count(usage.input),
            count(usage.output),
            count(usage.reasoning),
            count(usage.cache_read),
            count(usage.cache_write),
            run_id.into(),
        ],
    )?;
    Ok(())
}

/// Records progress on an active run (ignored once the run has ended); returns its status and
/// whether the report was recorded.
pub fn progress(
    sql: &SqlStorage,
    run_id: &str,
    phase: &str,
    message: &str,
    detail: Option<&ProgressDetail>,
    now: i64,
) -> Result<(RunStatus, bool)> {
    let run = get_status(sql, run_id)?;
    if run.is_terminal() {
        return Ok((run, false));
    }
    let detail = detail.map(serde_json::to_string).transpose()?;
    mark_phase(sql, run_id, phase, now)?;
    sql.exec(
        "UPDATE runs SET phase = ?, progress_message = ?, progress_at = ?, updated_at = ?, \
         progress_detail = COALESCE(?, progress_detail) WHERE id = ?",
        vec![
            phase.into(),
            message.into(),
            now.into(),
            now.into(),
            detail.into(),
            run_id.into(),
        ],
    )?;
    Ok((run, true))
}

/// An artifact the bucket refused at the run's end was stored after all (`stored`), or given
/// up: it leaves the run's pending list and, stored, shows as there.
pub fn settle_artifact(
    sql: &SqlStorage,
    run_id: &str,
    artifact: Artifact,
    stored: bool,
    now: i64,
) -> Result<()> {
    #[derive(Deserialize)]
    struct Row {
        outcome: Option<String>,
    }
    let row = sql
        .exec("SELECT outcome FROM runs WHERE id = ?", vec![run_id.into()])?
        .to_array::<Row>()?
        .pop()
        .ok_or_else(|| Error::not_found(format!("run {run_id} not found")))?;
    let Some(json) = row.outcome else {
        return Ok(());
    };
    let mut outcome: RunOutcome = serde_json::from_str(&json)?;
    outcome.settle(artifact, stored);
    sql.exec(
        "UPDATE runs SET outcome = ?, updated_at = ? WHERE id = ?",
        vec![
            serde_json::to_string(&outcome)?.into(),
            now.into(),
            run_id.into(),
        ],
    )?;
    Ok(())
}

pub(super) fn get_status(sql: &SqlStorage, run_id: &str) -> Result<RunStatus> {
    #[derive(Deserialize)]
    struct Row {
        status: String,
    }
    let row = sql
        .exec("SELECT status FROM runs WHERE id = ?", vec![run_id.into()])?
        .to_array::<Row>()?
        .pop()
        .ok_or_else(|| Error::not_found(format!("run {run_id} not found")))?;
    RunStatus::parse(&row.status)
        .ok_or_else(|| Error::internal(format!("run {run_id} has an unknown status")))
}

/// Records that a run entered `phase` at `now`, unless it is in that phase already (call before
/// the run's `phase` column changes).
pub fn mark_phase(sql: &SqlStorage, run_id: &str, phase: &str, now: i64) -> Result<()> {
    sql.exec(
        "INSERT INTO run_phases (run_id, phase, at) SELECT ?, ?, ? \
         WHERE NOT EXISTS (SELECT 1 FROM runs WHERE id = ? AND phase IS ?)",
        vec![
            run_id.into(),
            phase.into(),
            now.into(),
            run_id.into(),
            phase.into(),
        ],
    )?;
    Ok(())
}
