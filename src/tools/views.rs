//! Tool outputs: the `structuredContent` shapes (their JSON Schemas are the tools'
//! `outputSchema`), built from ledger records. Times are RFC 3339 UTC strings.

use crate::runs::{Commit, RunRecord, RunStatus, SessionRecord, Step, Tokens};
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

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    /// What the run is doing: preparing_sandbox, cloning, starting_agent, working, pushing,
    /// opening_pr; then done, failed or cancelled (where it was when it ended is in `phases`).
    pub phase: String,
    pub message: String,
    pub updated_at: String,
    /// Agent steps (tool calls) so far.
    pub steps: u32,
    /// The tool the agent is using right now.
    pub current_tool: Option<String>,
    pub tokens: Tokens,
    pub cost_usd: f64,
    /// The latest steps, oldest first.
    pub recent_steps: Vec<Step>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorView {
    /// Machine-readable reason: sandbox_unavailable, sandbox_lost, clone_failed, agent_failed,
    /// push_failed, pr_failed, run_failed, timed_out or cancelled.
    pub code: String,
    /// What happened and what to do next.
    pub message: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultView {
    /// The agent's final summary of what it did.
    pub summary: Option<String>,
    pub pull_request_url: Option<String>,
    /// The branch the work was pushed to.
    pub branch: Option<String>,
    pub commits: Vec<Commit>,
    pub changed_files: Vec<String>,
    /// `git diff --shortstat` of the changes.
    pub diffstat: Option<String>,
    /// Build and test by-products the agent left that were kept out of the commit
    /// (`__pycache__/`, `*.pyc`, `node_modules/`, `.DS_Store`, `target/`, …).
    pub left_out: Vec<String>,
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    /// Signed link to the full agent transcript (JSON), when one was stored.
    pub transcript_url: Option<String>,
    /// Why the run failed or was cancelled.
    pub error: Option<ErrorView>,
}

/// A phase the run went through.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseView {
    /// queued, preparing_sandbox, cloning, starting_agent, working, pushing, opening_pr (worker
    /// runs: staging, running, pending_approval, collecting), then done, failed or cancelled.
    pub phase: String,
    pub started_at: String,
    /// How long it lasted (absent for the phase the run is in, or ended on).
    pub duration_ms: Option<u64>,
}

/// Phases with how long each lasted (until the next began).
pub fn phase_views(marks: &[crate::runs::PhaseMark]) -> Vec<PhaseView> {
    marks
        .iter()
        .enumerate()
        .map(|(i, mark)| PhaseView {
            phase: mark.phase.clone(),
            started_at: rfc3339(mark.at),
            duration_ms: marks
                .get(i + 1)
                .map(|next| (next.at - mark.at).max(0) as u64),
        })
        .collect()
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TransitionView {
    pub status: RunStatus,
    pub at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub run_id: String,
    pub session_id: String,
    pub status: RunStatus,
    pub task: String,
    pub title: String,
    pub model: Option<String>,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub created_at: String,
    /// When the run left the queue.
    pub started_at: Option<String>,
    /// When the run reached its terminal status.
    pub completed_at: Option<String>,
    pub progress: Option<ProgressView>,
    /// Present once the run has ended.
    pub result: Option<ResultView>,
    /// Every status change, oldest first.
    pub transitions: Vec<TransitionView>,
    /// Every phase with its duration, oldest first.
    pub phases: Vec<PhaseView>,
    pub web_ui_url: Option<String>,
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

impl RunView {
    pub fn new(run: RunRecord, web_ui_url: Option<String>) -> Self {
        let result = run.status.is_terminal().then(|| {
            let outcome = run.outcome.clone().unwrap_or_default();
            ResultView {
                summary: outcome.summary,
                pull_request_url: outcome.pull_request_url,
                branch: outcome.branch,
                commits: outcome.commits,
                changed_files: outcome.changed_files,
                diffstat: outcome.diffstat,
                left_out: outcome.left_out,
                tokens: outcome.tokens,
                cost_usd: outcome.cost_usd,
                transcript_url: outcome
                    .transcript
                    .then(|| web_ui_url.as_deref().map(transcript_url))
                    .flatten(),
                error: run.error.clone().map(|e| ErrorView {
                    code: e.code.as_str().to_string(),
                    message: e.message,
                }),
            }
        });
        RunView {
            run_id: run.id,
            session_id: run.session_id,
            status: run.status,
            task: run.task,
            title: run.title,
            model: run.model,
            repository: run.repository,
            branch: run.branch,
            created_at: rfc3339(run.created_at),
            started_at: run.started_at.map(rfc3339),
            completed_at: run.completed_at.map(rfc3339),
            progress: run.progress.map(|p| {
                let detail = p.detail.unwrap_or_default();
                ProgressView {
                    phase: p.phase,
                    message: p.message,
                    updated_at: rfc3339(p.updated_at),
                    steps: detail.steps,
                    current_tool: detail.current_tool,
                    tokens: detail.tokens,
                    cost_usd: detail.cost_usd,
                    recent_steps: detail.recent,
                }
            }),
            result,
            phases: phase_views(&run.phases),
            transitions: run
                .transitions
                .into_iter()
                .map(|t| TransitionView {
                    status: t.status,
                    at: rfc3339(t.at),
                })
                .collect(),
            web_ui_url,
        }
    }
}

/// The transcript link of a run page link (same token, `/transcript` after the run).
pub fn transcript_url(page: &str) -> String {
    match page.split_once('?') {
        Some((path, query)) => format!("{path}/transcript?{query}"),
        None => format!("{page}/transcript"),
    }
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
