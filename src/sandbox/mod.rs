//! The sandbox Durable Object, one per sandbox: it owns the sandbox's record, picks the backend
//! (its Cloudflare Container, or the local daemon), keeps the daemon's copy in step (recreating
//! and restoring it if the daemon lost it), snapshots the workspace to R2 on pause or when idle,
//! and restores it on resume — which exec and file operations do by themselves.

mod api;
mod container;
pub mod daemon;
pub mod exec_stream;
mod snapshots;
mod store;

pub use api::{SandboxClient, SandboxInfo, SandboxOp};
pub use daemon::{PortReply, PortRequest};
pub use store::{SandboxRecord, Status};

use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::Ledger;
use crate::rpc;
use crate::time::{alarm_offset, now_ms};
use api::{Ack, Zipped};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use daemon::{Daemon, Transport};
use handoff_wire::ExecRequest;
use std::cell::Cell;
use std::rc::Rc;
use worker::{
    console_error, console_warn, durable_object, DurableObject, Env, Request, Response, SqlStorage,
    State,
};

/// R2 binding for snapshots and artifacts.
const BUCKET: &str = "ARTIFACTS";
/// The sandbox object's route for a streamed exec (everything else is one RPC route).
pub const EXEC_STREAM_PATH: &str = "/exec-stream";
/// How often the daemon's copy of the sandbox is re-checked while the object is awake.
const ENSURE_EVERY_MS: i64 = 60_000;
/// Activity is written down at most this often (it only feeds the idle timer).
const TOUCH_EVERY_MS: i64 = 5_000;

/// Runs a daemon call; if the daemon answers "not found", makes sure it still has the sandbox
/// (recreating and restoring it if it lost it) and tries once more.
macro_rules! on_daemon {
    ($self:ident, |$daemon:ident| $call:expr) => {{
        let $daemon = $self.ready().await?;
        match $call.await {
            Err(e) if e.kind == ErrorKind::NotFound => {
                $self.ensure(&$daemon).await?;
                $call.await
            }
            other => other,
        }
    }};
}

#[durable_object]
pub struct SandboxObject {
    state: State,
    env: Env,
    /// When this instance last made sure the daemon has the sandbox (0: never).
    ensured_at: Cell<i64>,
    /// What this instance knows of its container.
    watch: Rc<container::Watch>,
}

impl DurableObject for SandboxObject {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("sandbox schema: {e}");
        }
        Self {
            state,
            env,
            ensured_at: Cell::new(0),
            watch: Rc::default(),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        if req.path().starts_with("/preview/") {
            return match self.preview(req).await {
                Ok(response) => Ok(response),
                Err(e) => Ok(crate::http::json(
                    e.http_status(),
                    &serde_json::json!({"error": e.message}),
                )),
            };
        }
        if req.path() == EXEC_STREAM_PATH {
            return rpc::serve_streaming(req, |request: ExecRequest| async move {
                on_daemon!(self, |d| d.exec_stream(&request))
            })
            .await;
        }
        rpc::serve(req, |op: SandboxOp| self.handle(op)).await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(e) = self.idle_check().await {
            console_error!("sandbox alarm: {e}");
        }
        Response::ok("")
    }
}

impl SandboxObject {
    fn sql(&self) -> SqlStorage {
        self.state.storage().sql()
    }

    /// The record of a live (not deleted) sandbox.
    fn record(&self) -> Result<SandboxRecord> {
        match store::load(&self.sql())? {
            Some(r) if r.status != Status::Deleted => Ok(r),
            Some(r) => Err(Error::not_found(format!("sandbox {} was deleted", r.id))),
            None => Err(Error::not_found("sandbox not found")),
        }
    }

    async fn handle(&self, op: SandboxOp) -> Result<serde_json::Value> {
        let value = match op {
            SandboxOp::Create {
                id,
                name,
                created_by,
                spec,
                idle_timeout_s,
                metadata,
            } => {
                if store::load(&self.sql())?.is_some() {
                    return Err(Error::conflict(format!("sandbox {id} already exists")));
                }
                serde_json::to_value(
                    self.create(id, name, created_by, spec, idle_timeout_s, metadata)
                        .await?,
                )?
            }
            SandboxOp::Info => {
                let record = self.record()?;
                let value = if record.status == Status::Running {
                    match self.daemon(&record.id).await {
                        Ok(daemon) => {
                            let state = daemon.state().await.ok();
                            self.info(record, state, &daemon).await
                        }
                        Err(_) => SandboxInfo {
                            record,
                            daemon: None,
                            ports: Vec::new(),
                        },
                    }
                } else {
                    SandboxInfo {
                        record,
                        daemon: None,
                        ports: Vec::new(),
                    }
                };
                serde_json::to_value(value)?
            }
            SandboxOp::Exec { request } => {
                serde_json::to_value(on_daemon!(self, |d| d.exec(&request))?)?
            }
            SandboxOp::ReadFile { path, encoding } => {
                serde_json::to_value(on_daemon!(self, |d| d.read_file(&path, encoding))?)?
            }
            SandboxOp::WriteFile { path, base64 } => {
                let bytes = B64
                    .decode(base64)
                    .map_err(|_| Error::invalid("file content is not valid base64"))?;
                serde_json::to_value(on_daemon!(self, |d| d.write_file(&path, bytes.clone()))?)?
            }
            SandboxOp::ListFiles { path } => {
                serde_json::to_value(on_daemon!(self, |d| d.list(&path))?)?
            }
            SandboxOp::ZipDir { path } => {
                let bytes = on_daemon!(self, |d| d.zip(&path))?;
                serde_json::to_value(Zipped {
                    size: bytes.len() as u64,
                    base64: B64.encode(bytes),
                })?
            }
            SandboxOp::Pause => serde_json::to_value(self.pause().await?)?,
            SandboxOp::Resume => {
                let daemon = self.ready().await?;
                let record = self.record()?;
                let state = daemon.state().await.ok();
                serde_json::to_value(self.info(record, state, &daemon).await)?
            }
            SandboxOp::Delete => serde_json::to_value(self.delete().await?)?,
            SandboxOp::Ensure {
                id,
                name,
                created_by,
                spec,
                idle_timeout_s,
            } => serde_json::to_value(
                self.ensure_exists(id, name, created_by, spec, idle_timeout_s)
                    .await?,
            )?,
            SandboxOp::StartProcess { request } => {
                serde_json::to_value(on_daemon!(self, |d| d.start_process(&request))?)?
            }
            SandboxOp::KillProcess { id } => {
                serde_json::to_value(on_daemon!(self, |d| d.kill_process(id))?)?
            }
            SandboxOp::ProcessLogs { id } => {
                serde_json::to_value(on_daemon!(self, |d| d.process_logs(id))?)?
            }
            SandboxOp::GitClone { request } => {
                serde_json::to_value(on_daemon!(self, |d| d.git_clone(&request))?)?
            }
            SandboxOp::PortRequest { request } => {
                serde_json::to_value(on_daemon!(self, |d| d.port_request(&request))?)?
            }
            SandboxOp::Egress { limit, verdict } => {
                serde_json::to_value(on_daemon!(self, |d| d.egress(limit, verdict))?)?
            }
        };
        Ok(value)
    }

    /// Creates the sandbox on the daemon, records it and lists it in the ledger.
    async fn create(
        &self,
        id: String,
        name: String,
        created_by: String,
        spec: handoff_wire::SandboxSpec,
        idle_timeout_s: i64,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Result<SandboxInfo> {
        let now = now_ms();
        let mut record = SandboxRecord {
            id,
            name,
            created_by,
            created_at: now,
            status: Status::Running,
            spec,
            idle_timeout_s,
            metadata,
            last_active_at: now,
            daemon_created_at: None,
            snapshot_key: None,
            snapshot_bytes: None,
            snapshot_at: None,
        };
        let daemon = self.daemon(&record.id).await?;
        let state = daemon.put(&record.spec).await?;
        record.daemon_created_at = Some(state.created_at);
        store::save(&self.sql(), &record)?;
        self.ensured_at.set(now);
        self.schedule_idle(&record).await?;
        Ledger::get(&self.env)?.register_sandbox(&record).await?;
        Ok(self.info(record, Some(state), &daemon).await)
    }

    /// Creates the sandbox unless it exists; otherwise brings its spec up to date and makes
    /// sure it is running.
    async fn ensure_exists(
        &self,
        id: String,
        name: String,
        created_by: String,
        spec: handoff_wire::SandboxSpec,
        idle_timeout_s: i64,
    ) -> Result<SandboxInfo> {
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
                Ok(SandboxInfo {
                    record,
                    daemon: state,
                    ports: Vec::new(),
                })
            }
            _ => {
                self.create(
                    id,
                    name,
                    created_by,
                    spec,
                    idle_timeout_s,
                    serde_json::Map::new(),
                )
                .await
            }
        }
    }

    async fn info(
        &self,
        record: SandboxRecord,
        state: Option<handoff_wire::SandboxState>,
        daemon: &Daemon,
    ) -> SandboxInfo {
        let ports = match &state {
            Some(s) if s.status == handoff_wire::SandboxStatus::Running => {
                daemon.ports().await.map(|p| p.ports).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        SandboxInfo {
            record,
            daemon: state,
            ports,
        }
    }

    /// The daemon for this sandbox on whichever backend this deployment has.
    async fn daemon(&self, id: &str) -> Result<Daemon> {
        if let Some(container) = self.state.container() {
            let (daemon, started) =
                container::daemon(&container, &self.env, id, &self.watch).await?;
            if started {
                // A new container's daemon has no sandbox yet: the next use puts it back.
                self.ensured_at.set(0);
            }
            return Ok(daemon);
        }
        match config::sandbox_daemon_url(&self.env) {
            Some(base) => Daemon::new(&self.env, Transport::Local { base }, id),
            None => Err(Error::not_configured(format!(
                "this deployment has no sandbox backend: set {} to a running sandbox daemon \
                 (cargo xtask dev starts one) or deploy with Cloudflare Containers",
                config::SANDBOX_DAEMON_URL
            ))),
        }
    }

    /// The daemon, with the sandbox present and running on it: a paused sandbox is restored
    /// from its snapshot, and one the daemon lost is recreated and restored.
    async fn ready(&self) -> Result<Daemon> {
        let mut record = self.record()?;
        let daemon = self.daemon(&record.id).await?;
        let now = now_ms();
        if record.status == Status::Paused {
            let state = daemon.put(&record.spec).await?;
            self.restore_snapshot(&record, &daemon).await?;
            record.status = Status::Running;
            record.daemon_created_at = Some(state.created_at);
            record.last_active_at = now;
            store::save(&self.sql(), &record)?;
            self.ensured_at.set(now);
            self.sandbox_status_changed(&record).await;
        } else if now - self.ensured_at.get() > ENSURE_EVERY_MS {
            record = self.ensure(&daemon).await?;
        }
        if now - record.last_active_at > TOUCH_EVERY_MS {
            record.last_active_at = now;
            store::save(&self.sql(), &record)?;
            self.schedule_idle(&record).await?;
        }
        Ok(daemon)
    }

    /// Makes sure the daemon has this sandbox; if it had to create it afresh (a new container,
    /// a lost directory), the last snapshot is restored into it.
    async fn ensure(&self, daemon: &Daemon) -> Result<SandboxRecord> {
        let mut record = self.record()?;
        let state = daemon.put(&record.spec).await?;
        if record.daemon_created_at != Some(state.created_at) {
            self.restore_snapshot(&record, daemon).await?;
            record.daemon_created_at = Some(state.created_at);
            store::save(&self.sql(), &record)?;
        }
        self.ensured_at.set(now_ms());
        Ok(record)
    }

    /// Snapshots the workspace to R2 and stops the sandbox's processes. A sandbox whose
    /// container is gone, or whose daemon lost it, has nothing left to snapshot: it is paused
    /// with the snapshot it had (no container is started just to find that out).
    async fn pause(&self) -> Result<SandboxInfo> {
        let mut record = self.record()?;
        if record.status == Status::Paused {
            return Ok(SandboxInfo {
                record,
                daemon: None,
                ports: Vec::new(),
            });
        }
        let container_gone = self.state.container().is_some_and(|c| !c.running());
        if !container_gone {
            let daemon = self.daemon(&record.id).await?;
            match daemon.snapshot().await {
                Ok(snapshot) => {
                    self.store_snapshot(&mut record, snapshot).await?;
                    daemon.stop().await?;
                }
                Err(e)
                    if e.kind == ErrorKind::NotFound
                        || self.state.container().is_some_and(|c| !c.running()) =>
                {
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
        if let Some(container) = self.state.container() {
            let _ = container.destroy(None).await;
        }
        self.sandbox_status_changed(&record).await;
        Ok(SandboxInfo {
            record,
            daemon: None,
            ports: Vec::new(),
        })
    }

    async fn delete(&self) -> Result<Ack> {
        let mut record = self.record()?;
        match self.daemon(&record.id).await {
            Ok(daemon) => match daemon.delete().await {
                Ok(()) => {}
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
        if let Some(key) = record.snapshot_key.take() {
            let _ = self.env.bucket(BUCKET)?.delete(key).await;
        }
        record.status = Status::Deleted;
        store::save(&self.sql(), &record)?;
        self.state.storage().delete_alarm().await?;
        if let Some(container) = self.state.container() {
            let _ = container.destroy(None).await;
        }
        self.sandbox_status_changed(&record).await;
        Ok(Ack {})
    }

    async fn sandbox_status_changed(&self, record: &SandboxRecord) {
        let result = match Ledger::get(&self.env) {
            Ok(ledger) => ledger.sandbox_status(&record.id, record.status).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            console_error!("sandbox {}: recording status: {e}", record.id);
        }
    }

    async fn schedule_idle(&self, record: &SandboxRecord) -> Result<()> {
        let at = record.last_active_at + record.idle_timeout_s * 1000;
        self.state.storage().set_alarm(alarm_offset(at)).await?;
        Ok(())
    }

    /// Pauses the sandbox once it has been idle for its timeout.
    async fn idle_check(&self) -> Result<()> {
        let record = match self.record() {
            Ok(r) if r.status == Status::Running => r,
            _ => return Ok(()),
        };
        if now_ms() - record.last_active_at >= record.idle_timeout_s * 1000 {
            self.pause().await?;
        } else {
            self.schedule_idle(&record).await?;
        }
        Ok(())
    }

    /// `/preview/<port>/<path>`: forwards the request to that port in the sandbox.
    async fn preview(&self, req: Request) -> Result<Response> {
        let path = req.path();
        let rest = path.trim_start_matches("/preview/");
        let (port, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let port: u16 = port
            .parse()
            .map_err(|_| Error::invalid("bad preview port"))?;
        let query = req
            .url()?
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let daemon = self.ready().await?;
        daemon
            .forward(&req, &format!("/ports/{port}/http/{tail}{query}"))
            .await
    }
}
