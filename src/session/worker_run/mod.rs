//! Driving a worker run: a fresh sandbox whose egress is the worker's allow-list (nothing by
//! default) → the worker's folder, `inputs.json`, input files and webhook payload written in
//! (`stage.rs`) → the script run with its secrets (`script.rs`) or the skill handed to an agent
//! limited to its tools (`agent.rs`) → for workers that need approval, a stop before the side
//! effect (`gate.rs`) → logs, `result.json` and `outputs/` stored, the sandbox removed
//! (`collect.rs`). Like coding runs, every step persists its state first, so a restart repeats
//! at most one step.

mod agent;
mod collect;
mod gate;
mod script;
mod stage;

pub(super) use agent::{over_limit as agent_over_limit, OVER_LIMIT};

use super::driver::{Driver, Next};
use super::store::{Current, Phase, WorkerState};
use crate::error::{Error, Result};
use crate::registry::api::{self as registry, GetVersion, RevealSecrets, Revealed};
use crate::runs::{RunErrorCode, RunRecord};
use crate::sandbox::api::{Delete, Ensure, Kill};
use crate::workers::redact::Redactor;
use crate::workers::{Manifest, Runtime, VersionRecord, WorkerRunSpec};
use handoff_wire::SandboxSpec;
use std::collections::BTreeMap;

/// The worker's folder inside the sandbox; scripts run here.
pub const DIR: &str = "/home/sandbox/worker";
/// How long a worker's sandbox may sit idle (it is removed when the run ends; a run waiting for
/// approval lets it sleep to R2 instead of holding a machine).
const IDLE_S: i64 = 900;

impl Driver<'_> {
    /// One step of a worker run.
    pub(in crate::session) async fn advance_worker(
        &self,
        mut current: Current,
        run: &RunRecord,
        spec: &WorkerRunSpec,
    ) -> Result<Next> {
        let state = current
            .worker
            .get_or_insert_with(WorkerState::default)
            .clone();
        match current.phase {
            Phase::Preparing => {
                self.progress(&current, "preparing a fresh sandbox").await?;
                let version = self.worker_version(spec, false).await?;
                self.ensure_worker_sandbox(run, &version.manifest, state.apply)
                    .await?;
                current.phase = Phase::Staging;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Staging => {
                self.progress(&current, "writing the worker's files and inputs")
                    .await?;
                let version = self.worker_version(spec, true).await?;
                self.stage(spec, &version).await?;
                current.phase = match spec.runtime {
                    Runtime::Skill => Phase::StartingAgent,
                    _ => Phase::Executing,
                };
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Executing => self.execute(current, run, spec).await,
            Phase::AwaitingApproval => self.at_gate(current, run, spec).await,
            Phase::Collecting => self.collect(current, run, spec).await,
            Phase::StartingAgent | Phase::Prompting | Phase::Working | Phase::Finishing => {
                self.advance_worker_agent(current, run, spec).await
            }
            Phase::Cloning => Err(Error::internal("a worker run does not clone")),
            Phase::Resuming => Err(Error::internal("a worker's agent is not resumed")),
        }
    }

    /// The version a run runs (with its folder when asked).
    pub(super) async fn worker_version(
        &self,
        spec: &WorkerRunSpec,
        files: bool,
    ) -> Result<VersionRecord> {
        registry::client(self.env)?
            .call(GetVersion {
                name: spec.worker.clone(),
                version: Some(spec.version),
                files,
            })
            .await
    }

    /// The worker's declared secrets, or the run fails saying which are not set.
    pub(super) async fn worker_secrets(
        &self,
        current: &Current,
        manifest: &Manifest,
    ) -> Result<Option<BTreeMap<String, String>>> {
        let revealed = self.reveal(manifest).await?;
        if !revealed.missing.is_empty() {
            let message = format!(
                "the secret(s) {} the worker declares are not set; set them with \
                 workers_secret_set and run it again",
                revealed.missing.join(", ")
            );
            self.fail(current, RunErrorCode::MissingSecret, message)
                .await?;
            return Ok(None);
        }
        Ok(Some(revealed.values))
    }

    /// What takes the worker's secret values out of logs, results and outputs.
    pub(super) async fn redactor(&self, manifest: &Manifest) -> Result<Redactor> {
        let revealed = self.reveal(manifest).await?;
        Ok(Redactor::new(
            revealed
                .values
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        ))
    }

    /// The values of the worker's declared secrets (no registry call when it declares none).
    async fn reveal(&self, manifest: &Manifest) -> Result<Revealed> {
        if manifest.secrets.is_empty() {
            return Ok(Revealed {
                values: BTreeMap::new(),
                missing: Vec::new(),
            });
        }
        registry::client(self.env)?
            .call(RevealSecrets {
                worker: manifest.name.clone(),
                names: manifest.secrets.clone(),
            })
            .await
    }

    /// Creates (or updates) the run's sandbox with the egress the pass may use: before approval
    /// only `approvals.allow_before`, otherwise `network.allow`; nothing when empty. An agent
    /// also reaches the Worker's model proxy.
    pub(super) async fn ensure_worker_sandbox(
        &self,
        run: &RunRecord,
        manifest: &Manifest,
        apply: bool,
    ) -> Result<()> {
        let mut spec: SandboxSpec = self.sandbox_spec(run)?;
        spec.allow_out = if manifest.approvals.required && !apply {
            manifest.approvals.allow_before.clone()
        } else {
            manifest.network.allow.clone()
        };
        if manifest.runtime == Runtime::Skill {
            if let Some(host) = self.proxy_host(run)? {
                spec.allow_out.push(host);
            }
        }
        if spec.allow_out.is_empty() {
            spec.deny_out = vec!["*".to_string()];
        }
        let ensure = Ensure {
            id: super::driver::sandbox_id(&self.session_id),
            name: format!("worker {} ({})", manifest.name, run.id),
            created_by: run.created_by.clone(),
            spec,
            idle_timeout_s: IDLE_S,
        };
        self.sandbox()?.call(ensure).await?;
        Ok(())
    }

    /// The Worker's host as an egress rule, when the sandbox reaches it by name (not through a
    /// configured alias).
    fn proxy_host(&self, run: &RunRecord) -> Result<Option<String>> {
        let url = self.worker_url(run)?;
        let parsed =
            worker::Url::parse(&url).map_err(|_| Error::internal("the Worker URL is not a URL"))?;
        if self.sandbox_spec(run)?.hosts.is_empty() {
            return Ok(parsed.host_str().map(|h| match parsed.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_string(),
            }));
        }
        Ok(None)
    }

    /// Stops what a worker run left running and removes its sandbox (best effort).
    pub(in crate::session) async fn release_worker(&self, current: &Current) {
        let Ok(sandbox) = self.sandbox() else {
            return;
        };
        if let Some(process) = current.worker.as_ref().and_then(|w| w.process) {
            let _ = sandbox.call(Kill { id: process }).await;
        }
        let _ = sandbox.call(Delete {}).await;
    }
}
