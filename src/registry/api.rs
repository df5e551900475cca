//! What the worker registry can be asked, and its typed client (the Worker's tools and routes,
//! the sessions that run workers).

use crate::error::{Error, Result};
use crate::rpc::{self, Ack, Page};
use crate::templates::TemplateRecord;
use crate::workers::{
    FileSet, InputFile, Manifest, Trigger, VersionRecord, WorkerRecord, WorkerRunSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use worker::Env;

/// Binding name of the registry Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "WORKERS";
/// The deployment's one registry instance.
const INSTANCE: &str = "workers-v1";

rpc::ops! {
    /// A request to the worker registry.
    pub enum RegistryRequest, answered by RegistryHandler {
        /// Checks a worker folder and stores it as the worker's next version (or, for a folder
        /// identical to the current version, answers that version unchanged).
        deploy: Deploy {
            principal: String,
            files: FileSet,
            source: String,
            /// The Worker origin the deploy came through (scheduled runs reach the proxy there).
            origin: Option<String>,
        } => Deployed;
        /// Workers by name, after `after` (a name).
        list_workers: ListWorkers { limit: u32, after: Option<String> } => Listed;
        /// A worker with its current version's manifest.
        get_worker: GetWorker { name: String } => WorkerDetail;
        /// Versions newest first, strictly older than `before`.
        list_versions: ListVersions { name: String, limit: u32, before: Option<i64> } => Page<VersionRecord>;
        /// One version (the current one when `version` is `None`), with its files if asked.
        get_version: GetVersion { name: String, version: Option<u32>, files: bool } => VersionRecord;
        /// A new version with the manifest and files of an older one, made current.
        rollback: Rollback { name: String, to: u32, principal: String } => Deployed;
        /// Removes a worker, its versions and its schedule (its runs stay in the ledger).
        delete_worker: DeleteWorker { name: String } => Ack;
        /// Checks a run request against the worker's version and answers what to start.
        prepare_run: PrepareRun {
            name: String,
            version: Option<u32>,
            trigger: Trigger,
            inputs: Map<String, Value>,
            files: Vec<InputFile>,
            replay_of: Option<String>,
            /// For webhook runs: the hook id the request came in on (checked against the worker's).
            hook_id: Option<String>,
            /// For webhook runs: where the payload is stored.
            webhook_key: Option<String>,
        } => PreparedRun;
        /// Sets a secret (for every worker, or one), sealed at rest. Write-only.
        set_secret: SetSecret {
            name: String,
            value: String,
            worker: Option<String>,
            principal: String,
        } => SecretInfo;
        delete_secret: DeleteSecret { name: String, worker: Option<String> } => Ack;
        /// Secret names (never values) with who uses them.
        list_secrets: ListSecrets {} => Vec<SecretInfo>;
        /// The values of a worker's declared secrets (a worker's own scope first), for its run.
        reveal_secrets: RevealSecrets { worker: String, names: Vec<String> } => Revealed;
        /// Sets a sandbox secret, sealed at rest. Only the owner's secrets page sends this: no
        /// tool does, so no model ever writes a secret's value.
        set_sandbox_secret: SetSandboxSecret { name: String, value: String, principal: String } => SandboxSecretInfo;
        delete_sandbox_secret: DeleteSandboxSecret { name: String } => Ack;
        /// Sandbox secret names (never values).
        list_sandbox_secrets: ListSandboxSecrets {} => Vec<SandboxSecretInfo>;
        /// Sandbox secrets' values, for a sandbox object to hand to its egress proxy.
        reveal_sandbox_secrets: RevealSandboxSecrets { names: Vec<String> } => Revealed;
        /// Stores a new sandbox template (building or ready); a name in use is refused unless
        /// its template failed.
        put_template: PutTemplate { record: Box<TemplateRecord> } => TemplateRecord;
        get_template: GetTemplate { name: String } => TemplateRecord;
        list_templates: ListTemplates {} => Vec<TemplateRecord>;
        /// A build's outcome: the workspace's key and size, or why it failed. Applies only
        /// while the template is building in `build_sandbox`.
        finish_template: FinishTemplate {
            name: String,
            build_sandbox: String,
            outcome: std::result::Result<(String, Option<i64>), String>,
        } => TemplateRecord;
        /// Removes a template and answers what it was (its workspace and build sandbox are
        /// the caller's to delete).
        delete_template: DeleteTemplate { name: String } => TemplateRecord;
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Deployed {
    pub worker: WorkerRecord,
    pub version: VersionRecord,
    /// False when the folder equals the current version (nothing new was stored).
    pub created: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Listed {
    pub items: Vec<WorkerRecord>,
    /// Pass as `after` for the next page.
    pub next: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerDetail {
    pub worker: WorkerRecord,
    pub version: VersionRecord,
    /// The webhook's secret URL path and signing secret, when the worker takes webhooks.
    pub webhook: Option<Webhook>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Webhook {
    /// `/hooks/<worker>/<hook id>`.
    pub path: String,
    pub hook_id: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PreparedRun {
    pub spec: WorkerRunSpec,
    pub manifest: Manifest,
    /// Who deployed the worker (scheduled and webhook runs are theirs).
    pub owner: String,
    /// The origin the worker was deployed through.
    pub origin: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretInfo {
    pub name: String,
    /// The worker it is for; `None`: every worker that declares it.
    pub worker: Option<String>,
    pub updated_at: i64,
    pub updated_by: String,
    /// Workers whose current version declares this name.
    pub used_by: Vec<String>,
}

/// A secret sandboxes may have swapped into their requests.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSecretInfo {
    pub name: String,
    pub updated_at: i64,
    pub updated_by: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Revealed {
    pub values: BTreeMap<String, String>,
    /// Declared names with no value set.
    pub missing: Vec<String>,
}

/// A typed handle on the deployment's registry.
pub type RegistryClient = rpc::Client<RegistryRequest>;

pub fn client(env: &Env) -> Result<RegistryClient> {
    Ok(rpc::Client::new(
        env.durable_object(BINDING)?.get_by_name(INSTANCE)?,
    ))
}

/// A sandbox secret's name: a variable name (the stand-in's), not `HANDOFF_…`.
pub fn check_sandbox_secret_name(name: &str) -> Result<()> {
    if !handoff_wire::rules::is_env_name(name) || name.starts_with("HANDOFF_") {
        return Err(Error::invalid(format!(
            "secret name {:?} must be letters, digits and '_' (an environment variable name, \
             not HANDOFF_…)",
            crate::error::excerpt(name)
        )));
    }
    Ok(())
}
