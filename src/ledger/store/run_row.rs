//! A run as its row reads (`RUN_COLUMNS`), turned into the record the rest of handoff uses.

use crate::error::{Error, Result};
use crate::runs::{Progress, RunError, RunErrorCode, RunOutcome, RunRecord, RunStatus, Tokens};
use crate::workers::WorkerRunInfo;
use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct RunRow {
    seq: i64,
    id: String,
    session_id: String,
    created_by: String,
    status: String,
    task: String,
    title: String,
    model: Option<String>,
    repository: Option<String>,
    branch: Option<String>,
    created_at: i64,
    started_at: Option<i64>,
    completed_at: Option<i64>,
    updated_at: i64,
    phase: Option<String>,
    progress_message: Option<String>,
    progress_at: Option<i64>,
    outcome: Option<String>,
    error_code: Option<String>,
    error_message: Option<String>,
    origin: Option<String>,
    progress_detail: Option<String>,
    worker: Option<String>,
    approval: Option<String>,
    live_log: Option<String>,
    budget: Option<String>,
    metered_tokens: Option<i64>,
    metered_input: Option<i64>,
    metered_output: Option<i64>,
    metered_reasoning: Option<i64>,
    metered_cache_read: Option<i64>,
    metered_cache_write: Option<i64>,
    model_calls: Option<i64>,
    callback_url: Option<String>,
    /// `[[status, at], …]` in order, when the query asks for it (`get_run`).
    #[serde(default)]
    pub(super) transitions_json: Option<String>,
    /// `[[phase, at], …]` in order, likewise.
    #[serde(default)]
    pub(super) phases_json: Option<String>,
}

impl RunRow {
    pub(super) fn into_record(self) -> Result<(i64, RunRecord)> {
        let status = RunStatus::parse(&self.status).ok_or_else(|| {
            Error::internal(format!(
                "run {} has unknown status {}",
                self.id, self.status
            ))
        })?;
        let detail = self
            .progress_detail
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok());
        let progress = match (self.phase, self.progress_at) {
            (Some(phase), Some(updated_at)) => Some(Progress {
                phase,
                message: self.progress_message.unwrap_or_default(),
                updated_at,
                detail,
            }),
            _ => None,
        };
        let mut outcome = match self.outcome {
            Some(json) => Some(serde_json::from_str::<RunOutcome>(&json)?),
            None => None,
        };
        let worker = match self.worker {
            Some(json) => Some(WorkerRunInfo {
                spec: serde_json::from_str(&json)?,
                approval: match self.approval {
                    Some(a) => Some(serde_json::from_str(&a)?),
                    None => None,
                },
                live_log: self.live_log,
                outcome: outcome.as_mut().and_then(|o| o.worker.take()),
            }),
            None => None,
        };
        let error = self.error_code.map(|code| RunError {
            // Every stored code comes from the registry; an unknown one reads as a failure.
            code: code.parse().unwrap_or(RunErrorCode::RunFailed),
            message: self.error_message.unwrap_or_default(),
        });
        let record = RunRecord {
            id: self.id,
            session_id: self.session_id,
            created_by: self.created_by,
            status,
            task: self.task,
            title: self.title,
            model: self.model,
            repository: self.repository,
            branch: self.branch,
            created_at: self.created_at,
            started_at: self.started_at,
            completed_at: self.completed_at,
            updated_at: self.updated_at,
            origin: self.origin,
            progress,
            outcome,
            error,
            transitions: Vec::new(),
            worker,
            phases: Vec::new(),
            budget: self
                .budget
                .as_deref()
                .and_then(|json| serde_json::from_str(json).ok()),
            metered_tokens: count(self.metered_tokens),
            metered: Tokens {
                input: count(self.metered_input),
                output: count(self.metered_output),
                reasoning: count(self.metered_reasoning),
                cache_read: count(self.metered_cache_read),
                cache_write: count(self.metered_cache_write),
            },
            model_calls: count(self.model_calls),
            callback: self.callback_url.map(|url| crate::callbacks::Callback {
                url,
                delivery: None,
            }),
        };
        Ok((self.seq, record))
    }
}

/// A stored count (never negative; absent in rows older than its column).
fn count(stored: Option<i64>) -> u64 {
    stored.unwrap_or(0).max(0) as u64
}
