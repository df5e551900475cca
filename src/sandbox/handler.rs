//! What a sandbox object does for each op of its API.

use super::api::*;
use super::{store, SandboxObject};
use crate::artifacts::BUCKET;
use crate::error::{Error, ErrorKind, Result};
use crate::rpc::Ack;
use crate::sandboxes::Status;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use worker::console_warn;

impl SandboxHandler for SandboxObject {
    async fn create(&self, op: Create) -> Result<SandboxInfo> {
        if store::load(&self.sql())?.is_some() {
            return Err(Error::conflict(format!("sandbox {} already exists", op.id)));
        }
        self.create_record(op).await
    }

    async fn info(&self, _: Info) -> Result<SandboxInfo> {
        let record = self.record()?;
        if record.status == Status::Running {
            if let Ok(daemon) = self.daemon(&record).await {
                let state = daemon.state().await.ok();
                return Ok(self.describe(record, state, &daemon).await);
            }
        }
        Ok(self.sandbox_info(record, None, Vec::new()))
    }

    async fn update(&self, op: Update) -> Result<SandboxInfo> {
        let mut record = self.record()?;
        let mut spec = record.spec.clone();
        for name in &op.env_unset {
            spec.env.remove(name);
        }
        spec.env.extend(op.env_set);
        if spec.env.len() > handoff_wire::rules::ENV_MAX {
            return Err(Error::invalid(format!(
                "the sandbox would have {} variables; at most {}",
                spec.env.len(),
                handoff_wire::rules::ENV_MAX
            )));
        }
        if let Some(rules) = op.allow_out {
            spec.allow_out = rules;
        }
        if let Some(rules) = op.deny_out {
            spec.deny_out = rules;
        }
        let spec_changed = spec != record.spec;
        record.spec = spec;
        if let Some(idle) = op.idle_timeout_s {
            record.idle_timeout_s = idle;
        }
        let relist = op.metadata.is_some();
        if let Some(metadata) = op.metadata {
            record.metadata = metadata;
        }
        store::save(&self.sql(), &record)?;
        self.schedule_idle(&record).await?;
        if relist {
            self.relist(&record).await?;
        }
        if spec_changed && record.status == Status::Running {
            // In force at once: rules for the next connection, variables for the next command.
            let daemon = self.daemon(&record).await?;
            self.ensure_on(&daemon).await?;
        }
        self.info(Info {}).await
    }

    async fn secret(&self, op: Secret) -> Result<SandboxInfo> {
        let mut record = self.record()?;
        let secrets = &mut record.spec.secrets;
        let count = secrets.len();
        match op.hosts {
            Some(hosts) => match secrets.iter_mut().find(|g| g.name == op.name) {
                Some(grant) => grant.hosts = hosts,
                None if count >= handoff_wire::rules::SECRETS_MAX => {
                    return Err(Error::invalid(format!(
                        "a sandbox holds at most {} secrets",
                        handoff_wire::rules::SECRETS_MAX
                    )))
                }
                None => secrets.push(handoff_wire::SecretGrant {
                    stand_in: crate::ids::new_secret("handoff-stand-in-"),
                    name: op.name,
                    value: String::new(),
                    hosts,
                }),
            },
            None => {
                let before = secrets.len();
                secrets.retain(|g| g.name != op.name);
                if secrets.len() == before {
                    return Err(Error::not_found(format!(
                        "secret {} is not attached to sandbox {}",
                        op.name, record.id
                    )));
                }
            }
        }
        store::save(&self.sql(), &record)?;
        if record.status == Status::Running {
            // In force at once: the proxy reads the secrets for every request.
            let daemon = self.daemon(&record).await?;
            self.ensure_on(&daemon).await?;
        }
        self.info(Info {}).await
    }

    async fn snapshot_for(&self, op: SnapshotFor) -> Result<ForkSource> {
        let record = self.record()?;
        let copied = self.copy_workspace(&record, &op.key).await?;
        Ok(ForkSource {
            snapshot: copied.as_ref().map(|(key, _)| key.clone()),
            bytes: copied.and_then(|(_, bytes)| bytes),
            spec: record.spec,
            idle_timeout_s: record.idle_timeout_s,
        })
    }

    async fn exec(&self, op: Exec) -> Result<handoff_wire::ExecResult> {
        on_daemon!(self, |d| d.exec(&op.request))
    }

    async fn desktop(&self, op: Desktop) -> Result<handoff_wire::desktop::DesktopReply> {
        on_daemon!(self, |d| d.desktop(&op.action))
    }

    async fn read_file(&self, op: ReadFile) -> Result<handoff_wire::FileContent> {
        on_daemon!(self, |d| d.read_file(&op.path, op.encoding, op.max))
    }

    async fn write_file(&self, op: WriteFile) -> Result<handoff_wire::FileWritten> {
        let bytes = B64
            .decode(op.base64)
            .map_err(|_| Error::invalid("file content is not valid base64"))?;
        on_daemon!(self, |d| d.write_file(&op.path, bytes.clone()))
    }

    async fn list_files(&self, op: ListFiles) -> Result<handoff_wire::FileList> {
        on_daemon!(self, |d| d.list(&op.path))
    }

    async fn zip_dir(&self, op: ZipDir) -> Result<Zipped> {
        let bytes = on_daemon!(self, |d| d.zip(&op.path))?;
        Ok(Zipped {
            size: bytes.len() as u64,
            base64: B64.encode(bytes),
        })
    }

    /// Snapshots the workspace to R2 and stops the sandbox's processes. A sandbox whose
    /// container is gone, or whose daemon lost it, has nothing left to snapshot: it is paused
    /// with the snapshot it had (no container is started just to find that out).
    async fn pause(&self, _: Pause) -> Result<SandboxInfo> {
        let mut record = self.record()?;
        if record.status == Status::Paused {
            return Ok(self.sandbox_info(record, None, Vec::new()));
        }
        if !self.container_gone(&record).await {
            let daemon = self.daemon(&record).await?;
            match daemon.snapshot().await {
                Ok(snapshot) => {
                    self.store_snapshot(&mut record, snapshot).await?;
                    daemon.stop().await?;
                }
                Err(e) if e.kind == ErrorKind::NotFound || self.container_gone(&record).await => {
                    console_warn!(
                        "sandbox {}: its files are gone ({}); paused with its last snapshot",
                        record.id,
                        e.message
                    );
                }
                Err(e) => return Err(e),
            }
        }
        record.status = Status::Paused;
        store::save(&self.sql(), &record)?;
        self.stop_container(&record).await;
        self.sandbox_status_changed(&record).await;
        Ok(self.sandbox_info(record, None, Vec::new()))
    }

    async fn delete(&self, _: Delete) -> Result<Ack> {
        let mut record = self.record()?;
        match self.daemon(&record).await {
            Ok(daemon) => match daemon.delete().await {
                Ok(()) => {}
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
        if let Some(key) = record.snapshot_key.take() {
            if !crate::templates::is_template_key(&key) {
                let _ = self.env.bucket(BUCKET)?.delete(key).await;
            }
        }
        record.status = Status::Deleted;
        store::save(&self.sql(), &record)?;
        self.state.storage().delete_alarm().await?;
        self.stop_container(&record).await;
        self.sandbox_status_changed(&record).await;
        Ok(Ack {})
    }

    async fn resume(&self, _: Resume) -> Result<SandboxInfo> {
        let daemon = self.ready().await?;
        let record = self.record()?;
        let state = daemon.state().await.ok();
        Ok(self.describe(record, state, &daemon).await)
    }

    async fn egress(&self, op: Egress) -> Result<handoff_wire::EgressLog> {
        on_daemon!(self, |d| d.egress(op.limit, op.verdict))
    }

    /// Creates the sandbox unless it exists; otherwise brings its spec up to date and makes
    /// sure it is running.
    async fn ensure(&self, op: Ensure) -> Result<SandboxInfo> {
        let Ensure {
            id,
            name,
            created_by,
            spec,
            idle_timeout_s,
        } = op;
        match store::load(&self.sql())? {
            Some(record) if record.status != Status::Deleted => {
                let mut record = record;
                if record.spec != spec {
                    record.spec = spec;
                    store::save(&self.sql(), &record)?;
                    self.ensured_at.set(0);
                }
                let daemon = self.ready().await?;
                let record = self.record()?;
                let state = daemon.state().await.ok();
                Ok(self.sandbox_info(record, state, Vec::new()))
            }
            _ => {
                self.create_record(Create {
                    id,
                    name,
                    created_by,
                    spec,
                    idle_timeout_s,
                    metadata: serde_json::Map::new(),
                    snapshot: None,
                    template: None,
                    expires_at: None,
                })
                .await
            }
        }
    }

    async fn spawn(&self, op: Spawn) -> Result<handoff_wire::ProcessInfo> {
        on_daemon!(self, |d| d.start_process(&op.request))
    }

    async fn kill(&self, op: Kill) -> Result<handoff_wire::ProcessInfo> {
        self.process_kept(op.id)?;
        on_daemon!(self, |d| d.kill_process(op.id))
    }

    async fn freeze(&self, op: Freeze) -> Result<handoff_wire::ProcessInfo> {
        self.process_kept(op.id)?;
        on_daemon!(self, |d| d.freeze_process(op.id, op.frozen))
    }

    async fn process(&self, op: Process) -> Result<handoff_wire::ProcessInfo> {
        self.process_kept(op.id)?;
        on_daemon!(self, |d| d.process(op.id))
    }

    async fn logs(&self, op: Logs) -> Result<handoff_wire::ProcessLogs> {
        self.process_kept(op.id)?;
        on_daemon!(self, |d| d.process_logs(op.id))
    }

    async fn clone_repo(&self, op: CloneRepo) -> Result<handoff_wire::ExecResult> {
        on_daemon!(self, |d| d.git_clone(&op.request))
    }

    async fn call_port(&self, op: CallPort) -> Result<PortReply> {
        on_daemon!(self, |d| d.port_request(&op.request))
    }
}

impl SandboxObject {
    /// A process op on a paused sandbox: pausing stopped every process, so the answer is "not
    /// found" without waking the sandbox (a container started and its snapshot restored only
    /// to learn that), as the daemon of a running one answers for a process it lost.
    fn process_kept(&self, id: u64) -> Result<()> {
        let record = self.record()?;
        if record.status == Status::Paused {
            return Err(Error::not_found(format!(
                "process {id} is gone: sandbox {} is paused, and pausing stopped its processes",
                record.id
            )));
        }
        Ok(())
    }
}
