//! Background workers as the domain knows them: a worker is a folder — `worker.yml` plus a script
//! or a `SKILL.md` — deployed as immutable versions, run by hand, on a schedule or from a
//! webhook. This module holds the manifest (`worker.yml`, validated in `manifest.rs`), the
//! folder's files, run inputs (`inputs.rs`), schedules (`schedule.rs`), what a run keeps, and
//! the redaction of secret values (`redact.rs`). Pure: no I/O, no Durable Objects.

pub mod fields;
pub mod files;
pub mod inputs;
pub mod manifest;
pub mod read;
pub mod redact;
pub mod result_schema;
pub mod run_view;
pub mod schedule;
pub mod webhook;
pub(crate) mod yaml;
pub mod zones;

use crate::names::named_enum;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use fields::Problem;
pub use files::FileSet;
pub use manifest::Manifest;

/// The `schema_version` this handoff reads.
pub const SCHEMA_VERSION: u64 = 1;
/// The manifest's file name in a worker folder.
pub const MANIFEST_FILE: &str = "worker.yml";

named_enum! {
/// How a worker runs.
pub enum Runtime {
    /// `python3 <entrypoint>` (default entrypoint `run.py`).
    Python3,
    /// `node <entrypoint>` (default `run.js`).
    Node,
    /// `sh <entrypoint>` (default `run.sh`).
    Sh,
    /// An agent (OpenCode) with `SKILL.md` as its instructions and only the allowed tools.
    Skill,
}
}

impl Runtime {
    pub fn default_entrypoint(self) -> &'static str {
        match self {
            Runtime::Python3 => "run.py",
            Runtime::Node => "run.js",
            Runtime::Sh => "run.sh",
            Runtime::Skill => "SKILL.md",
        }
    }

    /// The program that runs a script entrypoint (none for skills).
    pub fn interpreter(self) -> Option<&'static str> {
        match self {
            Runtime::Python3 => Some("python3"),
            Runtime::Node => Some("node"),
            Runtime::Sh => Some("sh"),
            Runtime::Skill => None,
        }
    }
}

named_enum! {
/// What started a worker run.
pub enum Trigger {
    /// A `workers_run` call.
    Manual,
    /// The worker's cron schedule.
    Schedule,
    /// A signed request to the worker's webhook URL.
    Webhook,
    /// `workers_run_replay` of an earlier run.
    Replay,
}
}

named_enum! {
/// Where a run's approval stands.
pub enum Decision {
    /// Waiting for the owner.
    Pending,
    Approved,
    Rejected,
    /// Nobody decided in time.
    Expired,
}
}

/// A worker as the registry lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub name: String,
    pub title: String,
    pub description: String,
    pub runtime: Runtime,
    /// The version runs use.
    pub current_version: u32,
    pub versions: u32,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// The schedule's next fire times (milliseconds), when it has one.
    #[serde(default)]
    pub next_fires: Vec<i64>,
    /// When the schedule last fired.
    #[serde(default)]
    pub last_fired_at: Option<i64>,
    /// The webhook's URL path (secret: it is the capability), when the worker takes webhooks.
    #[serde(default)]
    pub webhook_path: Option<String>,
}

/// One immutable version of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionRecord {
    pub worker: String,
    pub version: u32,
    pub manifest: Manifest,
    /// SHA-256 of the folder (paths and contents), to tell versions apart at a glance.
    pub digest: String,
    /// Where it came from: `inline`, `repository <url>@<ref>:<path>` or `rollback to vN`.
    pub source: String,
    /// The version whose files this one reuses (a rollback), else itself.
    pub files_of: u32,
    pub created_by: String,
    pub created_at: i64,
    /// The folder (filled only when asked for).
    #[serde(default)]
    pub files: Option<FileSet>,
}

/// What a worker run was asked to do (kept with the run in the ledger).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRunSpec {
    pub worker: String,
    pub version: u32,
    pub runtime: Runtime,
    pub trigger: Trigger,
    /// Scalar inputs, validated and with defaults filled in.
    pub inputs: Map<String, Value>,
    /// Files given for file inputs (stored in R2, written to `inputs/<name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<InputFile>,
    /// The run this one replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// Where a webhook run's payload is stored (R2), written to `webhook.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_key: Option<String>,
    /// For a scheduled run, the fire time it is for (milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<i64>,
    /// Whether the run stops for approval before its side effect, and the approval's label.
    #[serde(default)]
    pub approval_required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_label: Option<String>,
}

/// A file given for a file input, stored in R2 before the run starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    /// The input's name.
    pub name: String,
    pub filename: String,
    pub media_type: String,
    pub size: u64,
    /// SHA-256 of the content (its R2 key is derived from it).
    pub sha256: String,
}

/// A run's approval: the proposal the worker made and the owner's decision, stamped by handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub label: String,
    pub decision: Decision,
    /// What the worker proposes to do (its `proposal.md` / `proposal.json`, redacted, capped).
    pub proposal: String,
    pub requested_at: i64,
    /// When the request lapses unanswered.
    pub expires_at: i64,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub decided_at: Option<i64>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// One output file a run stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputFile {
    /// Path under `outputs/`.
    pub path: String,
    pub size: u64,
    pub media_type: String,
    pub sha256: String,
}

/// One tool call of an agent-mode run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    /// The tool, e.g. bash, read, write.
    pub tool: String,
    /// What it did, e.g. the command or the file.
    pub title: String,
    /// completed, error (refused calls too), running or pending.
    pub status: String,
}

/// What a finished worker run produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerOutcome {
    /// The entrypoint's exit code (scripts); `None` when it was killed.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// `result.json`, redacted (or the agent's answer as `{"answer": …}`).
    pub result: Option<Value>,
    pub outputs: Vec<OutputFile>,
    /// The last lines of the log (redacted); the whole capped log is stored beside the run.
    pub log_tail: String,
    pub logs_stored: bool,
    pub tool_calls: Vec<ToolCall>,
    /// How many times the entrypoint was started (a run cut off by a restart is retried once).
    pub attempts: u32,
}

/// The worker side of a run record: what was asked and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRunInfo {
    pub spec: WorkerRunSpec,
    #[serde(default)]
    pub approval: Option<Approval>,
    /// The latest lines of its log while it runs (redacted).
    #[serde(default)]
    pub live_log: Option<String>,
    #[serde(default)]
    pub outcome: Option<WorkerOutcome>,
}
