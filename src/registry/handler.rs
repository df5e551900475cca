//! What the registry does for each op: deploys (checked in full, stored as immutable versions),
//! listings, rollbacks, run requests checked against the version they run, and secrets.

use super::api::*;
use super::store::{self, NewVersion, SecretRow};
use crate::config::workers as settings;
use crate::error::{Error, Result};
use crate::ids;
use crate::rpc::{Ack, Page};
use crate::seal;
use crate::templates::TemplateRecord;
use crate::workers::inputs::{check_file, check_values};
use crate::workers::manifest;
use crate::workers::read::{problems_message, Rules};
use crate::workers::redact::MIN_SECRET_LEN;
use crate::workers::{schedule, Trigger, VersionRecord, WorkerRecord, WorkerRunSpec};
use std::collections::BTreeMap;
use worker::{Env, SqlStorage};

/// Longest secret value.
const SECRET_MAX_BYTES: usize = 64 * 1024;
/// How many upcoming fire times a worker shows.
const SHOWN_FIRES: usize = 3;

pub(super) struct Call<'a> {
    pub env: &'a Env,
    pub sql: SqlStorage,
    pub now: i64,
}

/// The path of a worker's webhook.
pub fn webhook_path(name: &str, hook_id: &str) -> String {
    format!("/hooks/{name}/{hook_id}")
}

impl Call<'_> {
    fn live(&self, name: &str) -> Result<store::Row> {
        store::worker(&self.sql, name)?.ok_or_else(|| {
            Error::not_found(format!(
                "worker {name:?} not found; workers_list shows the deployed workers"
            ))
        })
    }

    fn version(&self, name: &str, number: u32) -> Result<VersionRecord> {
        store::version(&self.sql, name, number)?.ok_or_else(|| {
            Error::not_found(format!(
                "worker {name:?} has no version {number}; workers_versions lists them"
            ))
        })
    }

    /// The record as shown: upcoming fire times and the webhook path filled in.
    fn shown(&self, row: store::Row, version: &VersionRecord) -> WorkerRecord {
        let mut record = row.record;
        if let (Some(s), Some(next)) = (&version.manifest.triggers.schedule, row.next_fire_at) {
            let mut fires = vec![next];
            fires.extend(
                schedule::next_fires(&s.cron, &s.timezone, next, SHOWN_FIRES - 1)
                    .unwrap_or_default(),
            );
            record.next_fires = fires;
        }
        record.webhook_path = row.hook_id.map(|h| webhook_path(&record.name, &h));
        record
    }

    /// Stores a version (new folder or an older one's) and answers the worker as it now is.
    fn store_version(
        &self,
        manifest: &crate::workers::Manifest,
        new: NewVersion<'_>,
    ) -> Result<Deployed> {
        let name = manifest.name.clone();
        let number = store::add_version(&self.sql, &new)?;
        let version = self.version(&name, number)?;
        let row = self.live(&name)?;
        Ok(Deployed {
            worker: self.shown(row, &version),
            version,
            created: true,
        })
    }

    /// Hook id and first fire time for a manifest about to become current.
    fn triggers_of(
        &self,
        manifest: &crate::workers::Manifest,
        existing: Option<&store::Row>,
    ) -> (Option<String>, Option<i64>) {
        let hook = manifest.triggers.webhook.then(|| {
            existing
                .and_then(|r| r.hook_id.clone())
                .unwrap_or_else(|| ids::new_id(ids::HOOK))
        });
        let next = manifest.triggers.schedule.as_ref().and_then(|s| {
            schedule::next_fires(&s.cron, &s.timezone, self.now, 1)
                .ok()
                .and_then(|f| f.first().copied())
        });
        (hook, next)
    }
}

impl RegistryHandler for Call<'_> {
    async fn deploy(&self, op: Deploy) -> Result<Deployed> {
        let rules = Rules {
            now_ms: self.now,
            min_schedule_s: settings::min_schedule_secs(self.env),
        };
        let manifest = crate::workers::read::read(&op.files, &rules)
            .map_err(|problems| Error::invalid(problems_message(&problems)))?;
        let digest = op.files.digest();
        let existing = store::worker(&self.sql, &manifest.name)?;
        if let Some(row) = &existing {
            let current = self.version(&manifest.name, row.record.current_version)?;
            if current.digest == digest {
                let row = self.live(&manifest.name)?;
                return Ok(Deployed {
                    worker: self.shown(row, &current),
                    version: current,
                    created: false,
                });
            }
        }
        let (hook_id, next_fire_at) = self.triggers_of(&manifest, existing.as_ref());
        self.store_version(
            &manifest,
            NewVersion {
                manifest: &manifest,
                digest: &digest,
                source: &op.source,
                files: Some(&op.files),
                files_of: None,
                by: &op.principal,
                now: self.now,
                hook_id,
                next_fire_at,
                origin: op.origin.clone(),
            },
        )
    }

    async fn list_workers(&self, op: ListWorkers) -> Result<Listed> {
        let mut rows = store::list_workers(&self.sql, op.after.as_deref(), op.limit)?;
        let more = rows.len() > op.limit as usize;
        rows.truncate(op.limit as usize);
        let next = more
            .then(|| rows.last().map(|r| r.record.name.clone()))
            .flatten();
        let mut items = Vec::new();
        for row in rows {
            let version = self.version(&row.record.name, row.record.current_version)?;
            items.push(self.shown(row, &version));
        }
        Ok(Listed { items, next })
    }

    async fn get_worker(&self, op: GetWorker) -> Result<WorkerDetail> {
        let row = self.live(&op.name)?;
        let version = self.version(&op.name, row.record.current_version)?;
        let webhook = row.hook_id.clone().map(|hook_id| Webhook {
            path: webhook_path(&op.name, &hook_id),
            hook_id,
        });
        Ok(WorkerDetail {
            worker: self.shown(row, &version),
            version,
            webhook,
        })
    }

    async fn list_versions(&self, op: ListVersions) -> Result<Page<VersionRecord>> {
        self.live(&op.name)?;
        let rows = store::versions(&self.sql, &op.name, op.before, op.limit)?;
        let (items, next) = crate::rpc::paginate(rows, op.limit);
        Ok(Page { items, next })
    }

    async fn get_version(&self, op: GetVersion) -> Result<VersionRecord> {
        let row = self.live(&op.name)?;
        let number = op.version.unwrap_or(row.record.current_version);
        let mut version = self.version(&op.name, number)?;
        if op.files {
            version.files = Some(store::folder(&self.sql, &op.name, version.files_of)?);
        }
        Ok(version)
    }

    async fn rollback(&self, op: Rollback) -> Result<Deployed> {
        let row = self.live(&op.name)?;
        let old = self.version(&op.name, op.to)?;
        if op.to == row.record.current_version {
            return Err(Error::conflict(format!(
                "v{} is already the current version of {}",
                op.to, op.name
            )));
        }
        let (hook_id, next_fire_at) = self.triggers_of(&old.manifest, Some(&row));
        let source = format!("rollback to v{}", op.to);
        self.store_version(
            &old.manifest,
            NewVersion {
                manifest: &old.manifest,
                digest: &old.digest,
                source: &source,
                files: None,
                files_of: Some(old.files_of),
                by: &op.principal,
                now: self.now,
                hook_id,
                next_fire_at,
                origin: None,
            },
        )
    }

    async fn delete_worker(&self, op: DeleteWorker) -> Result<Ack> {
        self.live(&op.name)?;
        store::delete_worker(&self.sql, &op.name, self.now)?;
        Ok(Ack {})
    }

    async fn prepare_run(&self, op: PrepareRun) -> Result<PreparedRun> {
        let row = self.live(&op.name)?;
        let number = op.version.unwrap_or(row.record.current_version);
        let version = self.version(&op.name, number)?;
        let m = version.manifest;
        match op.trigger {
            Trigger::Manual if !m.triggers.manual => {
                return Err(Error::invalid(format!(
                    "worker {} does not run by hand (triggers.manual: false)",
                    m.name
                )))
            }
            Trigger::Webhook
                if !m.triggers.webhook || op.hook_id.is_none() || op.hook_id != row.hook_id =>
            {
                return Err(Error::not_found("no such webhook"));
            }
            _ => {}
        }
        let names: Vec<String> = op.files.iter().map(|f| f.name.clone()).collect();
        let mut given = op.inputs.clone();
        if op.trigger == Trigger::Webhook {
            // A payload carries much besides: its fields named like inputs are the inputs.
            given.retain(|k, _| m.inputs.iter().any(|i| &i.name == k));
        }
        let mut problems = match check_values(&m.inputs, &given, &names) {
            Ok(inputs) => {
                let mut problems = Vec::new();
                for file in &op.files {
                    if let Some(spec) = m.inputs.iter().find(|i| i.name == file.name) {
                        if let Err(why) =
                            check_file(spec, &file.filename, &file.media_type, file.size)
                        {
                            problems.push(crate::workers::Problem::new(
                                format!("files.{}", file.name),
                                why,
                            ));
                        }
                    }
                }
                if problems.is_empty() {
                    return self.prepared(op, m, number, inputs, &row);
                }
                problems
            }
            Err(problems) => problems,
        };
        problems.truncate(50);
        Err(Error::invalid(format!(
            "the inputs do not fit worker {} v{number}:\n{}",
            m.name,
            crate::workers::fields::describe(&problems)
        )))
    }

    async fn set_secret(&self, op: SetSecret) -> Result<SecretInfo> {
        let key = settings::secrets_key(self.env).ok_or_else(|| {
            Error::not_configured(format!(
                "worker secrets need {} (32+ characters) on this deployment",
                settings::SECRETS_KEY
            ))
        })?;
        check_secret_name(&op.name)?;
        let scope = scope_of(op.worker.as_deref())?;
        if op.value.len() < MIN_SECRET_LEN
            || op.value.len() > SECRET_MAX_BYTES
            || op.value.contains('\0')
        {
            return Err(Error::invalid(format!(
                "`value` must be {MIN_SECRET_LEN} to {SECRET_MAX_BYTES} bytes without NUL \
                 (shorter values would be redacted all over the logs)"
            )));
        }
        let sealed = seal::seal(&key, &store::sealed_name(&scope, &op.name), &op.value)?;
        store::put_secret(
            &self.sql,
            &SecretRow {
                scope,
                name: op.name.clone(),
                sealed,
                updated_at: self.now,
                updated_by: op.principal,
            },
        )?;
        self.list_secrets(ListSecrets {})
            .await?
            .into_iter()
            .find(|s| s.name == op.name && s.worker == op.worker)
            .ok_or_else(|| Error::internal("the secret was not stored"))
    }

    async fn delete_secret(&self, op: DeleteSecret) -> Result<Ack> {
        let scope = scope_of(op.worker.as_deref())?;
        if !store::delete_secret(&self.sql, &scope, &op.name)? {
            return Err(Error::not_found(format!(
                "no secret {} is set{}; workers_secrets_list shows them",
                op.name,
                op.worker.map(|w| format!(" for {w}")).unwrap_or_default()
            )));
        }
        Ok(Ack {})
    }

    async fn list_secrets(&self, _: ListSecrets) -> Result<Vec<SecretInfo>> {
        let manifests = store::current_manifests(&self.sql)?;
        let clause = "WHERE scope != ?";
        let sandbox = vec![store::SANDBOX_SCOPE.into()];
        Ok(store::secrets_where(&self.sql, clause, sandbox)?
            .into_iter()
            .map(|row| {
                let worker = (!row.scope.is_empty()).then(|| row.scope.clone());
                let used_by = manifests
                    .iter()
                    .filter(|m| m.secrets.contains(&row.name))
                    .filter(|m| worker.as_ref().is_none_or(|w| *w == m.name))
                    .map(|m| m.name.clone())
                    .collect();
                SecretInfo {
                    name: row.name,
                    worker,
                    updated_at: row.updated_at,
                    updated_by: row.updated_by,
                    used_by,
                }
            })
            .collect())
    }

    async fn reveal_secrets(&self, op: RevealSecrets) -> Result<Revealed> {
        let mut values = BTreeMap::new();
        let mut missing = Vec::new();
        for name in op.names {
            let rows = store::secrets_where(
                &self.sql,
                "WHERE name = ? AND scope IN (?, '')",
                vec![name.as_str().into(), op.worker.as_str().into()],
            )?;
            // The worker's own value wins over the one for every worker.
            let Some(row) = rows
                .iter()
                .find(|r| r.scope == op.worker)
                .or_else(|| rows.first())
            else {
                missing.push(name);
                continue;
            };
            let key = settings::secrets_key(self.env).ok_or_else(|| {
                Error::not_configured(format!(
                    "{} is not set, so worker secrets cannot be read",
                    settings::SECRETS_KEY
                ))
            })?;
            let value = seal::open(
                &key,
                &store::sealed_name(&row.scope, &row.name),
                &row.sealed,
            )?;
            values.insert(name, value);
        }
        Ok(Revealed { values, missing })
    }

    async fn set_sandbox_secret(&self, op: SetSandboxSecret) -> Result<SandboxSecretInfo> {
        Call::set_sandbox_secret(self, &op.name, &op.value, op.principal)
    }

    async fn delete_sandbox_secret(&self, op: DeleteSandboxSecret) -> Result<Ack> {
        Call::delete_sandbox_secret(self, &op.name)
    }

    async fn list_sandbox_secrets(&self, _: ListSandboxSecrets) -> Result<Vec<SandboxSecretInfo>> {
        self.sandbox_secrets()
    }

    async fn reveal_sandbox_secrets(&self, op: RevealSandboxSecrets) -> Result<Revealed> {
        Call::reveal_sandbox_secrets(self, op.names)
    }

    async fn put_template(&self, op: PutTemplate) -> Result<TemplateRecord> {
        Call::put_template(self, *op.record)
    }

    async fn get_template(&self, op: GetTemplate) -> Result<TemplateRecord> {
        self.template(&op.name)
    }

    async fn list_templates(&self, _: ListTemplates) -> Result<Vec<TemplateRecord>> {
        self.templates()
    }

    async fn finish_template(&self, op: FinishTemplate) -> Result<TemplateRecord> {
        Call::finish_template(self, &op.name, &op.build_sandbox, op.outcome)
    }

    async fn delete_template(&self, op: DeleteTemplate) -> Result<TemplateRecord> {
        Call::delete_template(self, &op.name)
    }
}

impl Call<'_> {
    fn prepared(
        &self,
        op: PrepareRun,
        manifest: crate::workers::Manifest,
        version: u32,
        inputs: serde_json::Map<String, serde_json::Value>,
        row: &store::Row,
    ) -> Result<PreparedRun> {
        if op.trigger == Trigger::Manual || op.trigger == Trigger::Replay {
            let missing = self.unset_secrets(&manifest)?;
            if !missing.is_empty() {
                return Err(Error::invalid(format!(
                    "worker {} needs the secret(s) {} which are not set; set them with \
                     workers_secret_set",
                    manifest.name,
                    missing.join(", ")
                )));
            }
        }
        let spec = WorkerRunSpec {
            worker: manifest.name.clone(),
            version,
            runtime: manifest.runtime,
            trigger: op.trigger,
            inputs,
            files: op.files,
            replay_of: op.replay_of,
            webhook_key: op.webhook_key,
            due_at: None,
            approval_required: manifest.approvals.required,
            approval_label: manifest
                .approvals
                .required
                .then(|| manifest.approvals.label.clone()),
        };
        Ok(PreparedRun {
            spec,
            manifest,
            owner: row.record.created_by.clone(),
            origin: row.origin.clone(),
        })
    }
}

fn check_secret_name(name: &str) -> Result<()> {
    if !handoff_wire::rules::is_env_name(name) || name.starts_with("HANDOFF_") {
        return Err(Error::invalid(format!(
            "`name` {:?} must be letters, digits and '_' (an environment variable name, not HANDOFF_…)",
            crate::error::excerpt(name)
        )));
    }
    Ok(())
}

fn scope_of(worker: Option<&str>) -> Result<String> {
    match worker {
        None => Ok(String::new()),
        Some(w) if manifest::is_worker_name(w) => Ok(w.to_string()),
        Some(w) => Err(Error::invalid(format!(
            "`worker` {:?} is not a worker name",
            crate::error::excerpt(w)
        ))),
    }
}
