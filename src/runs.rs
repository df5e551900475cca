//! The run domain: statuses and their legal transitions, and the run record the ledger stores and
//! hands out. Storage lives in `ledger`, the MCP views in `tools::views`.

use crate::budget::{Budget, Exceeded, Spend};
use crate::names::named_enum;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

named_enum! {
/// Where a run is in its life. `completed`, `failed` and `cancelled` are terminal and final.
#[derive(JsonSchema)]
pub enum RunStatus {
    /// Accepted and waiting for its session to pick it up.
    Queued,
    /// Its session is preparing the sandbox.
    Starting,
    /// The agent (or a worker's script) is working.
    Running,
    /// A worker run stopped before its side effect, waiting for the owner's approval.
    PendingApproval,
    /// Finished; `result` holds the summary and any pull request.
    Completed,
    /// Ended without finishing; `result.error` says why.
    Failed,
    /// Cancelled by a caller.
    Cancelled,
}
}

impl RunStatus {
    pub fn parse(s: &str) -> Option<RunStatus> {
        s.parse().ok()
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// Whether a run may move from `self` to `next`. Repeating the current non-terminal status is
    /// allowed (a retried step reports it again); nothing leaves a terminal status.
    pub fn can_become(self, next: RunStatus) -> bool {
        use RunStatus::*;
        match (self, next) {
            (s, _) if s.is_terminal() => false,
            (s, n) if s == n => true,
            (Queued, Starting | Failed | Cancelled) => true,
            (Starting, Running | Completed | Failed | Cancelled) => true,
            (Running, Completed | Failed | Cancelled | PendingApproval) => true,
            (PendingApproval, Running | Failed | Cancelled) => true,
            _ => false,
        }
    }
}

/// The phase and line a run ends on, so it never shows its last working step ("opening a pull
/// request …"): `done` and what came of it, or `failed` / `cancelled` and why. Where a run was
/// when it ended stays in its phases. `None` for every other status.
pub fn final_progress(
    to: RunStatus,
    outcome: Option<&RunOutcome>,
    error: Option<&RunError>,
) -> Option<(&'static str, String)> {
    let why = |word: &str| match error {
        Some(e) => format!("{word}: {}", e.message),
        None => word.to_string(),
    };
    Some(match to {
        RunStatus::Completed => {
            let message = match outcome {
                Some(RunOutcome {
                    pull_request_url: Some(url),
                    ..
                }) => format!("done: opened {url}"),
                Some(RunOutcome {
                    branch: Some(branch),
                    ..
                }) => format!("done: pushed {branch}"),
                Some(RunOutcome {
                    summary: Some(summary),
                    worker: Some(_),
                    ..
                }) => format!("done: {summary}"),
                _ => "done".to_string(),
            };
            ("done", message)
        }
        RunStatus::Failed => ("failed", why("failed")),
        RunStatus::Cancelled => ("cancelled", why("cancelled")),
        _ => return None,
    })
}

/// When a run entered a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseMark {
    pub phase: String,
    pub at: i64,
}

named_enum! {
/// Why a run ended without completing: the one registry of run error codes, as clients see
/// them in `error.code` (snake_case). The message beside the code says what to do.
pub enum RunErrorCode {
    /// No sandbox backend is configured or reachable.
    SandboxUnavailable,
    /// The sandbox stopped under the working agent (its container or daemon started afresh).
    SandboxLost,
    /// The repository could not be cloned (or the branch fetched).
    CloneFailed,
    /// OpenCode did not start, did not take the task, or its model call failed.
    AgentFailed,
    /// The changes could not be committed or pushed.
    PushFailed,
    /// The branch was pushed but the pull request could not be opened.
    PrFailed,
    /// Any other failure while the run was being worked on.
    RunFailed,
    /// The run went over its time limit, or the watchdog saw no progress for too long.
    TimedOut,
    /// A caller cancelled the run.
    Cancelled,
    /// A worker's script ended with a non-zero exit code (or a signal).
    WorkerFailed,
    /// A worker run did not leave what its manifest promises (`result.json` matching the schema,
    /// a required output file), or left more than handoff keeps.
    OutputInvalid,
    /// A worker's agent went over its tool iterations or tokens.
    LimitExceeded,
    /// A secret the worker declares is not set.
    MissingSecret,
    /// The owner rejected the run's proposal; nothing was done.
    Rejected,
    /// Nobody approved the run's proposal in time; nothing was done.
    ApprovalExpired,
    /// The run was cut off by a restart and could not be resumed.
    Interrupted,
    /// The run went over its budget (maxCostUsd, maxTokens or maxDurationSeconds); its work
    /// so far was pushed to its branch.
    BudgetExceeded,
}
}

/// The latest progress report of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub phase: String,
    pub message: String,
    pub updated_at: i64,
    #[serde(default)]
    pub detail: Option<ProgressDetail>,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunError {
    pub code: RunErrorCode,
    pub message: String,
}

/// One commit the run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Commit {
    /// Full commit hash.
    pub sha: String,
    /// First line of the commit message.
    pub message: String,
}

/// Tokens the agent's model calls used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    /// Every token counted (what `maxTokens` limits).
    pub fn total(&self) -> u64 {
        self.input + self.output + self.reasoning + self.cache_read + self.cache_write
    }
}

/// One step (tool call) of the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// The tool, e.g. bash, edit, write, read.
    pub tool: String,
    /// What it did, e.g. the command or the file.
    pub title: String,
    /// pending, running, completed or error.
    pub status: String,
    /// How long it took, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// The live detail of a working run: steps so far, the current tool, tokens and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressDetail {
    pub steps: u32,
    pub current_tool: Option<String>,
    pub tokens: Tokens,
    pub cost_usd: f64,
    /// The latest steps, oldest first (at most 20).
    pub recent: Vec<Step>,
}

/// What a finished run produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    pub summary: Option<String>,
    pub pull_request_url: Option<String>,
    pub branch: Option<String>,
    #[serde(default)]
    pub commits: Vec<Commit>,
    #[serde(default)]
    pub changed_files: Vec<String>,
    /// `git diff --shortstat` of the run's changes.
    #[serde(default)]
    pub diffstat: Option<String>,
    /// Build and test by-products that were not committed (`__pycache__/`, `node_modules/`, …).
    #[serde(default)]
    pub left_out: Vec<String>,
    #[serde(default)]
    pub tokens: Option<Tokens>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Whether the full transcript was stored.
    #[serde(default)]
    pub transcript: bool,
    /// Whether the transcript is abridged (the whole conversation was over 16 MiB).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transcript_abridged: bool,
    /// Why no transcript was stored, when the conversation could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_missing: Option<String>,
    /// Whether the change was stored as a unified diff.
    #[serde(default)]
    pub diff: bool,
    /// Artifacts the bucket refused when the run ended, kept by the session until stored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<crate::artifacts::Artifact>,
    /// What a worker run produced (logs, result, outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<crate::workers::WorkerOutcome>,
}

impl RunOutcome {
    /// `artifact` is no longer pending: stored (and shown as there), or given up.
    pub fn settle(&mut self, artifact: crate::artifacts::Artifact, stored: bool) {
        use crate::artifacts::Artifact;
        self.pending.retain(|a| *a != artifact);
        match artifact {
            Artifact::Transcript => self.transcript |= stored,
            Artifact::Diff => self.diff |= stored,
        }
    }
}

/// A status change and when it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub status: RunStatus,
    pub at: i64,
}

/// What a caller asked for when starting a run (validated before it reaches the ledger).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub task: String,
    pub title: String,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub idempotency_key: Option<String>,
    /// The Worker origin the run was started through (how its sandbox reaches the proxy).
    #[serde(default)]
    pub origin: Option<String>,
    /// Set for a worker run: which worker, version and inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<crate::workers::WorkerRunSpec>,
    /// The most the run may spend (the deployment's defaults fill what it leaves open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Where to POST the result when the run ends (checked by `callbacks::check_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
}

/// A title from a task: its first non-empty line without control characters, cut to `max`
/// characters (with an ellipsis).
pub fn title_from(task: &str, max: usize) -> String {
    let line = task
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let clean: String = line.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() <= max {
        clean
    } else {
        let cut: String = clean.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    }
}

impl RunSpec {
    /// The ledger's run for a worker run: titled after the worker, its task a line saying what
    /// started it.
    pub fn for_worker(
        spec: crate::workers::WorkerRunSpec,
        title: &str,
        model: Option<String>,
        idempotency_key: Option<String>,
        origin: Option<String>,
    ) -> RunSpec {
        let task = match &spec.replay_of {
            Some(of) => format!("worker {} v{}: replay of {of}", spec.worker, spec.version),
            None => format!(
                "worker {} v{}: {} run",
                spec.worker,
                spec.version,
                spec.trigger.as_str()
            ),
        };
        RunSpec {
            task,
            title: title.to_string(),
            repository: None,
            branch: None,
            session_id: None,
            model,
            idempotency_key,
            origin,
            worker: Some(spec),
            budget: None,
            callback_url: None,
        }
    }
}

/// A run as the ledger stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub session_id: String,
    pub created_by: String,
    pub status: RunStatus,
    pub task: String,
    pub title: String,
    pub model: Option<String>,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub updated_at: i64,
    #[serde(default)]
    pub origin: Option<String>,
    pub progress: Option<Progress>,
    pub outcome: Option<RunOutcome>,
    pub error: Option<RunError>,
    /// Every status change in order (filled for single-run reads, empty in lists).
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// The worker side of a worker run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<crate::workers::WorkerRunInfo>,
    /// Every phase the run went through, oldest first (filled for single-run reads).
    #[serde(default)]
    pub phases: Vec<PhaseMark>,
    /// The most the run may spend.
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Tokens the credential proxy counted in the provider's answers (in all, and by kind as
    /// OpenCode counts them: Anthropic's answers count reasoning as output), and the calls it
    /// passed.
    #[serde(default)]
    pub metered_tokens: u64,
    #[serde(default)]
    pub metered: Tokens,
    #[serde(default)]
    pub model_calls: u64,
    /// The completion callback and its delivery (filled for single-run reads).
    #[serde(default)]
    pub callback: Option<crate::callbacks::Callback>,
}

impl RunRecord {
    /// What the run has spent by `now`: the proxy's token count (or the session's reading of
    /// OpenCode's, when higher), OpenCode's cost, and the seconds since it started.
    pub fn spend(&self, now: i64) -> Spend {
        let detail = self.progress.as_ref().and_then(|p| p.detail.as_ref());
        let (reported_tokens, cost) = match (detail, &self.outcome) {
            (Some(d), _) => (d.tokens.total(), d.cost_usd),
            (None, Some(o)) => (
                o.tokens.as_ref().map(Tokens::total).unwrap_or(0),
                o.cost_usd.unwrap_or(0.0),
            ),
            _ => (0, 0.0),
        };
        let end = self.completed_at.unwrap_or(now);
        Spend {
            tokens: self.metered_tokens.max(reported_tokens),
            model_calls: self.model_calls,
            cost_usd: cost,
            seconds: self
                .started_at
                .map(|at| ((end - at).max(0) / 1000) as u64)
                .unwrap_or(0),
        }
    }

    /// The tokens to show for the run beside OpenCode's count (`reported`): the credential
    /// proxy's count instead when it is the larger. OpenCode writes an answer's usage only once
    /// its step ends, so a run stopped while a command ran has none from it for that answer;
    /// and it counts only the answers in its conversation. The proxy counted every answer of
    /// the run as it passed.
    pub fn tokens_used(&self, reported: Option<&Tokens>) -> Option<Tokens> {
        let metered = self.metered.total();
        match reported {
            Some(r) if r.total() >= metered => Some(r.clone()),
            _ if metered > 0 => Some(self.metered.clone()),
            r => r.cloned(),
        }
    }

    /// The limit this run is over by `now`, if any.
    pub fn over_budget(&self, now: i64) -> Option<Exceeded> {
        crate::budget::over(self.budget.as_ref()?, &self.spend(now))
    }
}

/// A work session: a sandbox and an agent conversation that runs can continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub created_at: i64,
    pub last_run_at: i64,
    pub run_count: i64,
    pub last_run_id: Option<String>,
    pub last_run_status: Option<RunStatus>,
    pub last_run_title: Option<String>,
}

#[cfg(test)]
mod tests;
