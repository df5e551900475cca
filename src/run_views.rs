//! What a run looks like to its callers: the `structuredContent` of `opencode_get_result` (its
//! JSON Schema is the tool's `outputSchema`), also the body of a completion callback and what
//! the run page reads. Built from ledger records; times are RFC 3339 UTC strings.

use crate::budget::{Budget, Spend};
use crate::callbacks::{Callback, DeliveryState};
use crate::runs::{Commit, RunRecord, RunStatus, Step, Tokens};
use crate::time::rfc3339;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    /// What the run is doing: preparing_sandbox, cloning, starting_agent, working
    /// (resuming_agent while a stopped agent is started again), pushing, opening_pr; then
    /// done, failed or cancelled (where it was when it ended is in `phases`).
    pub phase: String,
    pub message: String,
    pub updated_at: String,
    /// Agent steps (tool calls) so far.
    pub steps: u32,
    /// The tool the agent is using right now.
    pub current_tool: Option<String>,
    /// Tokens used so far: OpenCode's count, or the credential proxy's when that is larger
    /// (OpenCode counts an answer once its step has ended; the proxy as the answer passes).
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
    /// Tokens the run used: OpenCode's count, or the credential proxy's when that is larger
    /// (OpenCode counts an answer once its step has ended: a run stopped while a command ran).
    /// Anthropic's answers count reasoning as output.
    pub tokens: Option<Tokens>,
    pub cost_usd: Option<f64>,
    /// Signed link to the full agent transcript (JSON), when one was stored.
    pub transcript_url: Option<String>,
    /// The transcript is abridged: the whole conversation was over 16 MiB, so tool inputs but
    /// their commands and paths, tool metadata (file diffs) and attachments were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub transcript_abridged: bool,
    /// Why the run has no transcript, when the conversation could not be read (even abridged
    /// it was over 16 MiB, or the agent did not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_missing: Option<String>,
    /// Artifacts (`transcript`, `diff`) the storage refused when the run ended: the run's
    /// session keeps them and stores them once it can; they appear here until then.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts_pending: Vec<crate::artifacts::Artifact>,
    /// Why the run failed or was cancelled.
    pub error: Option<ErrorView>,
}

/// A phase the run went through.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseView {
    /// queued, preparing_sandbox, cloning, starting_agent, working (resuming_agent when the
    /// agent stopped and was started again), pushing, opening_pr (worker runs: staging,
    /// running, pending_approval, collecting), then done, failed or cancelled.
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
    /// The run's budget and what it has spent so far (absent when it has none).
    pub budget: Option<BudgetView>,
    /// The completion callback and its delivery attempts (absent when none was asked for).
    pub callback: Option<CallbackView>,
    pub web_ui_url: Option<String>,
}

/// A budget, what was spent against it, and whether the run went over.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub limits: Budget,
    pub spent: Spend,
    /// Which limit the run reached, as a sentence (absent while within budget).
    pub exceeded: Option<String>,
}

impl BudgetView {
    /// The budget of `run` at `now` (`None` when it has none).
    pub fn of(run: &RunRecord, now: i64) -> Option<BudgetView> {
        let limits = run.budget.clone()?;
        Some(BudgetView {
            exceeded: run.over_budget(now).map(|e| e.message()),
            spent: run.spend(now),
            limits,
        })
    }
}

/// One attempt to deliver a callback.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    pub at: String,
    /// The receiver's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why it did not answer, or why the attempt was refused.
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// A run's completion callback.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallbackView {
    pub url: String,
    /// The delivery's id, sent as the handoff-delivery header on every attempt (absent until
    /// the run ends).
    pub delivery_id: Option<String>,
    /// waiting (the run has not ended), pending, delivered or failed.
    pub state: String,
    pub attempt_count: u32,
    /// The latest attempts, oldest first.
    pub attempts: Vec<AttemptView>,
    pub next_attempt_at: Option<String>,
}

impl From<Callback> for CallbackView {
    fn from(callback: Callback) -> Self {
        let Some(delivery) = callback.delivery else {
            return CallbackView {
                url: callback.url,
                delivery_id: None,
                state: "waiting".to_string(),
                attempt_count: 0,
                attempts: Vec::new(),
                next_attempt_at: None,
            };
        };
        CallbackView {
            url: callback.url,
            delivery_id: Some(delivery.id),
            state: delivery.state.as_str().to_string(),
            attempt_count: delivery.attempt_count,
            attempts: delivery
                .attempts
                .into_iter()
                .map(|a| AttemptView {
                    at: rfc3339(a.at),
                    status: a.status,
                    error: a.error,
                    duration_ms: a.duration_ms,
                })
                .collect(),
            next_attempt_at: (delivery.state == DeliveryState::Pending)
                .then_some(delivery.next_at)
                .flatten()
                .map(rfc3339),
        }
    }
}

impl RunView {
    /// The view of `run` as it stands at `now` (which the budget's time is counted to).
    pub fn at(run: RunRecord, web_ui_url: Option<String>, now: i64) -> Self {
        let budget = BudgetView::of(&run, now);
        let callback = run.callback.clone().map(CallbackView::from);
        let mut view = RunView::new(run, web_ui_url);
        view.budget = budget;
        view.callback = callback;
        view
    }

    fn new(run: RunRecord, web_ui_url: Option<String>) -> Self {
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
                tokens: run.tokens_used(outcome.tokens.as_ref()),
                cost_usd: outcome.cost_usd,
                transcript_url: outcome
                    .transcript
                    .then(|| web_ui_url.as_deref().map(transcript_url))
                    .flatten(),
                transcript_abridged: outcome.transcript_abridged,
                transcript_missing: outcome.transcript_missing,
                artifacts_pending: outcome.pending,
                error: run.error.clone().map(|e| ErrorView {
                    code: e.code.as_str().to_string(),
                    message: e.message,
                }),
            }
        });
        let progress = run.progress.clone().map(|p| {
            let detail = p.detail.unwrap_or_default();
            ProgressView {
                phase: p.phase,
                message: p.message,
                updated_at: rfc3339(p.updated_at),
                steps: detail.steps,
                current_tool: detail.current_tool,
                tokens: run.tokens_used(Some(&detail.tokens)).unwrap_or_default(),
                cost_usd: detail.cost_usd,
                recent_steps: detail.recent,
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
            progress,
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
            budget: None,
            callback: None,
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
