//! Outputs of the `workers_*` tools (their JSON Schemas are the tools' `outputSchema`). Times are
//! RFC 3339 UTC strings; nothing here ever carries a secret value.

use crate::runs::{RunRecord, RunStatus, Tokens};
use crate::time::rfc3339;
use crate::workers::{Approval, OutputFile, ToolCall, VersionRecord, WorkerRecord};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSummary {
    pub name: String,
    pub title: String,
    pub description: String,
    /// python3, node, sh or skill.
    pub runtime: String,
    pub current_version: u32,
    pub versions: u32,
    pub created_at: String,
    pub updated_at: String,
    /// The schedule's next fire times.
    pub next_fires: Vec<String>,
    pub last_fired_at: Option<String>,
    pub takes_webhooks: bool,
}

impl From<WorkerRecord> for WorkerSummary {
    fn from(w: WorkerRecord) -> Self {
        WorkerSummary {
            name: w.name,
            title: w.title,
            description: w.description,
            runtime: w.runtime.as_str().to_string(),
            current_version: w.current_version,
            versions: w.versions,
            created_at: rfc3339(w.created_at),
            updated_at: rfc3339(w.updated_at),
            next_fires: w.next_fires.into_iter().map(rfc3339).collect(),
            last_fired_at: w.last_fired_at.map(rfc3339),
            takes_webhooks: w.webhook_path.is_some(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkersListOutput {
    pub workers: Vec<WorkerSummary>,
    /// Pass as cursor for the next page; absent on the last one.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    /// POST here (keep it secret: the URL itself is half the credential).
    pub url: String,
    /// HMAC-SHA256 signing secret: sign as GitHub does (X-Hub-Signature-256: sha256=(hex of
    /// the body), with X-GitHub-Delivery) or with X-Handoff-Timestamp and
    /// X-Handoff-Signature: sha256=(hex of "{timestamp}.{body}").
    pub secret: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    pub cron: String,
    pub timezone: String,
    /// The pattern in words.
    pub description: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerView {
    #[serde(flatten)]
    pub summary: WorkerSummary,
    pub schedule: Option<ScheduleView>,
    pub webhook: Option<WebhookView>,
    /// The current version's worker.yml, normalized (defaults filled in).
    pub manifest: Map<String, Value>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionView {
    pub version: u32,
    /// inline, repository <url>@<ref>:<path>, or rollback to vN.
    pub source: String,
    /// SHA-256 of the folder.
    pub digest: String,
    pub created_by: String,
    pub created_at: String,
    pub current: bool,
}

impl VersionView {
    pub fn of(v: &VersionRecord, current: u32) -> Self {
        VersionView {
            version: v.version,
            source: v.source.clone(),
            digest: v.digest.clone(),
            created_by: v.created_by.clone(),
            created_at: rfc3339(v.created_at),
            current: v.version == current,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeployOutput {
    pub worker: WorkerSummary,
    pub version: VersionView,
    /// False when the folder equals the current version (nothing new was stored).
    pub created: bool,
    pub webhook: Option<WebhookView>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionsOutput {
    pub versions: Vec<VersionView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoneOutput {
    /// What happened, in words.
    pub message: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartedOutput {
    /// Pass to workers_run_get.
    pub run_id: String,
    pub worker: String,
    pub version: u32,
    pub status: RunStatus,
    /// Signed link to the run's page.
    pub web_ui_url: Option<String>,
    /// True when an earlier call with the same idempotencyKey started this run.
    pub deduplicated: bool,
}

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
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    pub error: Option<RunErrorView>,
    /// Every phase with its duration, oldest first.
    pub phases: Vec<super::views::PhaseView>,
    /// Signed link to the run's page.
    pub web_ui_url: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRunsOutput {
    pub runs: Vec<WorkerRunView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretView {
    pub name: String,
    /// The worker it is for; absent: every worker that declares it.
    pub worker: Option<String>,
    pub updated_at: String,
    pub updated_by: String,
    /// Workers whose current version declares it.
    pub used_by: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretsOutput {
    pub secrets: Vec<SecretView>,
}

/// A worker run's view without links, logs or download links (the handlers add those);
/// `None` for a coding run.
pub fn run_view(run: RunRecord) -> Option<WorkerRunView> {
    let worker = run.worker?;
    let outcome = worker.outcome.clone().unwrap_or_default();
    let ended = run.status.is_terminal();
    let spec = worker.spec;
    let (tokens, cost) = match &run.outcome {
        Some(o) => (o.tokens.clone(), o.cost_usd),
        None => (None, None),
    };
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
        phases: super::views::phase_views(&run.phases),
        web_ui_url: None,
    })
}
