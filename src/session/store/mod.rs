//! A work session's own SQLite: its queue of runs, the state of the run it is driving (one JSON
//! document, rewritten after every step so a restart resumes where it stopped) and a few
//! settings (its sandbox, the agent's password, the agent sessions per directory). The
//! artifacts it keeps for the bucket are `outbox.rs`'s.

use crate::error::Result;
use crate::runs::{ProgressDetail, RunErrorCode, RunOutcome};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;
use worker::SqlStorage;

mod outbox;
pub use outbox::*;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pending (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL UNIQUE,
  enqueued_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
  run_id TEXT NOT NULL,
  artifact TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  next_at INTEGER NOT NULL,
  since INTEGER NOT NULL,
  PRIMARY KEY (run_id, artifact)
);
CREATE TABLE IF NOT EXISTS outbox_parts (
  run_id TEXT NOT NULL,
  artifact TEXT NOT NULL,
  part INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, artifact, part)
);
";

const CURRENT: &str = "current";
const META: &str = "meta";
/// Apart from the meta record, which a step may save from a copy read before its awaits: a
/// run's dispatch clears it, and nothing may set it back.
const SPARE: &str = "spare";

pub fn create_schema(sql: &SqlStorage) -> Result<()> {
    sql.exec(SCHEMA, None)?;
    Ok(())
}

pub fn enqueue(sql: &SqlStorage, run_id: &str, now: i64) -> Result<()> {
    sql.exec(
        "INSERT OR IGNORE INTO pending (run_id, enqueued_at) VALUES (?, ?)",
        vec![run_id.into(), now.into()],
    )?;
    Ok(())
}

pub fn next_pending(sql: &SqlStorage) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Row {
        run_id: String,
    }
    Ok(sql
        .exec("SELECT run_id FROM pending ORDER BY seq LIMIT 1", None)?
        .to_array::<Row>()?
        .pop()
        .map(|r| r.run_id))
}

pub fn remove_pending(sql: &SqlStorage, run_id: &str) -> Result<()> {
    sql.exec("DELETE FROM pending WHERE run_id = ?", vec![run_id.into()])?;
    Ok(())
}

fn get<T: DeserializeOwned>(sql: &SqlStorage, key: &str) -> Result<Option<T>> {
    #[derive(Deserialize)]
    struct Row {
        value: String,
    }
    let row = sql
        .exec("SELECT value FROM kv WHERE key = ?", vec![key.into()])?
        .to_array::<Row>()?
        .pop();
    Ok(row.and_then(|r| serde_json::from_str(&r.value).ok()))
}

fn put<T: Serialize>(sql: &SqlStorage, key: &str, value: &T) -> Result<()> {
    sql.exec(
        "INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)",
        vec![key.into(), serde_json::to_string(value)?.into()],
    )?;
    Ok(())
}

/// Where the driven run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Preparing,
    Cloning,
    StartingAgent,
    Prompting,
    Working,
    /// OpenCode stopped while it worked, its workspace and session intact: it is started
    /// again and told to carry on (`resume.rs`).
    Resuming,
    Finishing,
    /// Worker runs: the worker's folder, inputs and payload written into the sandbox.
    Staging,
    /// Worker runs: the script runs.
    Executing,
    /// Worker runs: stopped before the side effect until the owner decides.
    AwaitingApproval,
    /// Worker runs: logs, result and outputs stored, the sandbox removed.
    Collecting,
}

impl Phase {
    /// The phase name runs report (`progress.phase`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Preparing => "preparing_sandbox",
            Phase::Cloning => "cloning",
            Phase::StartingAgent | Phase::Prompting => "starting_agent",
            Phase::Working => "working",
            Phase::Resuming => "resuming_agent",
            Phase::Finishing => "finishing",
            Phase::Staging => "staging",
            Phase::Executing => "running",
            Phase::AwaitingApproval => "pending_approval",
            Phase::Collecting => "collecting",
        }
    }
}

/// The repository a run works on, once cloned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkout {
    pub owner: String,
    pub name: String,
    /// The clone's directory inside the sandbox.
    pub dir: String,
    pub base_branch: String,
    pub base_commit: String,
}

/// The run this session is driving, persisted after every step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Current {
    pub run_id: String,
    pub phase: Phase,
    pub started_at: i64,
    pub deadline: i64,
    /// The directory the agent works in.
    pub dir: String,
    pub checkout: Option<Checkout>,
    pub agent_process: Option<u64>,
    pub agent_session: Option<String>,
    /// A marker in the prompt that finds it among the agent's messages.
    pub marker: String,
    pub prompted_at: Option<i64>,
    /// Consecutive failures to reach the sandbox, and since when they last.
    pub failures: u32,
    #[serde(default)]
    pub failing_since: Option<i64>,
    pub detail: ProgressDetail,
    /// Since when the agent has been idle with an answer that never completed.
    #[serde(default)]
    pub idle_unsettled_since: Option<i64>,
    /// The sandbox the agent was started in, to tell a lost sandbox from a crashed agent.
    #[serde(default)]
    pub sandbox_born: Option<SandboxBirth>,
    /// Set for a worker run: where its script (or agent) stands.
    #[serde(default)]
    pub worker: Option<WorkerState>,
    /// Why the agent was stopped before it finished (the run went over its budget): the run
    /// ends failed with this message once its work is pushed.
    #[serde(default)]
    pub stop: Option<String>,
    /// When the agent's messages were last read (see `follow.rs`).
    #[serde(default)]
    pub looked_at: Option<i64>,
    /// The digest of the last progress reported while following, and when.
    #[serde(default)]
    pub reported: Option<(String, i64)>,
    /// How many times the agent was started again after it stopped mid-run.
    #[serde(default)]
    pub resumes: u32,
    /// How many times the turn was handed back after the provider failed, and when the next
    /// hand-back is due (`retry.rs`).
    #[serde(default)]
    pub model_retries: u32,
    #[serde(default)]
    pub retry_at: Option<i64>,
    /// While the agent waits on the model: the answers' `motion` last seen and since when it
    /// has not changed (`follow.rs` stops a model that stays silent too long).
    #[serde(default)]
    pub quiet: Option<(u64, i64)>,
    /// The code a run stopped early (`stop`) ends with; none: over its budget.
    #[serde(default)]
    pub stop_code: Option<RunErrorCode>,
    /// The marker of the latest message handed to the agent, saved before it is sent
    /// (`resume.rs`, `hand_over`): a message whose marker is not here was never sent.
    #[serde(default)]
    pub handing_over: Option<String>,
    /// The key of the agent start under way (`StartProcess::key`), saved before it is sent: a
    /// start sent again after its reply was lost gets the agent started then, not a second.
    #[serde(default)]
    pub agent_start: Option<String>,
    /// What the finish read of the agent's ended turn, saved before its work is committed.
    #[serde(default)]
    pub turn_read: Option<TurnRead>,
}

/// What a run's agent left when its turn ended, read once by the finish and saved before the
/// work is committed and pushed: a finish tried again (the sandbox was out of reach) goes on
/// from it without the agent, which may be stopped by then, and a run that fails from there
/// still shows the turn's summary, usage and conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRead {
    pub outcome: RunOutcome,
    /// Why the agent was stopped early: the run ends failed, saying so, once its work is
    /// pushed.
    pub stop: Option<String>,
    pub detail: ProgressDetail,
}

impl Current {
    /// The key of the agent start under way: the one saved by a start whose reply never came
    /// (the sandbox answers it with the agent it began then), else a new one — to be saved
    /// before the start is sent.
    pub fn agent_start_key(&mut self) -> String {
        let key = self
            .agent_start
            .get_or_insert_with(|| crate::ids::new_id("agent_"));
        key.clone()
    }

    /// A run's state as it begins: preparing its sandbox in the workspace, due by `deadline`.
    pub fn begin(run_id: &str, now: i64, deadline: i64) -> Current {
        Current {
            run_id: run_id.to_string(),
            phase: Phase::Preparing,
            started_at: now,
            deadline,
            dir: handoff_wire::WORKSPACE.to_string(),
            checkout: None,
            agent_process: None,
            agent_session: None,
            marker: format!("{}{run_id}]", super::turn::MARKER),
            prompted_at: None,
            failures: 0,
            detail: ProgressDetail::default(),
            idle_unsettled_since: None,
            sandbox_born: None,
            worker: None,
            stop: None,
            looked_at: None,
            reported: None,
            resumes: 0,
            model_retries: 0,
            retry_at: None,
            quiet: None,
            stop_code: None,
            handing_over: None,
            failing_since: None,
            agent_start: None,
            turn_read: None,
        }
    }
}

/// The driven worker run's own state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerState {
    /// The pass after approval (the side effect), as opposed to the first pass.
    pub apply: bool,
    /// The script's process in the sandbox.
    pub process: Option<u64>,
    /// How many times the script was started in this pass (a restart that loses it retries once).
    pub attempts: u32,
    /// When the current pass started and when it must have ended.
    pub started_at: Option<i64>,
    pub deadline: Option<i64>,
    /// Milliseconds the earlier passes took.
    pub earlier_ms: u64,
    /// The live log last reported (to skip unchanged reports).
    pub log_digest: Option<String>,
    /// The driver killed the pass at its time limit.
    #[serde(default)]
    pub timed_out: bool,
    /// Agent mode: the most tool calls and tokens the agent may use.
    #[serde(default)]
    pub max_steps: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

/// Which incarnation of the sandbox a run's agent runs in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxBirth {
    /// The daemon's `created_at` for the sandbox: a new container or daemon changes it.
    pub created_at: i64,
    /// Whether the sandbox is a container (so a loss is told as the container stopping).
    pub container: bool,
}

pub fn current(sql: &SqlStorage) -> Result<Option<Current>> {
    get(sql, CURRENT)
}

pub fn save_current(sql: &SqlStorage, current: &Current) -> Result<()> {
    put(sql, CURRENT, current)
}

pub fn clear_current(sql: &SqlStorage) -> Result<()> {
    sql.exec("DELETE FROM kv WHERE key = ?", vec![CURRENT.into()])?;
    Ok(())
}

/// Settings of the session that outlive runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Meta {
    pub session_id: Option<String>,
    /// Password of the agent's HTTP API (`OPENCODE_SERVER_PASSWORD`).
    pub agent_password: Option<String>,
    /// The agent's session id per working directory, so later runs continue the conversation.
    #[serde(default)]
    pub agent_sessions: BTreeMap<String, String>,
    /// The coding agent kept serving between the session's runs, so the next run need not
    /// start it again.
    #[serde(default)]
    pub agent: Option<KeptAgent>,
    /// The empty repository a spare session's warm-up made where the run it was prepared for
    /// would clone (`spare.rs`), until the session's first clone clears it.
    #[serde(default)]
    pub warm_repo: Option<String>,
}

/// A spare session's preparation: the run whose model and origin its agent is started for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spare {
    pub like_run: String,
    /// Whether the preparation was made (once: a failed one leaves the next run to start it).
    pub prepared: bool,
}

/// An OpenCode server left running for the session's next coding run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptAgent {
    /// Its process in the sandbox, and when that started (ids alone do not outlive a daemon).
    pub process: u64,
    pub started_at: i64,
    /// A digest of its configuration and environment, leaving out the model token: a run that
    /// needs anything else starts a new agent.
    pub setup: String,
    /// When its session-scoped model token expires (milliseconds since the epoch).
    pub token_expires_at: i64,
    pub born: Option<SandboxBirth>,
    /// When its last run let it go (`None` while a run uses it).
    #[serde(default)]
    pub released_at: Option<i64>,
    /// Whether it was frozen while it waits (the next run thaws it whatever this says).
    #[serde(default)]
    pub frozen: bool,
}

/// Set while this is a spare session no run has taken over yet (`spare.rs`).
pub fn spare(sql: &SqlStorage) -> Result<Option<Spare>> {
    Ok(get::<Option<Spare>>(sql, SPARE)?.flatten())
}

pub fn save_spare(sql: &SqlStorage, spare: Option<&Spare>) -> Result<()> {
    put(sql, SPARE, &spare)
}

pub fn meta(sql: &SqlStorage) -> Result<Meta> {
    Ok(get(sql, META)?.unwrap_or_default())
}

pub fn save_meta(sql: &SqlStorage, meta: &Meta) -> Result<()> {
    put(sql, META, meta)
}
