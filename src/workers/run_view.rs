//! A worker run as its callers see it: the `structuredContent` of `workers_run_get`, also the
//! body of a worker run's completion callback. Built from ledger records; times are RFC 3339.

use crate::run_views::{phase_views, BudgetView, CallbackView, PhaseView};
use crate::runs::{RunRecord, RunStatus, Tokens};
use crate::time::rfc3339;
use crate::workers::{Approval, OutputFile, ToolCall};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputView {
    /// Path under outputs/.
    pub path: String,
    pub size: u64,
    pub media_type: String,
    pub sha256: String,
    /// Signed download link (7 days).
    pub download_url: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogsView {
    pub stdout: String,
    pub stderr: String,
    /// True when the middle was cut (head and tail kept).
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    pub label: String,
    /// pending, approved, rejected or expired.
    pub decision: String,
    /// What the worker proposes to do.
    pub proposal: String,
    pub requested_at: String,
    pub expires_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
}

impl From<Approval> for ApprovalView {
    fn from(a: Approval) -> Self {
        ApprovalView {
            label: a.label,
            decision: a.decision.as_str().to_string(),
            proposal: a.proposal,
            requested_at: rfc3339(a.requested_at),
            expires_at: rfc3339(a.expires_at),
            decided_by: a.decided_by,
            decided_at: a.decided_at.map(rfc3339),
            reason: a.reason,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunErrorView {
    /// worker_failed, output_invalid, timed_out, limit_exceeded, missing_secret, rejected,
    /// approval_expired, interrupted, cancelled, sandbox_unavailable, sandbox_lost, agent_failed
    /// or run_failed.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRunView {
    pub run_id: String,
    /// The run's own sandbox (removed when the run ends).
    pub sandbox_id: String,
    pub worker: String,
    pub version: u32,
    /// manual, schedule, webhook or replay.
    pub trigger: String,
    pub status: RunStatus,
    pub inputs: Map<String, Value>,
    /// Names of the files given for file inputs.
    pub input_files: Vec<String>,
    /// The run this one replays.
    pub replay_of: Option<String>,
    /// For a scheduled run: the fire time it is for.
    pub due_at: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    /// What it is doing now.
    pub phase: Option<String>,
    pub message: Option<String>,
    /// The last lines of its log while it runs (secrets redacted).
    pub live_log: Option<String>,
    pub approval: Option<ApprovalView>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// result.json (or an agent's answer).
    pub result: Option<Value>,
    pub outputs: Vec<OutputView>,
    /// The whole kept log, when asked for and stored.
    pub logs: Option<LogsView>,
    /// The end of the log.
    pub log_tail: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub attempts: Option<u32>,
    /// Agent mode: tokens the agent used (OpenCode's count, or the credential proxy's when that
    /// is larger).
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    pub error: Option<RunErrorView>,
    /// Every phase with its duration, oldest first.
    pub phases: Vec<PhaseView>,
    /// The run's budget and what it has spent so far (absent when it has none).
    pub budget: Option<BudgetView>,
    /// The completion callback and its delivery attempts (absent when none was asked for).
    pub callback: Option<CallbackView>,
    /// Signed link to the run's page.
    pub web_ui_url: Option<String>,
}

/// A worker run's view at `now` without links, logs or download links (the handlers add
/// those); `None` for a coding run.
pub fn run_view(run: RunRecord, now: i64) -> Option<WorkerRunView> {
    let budget = BudgetView::of(&run, now);
    let callback = run.callback.clone().map(CallbackView::from);
    let (tokens, cost) = match &run.outcome {
        Some(o) => (run.tokens_used(o.tokens.as_ref()), o.cost_usd),
        None => (None, None),
    };
    let worker = run.worker?;
    let outcome = worker.outcome.clone().unwrap_or_default();
    let ended = run.status.is_terminal();
    let spec = worker.spec;
    Some(WorkerRunView {
        sandbox_id: crate::sandboxes::of_session(&run.session_id),
        run_id: run.id,
        worker: spec.worker,
        version: spec.version,
        trigger: spec.trigger.as_str().to_string(),
        status: run.status,
        inputs: spec.inputs,
        input_files: spec.files.into_iter().map(|f| f.name).collect(),
        replay_of: spec.replay_of,
        due_at: spec.due_at.map(rfc3339),
        created_at: rfc3339(run.created_at),
        started_at: run.started_at.map(rfc3339),
        completed_at: run.completed_at.map(rfc3339),
        phase: run.progress.as_ref().map(|p| p.phase.clone()),
        message: run.progress.map(|p| p.message),
        live_log: if ended { None } else { worker.live_log },
        approval: worker.approval.map(Into::into),
        exit_code: outcome.exit_code,
        duration_ms: ended.then_some(outcome.duration_ms),
        result: outcome.result,
        outputs: outcome
            .outputs
            .into_iter()
            .map(|o: OutputFile| OutputView {
                path: o.path,
                size: o.size,
                media_type: o.media_type,
                sha256: o.sha256,
                download_url: None,
            })
            .collect(),
        logs: None,
        log_tail: ended.then_some(outcome.log_tail),
        tool_calls: outcome.tool_calls,
        attempts: ended.then_some(outcome.attempts),
        tokens,
        cost_usd: cost,
        error: run.error.map(|e| RunErrorView {
            code: e.code.as_str().to_string(),
            message: e.message,
        }),
        phases: phase_views(&run.phases),
        budget,
        callback,
        web_ui_url: None,
    })
}
