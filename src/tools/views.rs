//! Tool outputs: the `structuredContent` shapes (their JSON Schemas are the tools'
//! `outputSchema`), built from ledger records. Times are RFC 3339 UTC strings.

pub use crate::run_views::*;
use crate::runs::{RunRecord, RunStatus, SessionRecord};
use crate::time::rfc3339;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTaskOutput {
    /// Id of the run; pass it to opencode_get_result.
    pub run_id: String,
    /// The work session the run belongs to; pass it as sessionId to continue there.
    pub session_id: String,
    pub status: RunStatus,
    /// Signed link to a page that shows the run live (absent if links are not configured).
    pub web_ui_url: Option<String>,
    /// True when an earlier call with the same idempotencyKey started this run.
    pub deduplicated: bool,
}

/// What a wait saw: whether the run moved on, how long it waited, and the run as it is now.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitOutput {
    /// True when the run's status or progress changed (or, with untilDone, it ended) while
    /// waiting; false when the wait timed out, or the run had already ended.
    pub changed: bool,
    pub waited_ms: u64,
    pub run: RunView,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummaryView {
    pub run_id: String,
    pub session_id: String,
    pub status: RunStatus,
    pub title: String,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub phase: Option<String>,
    pub pull_request_url: Option<String>,
    pub error_code: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListRunsOutput {
    pub runs: Vec<RunSummaryView>,
    /// Pass as cursor to get the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelRunOutput {
    pub run_id: String,
    pub status: RunStatus,
    /// True when this call cancelled the run; false when it had already ended.
    pub cancelled: bool,
    pub message: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub session_id: String,
    pub created_at: String,
    pub last_run_at: String,
    pub run_count: i64,
    pub last_run_id: Option<String>,
    pub last_run_status: Option<RunStatus>,
    pub last_run_title: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsOutput {
    pub sessions: Vec<SessionView>,
    /// Pass as cursor to get the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

impl From<RunRecord> for RunSummaryView {
    fn from(run: RunRecord) -> Self {
        RunSummaryView {
            run_id: run.id,
            session_id: run.session_id,
            status: run.status,
            title: run.title,
            repository: run.repository,
            branch: run.branch,
            created_at: rfc3339(run.created_at),
            completed_at: run.completed_at.map(rfc3339),
            phase: run.progress.map(|p| p.phase),
            pull_request_url: run.outcome.and_then(|o| o.pull_request_url),
            error_code: run.error.map(|e| e.code.as_str().to_string()),
        }
    }
}

impl From<SessionRecord> for SessionView {
    fn from(s: SessionRecord) -> Self {
        SessionView {
            session_id: s.id,
            created_at: rfc3339(s.created_at),
            last_run_at: rfc3339(s.last_run_at),
            run_count: s.run_count,
            last_run_id: s.last_run_id,
            last_run_status: s.last_run_status,
            last_run_title: s.last_run_title,
        }
    }
}
