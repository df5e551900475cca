//! Outputs of the `workers_*` tools (their JSON Schemas are the tools' `outputSchema`). Times are
//! RFC 3339 UTC strings; nothing here ever carries a secret value.

use crate::runs::RunStatus;
use crate::time::rfc3339;
pub use crate::workers::run_view::*;
use crate::workers::{VersionRecord, WorkerRecord};
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
