//! Parameters of the `workers_*` tools (doc comments become descriptions and JSON Schemas).

use crate::runs::RunStatus;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// List the deployed background workers by name: title, runtime, current version, next
/// scheduled fire times and whether they take webhooks.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersListParams {
    /// How many to return: 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit to start from the first name.
    pub cursor: Option<String>,
}

/// One worker in full: its current version's manifest (inputs, outputs, triggers, secrets,
/// network, limits, approvals), its next fire times, and its webhook URL and signing secret
/// when it takes webhooks.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkerNameParams {
    /// The worker's name (from worker.yml).
    pub worker: String,
}

/// Deploy a worker folder as the worker's next immutable version: worker.yml plus a script
/// (run.py, run.sh, run.js/.ts) or a SKILL.md. Give the files inline (`files`, and
/// `base64Files` for binary ones) or name a folder in a repository (`repository` and `path`).
/// The folder is checked in full first; every problem is listed by field. Deploying the same
/// folder again changes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersDeployParams {
    /// The folder's text files: relative path → content, e.g. {"worker.yml": "...", "run.py":
    /// "..."}. At most 64 files, 256 KiB each, 1 MiB in all.
    pub files: Option<BTreeMap<String, String>>,
    /// Binary files: relative path → base64 content.
    pub base64_files: Option<BTreeMap<String, String>>,
    /// Instead of files: an https URL of a repository on this deployment's forge.
    #[schemars(length(max = 500))]
    pub repository: Option<String>,
    /// The folder inside the repository (default: its root).
    #[schemars(length(max = 200))]
    pub path: Option<String>,
    /// Branch, tag or commit to read (default: the repository's default branch).
    #[schemars(length(max = 200))]
    pub r#ref: Option<String>,
}

/// List a worker's versions, newest first: number, source (inline, a repository path, or a
/// rollback), digest, who deployed it and when.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersVersionsParams {
    /// The worker's name.
    pub worker: String,
    /// How many to return: 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit for the newest.
    pub cursor: Option<String>,
}

/// Roll a worker back: a new version with the manifest and files of an older one becomes the
/// current version (the history stays as it was).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersRollbackParams {
    /// The worker's name.
    pub worker: String,
    /// The version to go back to (workers_versions lists them).
    #[schemars(range(min = 1))]
    pub version: u32,
}

/// A file given for a file input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileParam {
    /// The file's name, e.g. data.csv (its extension is checked against the input's accept).
    #[schemars(length(min = 1, max = 200))]
    pub filename: String,
    /// The content, base64.
    pub content_base64: String,
    /// Its media type, e.g. text/csv (default: from the extension).
    pub media_type: Option<String>,
}

/// Run a worker now (by hand). Returns at once with a runId; follow it with workers_run_get.
/// Inputs are checked against the worker's declarations (defaults filled in); a worker that
/// needs approval stops before its side effect in pending_approval.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersRunParams {
    /// The worker's name (workers_list shows them).
    pub worker: String,
    /// A version other than the current one.
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
    /// Input values by name (text, numbers, booleans, select options, URLs).
    pub inputs: Option<Map<String, Value>>,
    /// Files for file inputs, by input name.
    pub files: Option<BTreeMap<String, FileParam>>,
    /// Any unique string (at most 200 characters): repeating the call with it returns the
    /// first run instead of starting another.
    #[schemars(length(min = 1, max = 200))]
    pub idempotency_key: Option<String>,
    /// Stop the run once its model use costs this many dollars (as OpenCode prices the
    /// model). The run then ends failed with error.code budget_exceeded. Default: the deployment's.
    pub max_cost_usd: Option<f64>,
    /// Stop the run once its model calls used this many tokens (everything the provider
    /// counts: input, cached input, output). Default: the deployment's.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Stop the run this many seconds after it started. Default: the deployment's.
    #[schemars(range(min = 1))]
    pub max_duration_seconds: Option<u64>,
    /// HTTPS URL to POST the run's result to when it ends, signed with the deployment's
    /// callback secret (header handoff-signature) and retried until it answers 2xx; the
    /// delivery's attempts show in the result. Private and loopback addresses are refused.
    #[schemars(length(min = 1, max = 2000))]
    pub callback_url: Option<String>,
}

/// List worker runs newest first, of one worker or all, optionally by status.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersRunsParams {
    /// Only runs of this worker.
    pub worker: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// How many to return: 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit for the newest.
    pub cursor: Option<String>,
}

/// One worker run: status, live log while it runs; once ended its exit code, duration, logs
/// (head and tail kept, secrets redacted), result.json, output files with signed download links,
/// the agent's tool calls, and its approval.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkerRunIdParams {
    /// The runId returned by workers_run.
    pub run_id: String,
}

/// Run a worker again with the same inputs (and files) as an earlier run, on the same version
/// or another; the new run links to the one it replays.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersReplayParams {
    /// The run to replay.
    pub run_id: String,
    /// Run on this version instead of the original run's.
    #[schemars(range(min = 1))]
    pub version: Option<u32>,
}

/// Worker runs waiting for approval, newest first, each with its proposal.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkersApprovalsParams {
    /// How many to return: 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit for the newest.
    pub cursor: Option<String>,
}

/// Decide on a worker run waiting for approval. The decision is final: deciding twice is
/// refused.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DecideParams {
    /// The run waiting for approval (workers_approvals lists them).
    pub run_id: String,
    /// Why (kept with the decision, at most 500 characters).
    #[schemars(length(max = 500))]
    pub reason: Option<String>,
}

/// List the worker secrets that are set (names, scope, when, which workers use them — never
/// values).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// Set a worker secret (write-only: nothing reads it back). Workers get the secrets they
/// declare as environment variables; their values are redacted from logs, results and pages.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretSetParams {
    /// An environment variable name, e.g. SLACK_TOKEN.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// The value: 8 bytes to 64 KiB.
    pub value: String,
    /// Only for this worker (default: every worker that declares the name).
    pub worker: Option<String>,
}

/// Delete a worker secret (the one for every worker, or the one set for `worker`). Runs of
/// workers that declare it fail with missing_secret until it is set again.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecretDeleteParams {
    /// The secret's name.
    pub name: String,
    /// The worker it was set for (omit for a secret of every worker).
    pub worker: Option<String>,
}
