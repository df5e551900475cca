//! The sandbox Durable Object, one per sandbox: it owns the sandbox's record, picks the backend
//! (its Cloudflare Container, or the local daemon), keeps the daemon's copy in step (recreating
//! and restoring it if the daemon lost it), snapshots the workspace to R2 on pause or when idle,
//! and restores it on resume — which exec and file operations do by themselves.

pub mod api;
mod backend;
mod container;
mod daemon;
pub mod host;
mod snapshots;
mod store;

use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::{Ledger, RegisterSandbox, SetSandboxStatus};
use crate::registry::api::RevealSandboxSecrets;
use crate::rpc;
use crate::sandboxes::{SandboxRecord, Status};
use crate::time::{alarm_offset, now_ms};
use api::{Pause, SandboxHandler, SandboxInfo, SandboxRequest, EXEC_STREAM_PATH};
use daemon::Daemon;
use handoff_wire::ExecRequest;
use std::cell::Cell;
use std::rc::Rc;
use worker::{
    console_error, durable_object, DurableObject, Env, Request, Response, SqlStorage, State,
};

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
                $self.ensure_on(&$daemon).await?;
                $call.await
            }
            other => other,
        }
    }};
}

// After the macro, which it uses.
mod handler;

/// Cloned for each op it answers over RPC (`rpc::export_rpc!`): every field is shared.
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
#[derive(Clone)]
pub struct SandboxObject {
    state: Rc<State>,
    env: Env,
    /// When this instance last made sure the daemon has the sandbox (0: never).
    ensured_at: Rc<Cell<i64>>,
    /// What this instance knows of its container.
    watch: Rc<container::Watch>,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for SandboxObject {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("sandbox schema: {e}");
        }
        Self {
            state: Rc::new(state),
            env,
            ensured_at: Rc::default(),
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
        rpc::fetch_refused()
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(e) = self.idle_check().await {
            console_error!("sandbox alarm: {e}");
        }
        Response::ok("")
    }
}

rpc::export_rpc!(SandboxObject, |sandbox, text| {
    rpc::serve_text(text, |request: SandboxRequest| request.dispatch(sandbox)).await
});

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

    /// Creates the sandbox on the daemon, records it and lists it in the ledger.
    async fn create_record(&self, op: api::Create) -> Result<SandboxInfo> {
        let api::Create {
            id,
            name,
            created_by,
            spec,
            idle_timeout_s,
            metadata,
            snapshot,
            template,
            expires_at,
        } = op;
        let now = now_ms();
        // A sandbox made from a template starts from the template's snapshot (never deleting
        // it) until its first pause stores one of its own.
        let snapshot = snapshot.or(template);
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
            snapshot_at: snapshot.as_ref().map(|_| now),
            snapshot_key: snapshot,
            snapshot_bytes: None,
            expires_at,
        };
        let daemon = self.daemon(&record).await?;
        // Started at once unless a snapshot goes in first: the first command finds it ready.
        let start = record.snapshot_key.is_none();
        let state = self.put_on(&daemon, &record, start).await?;
        // A fork starts from its source's workspace.
        self.restore_snapshot(&record, &daemon).await?;
        record.daemon_created_at = Some(state.created_at);
        store::save(&self.sql(), &record)?;
        self.ensured_at.set(now);
        self.schedule_idle(&record).await?;
        if record
            .snapshot_key
            .as_deref()
            .is_some_and(crate::templates::is_template_key)
        {
            // Soon, in the background: a snapshot of its own (see `adopt_template_snapshot`).
            self.state
                .storage()
                .set_alarm(alarm_offset(now + 1000))
                .await?;
        }
        self.relist(&record).await?;
        Ok(self.describe(record, Some(state), &daemon).await)
    }

    /// Lists the sandbox in the ledger, or brings its listing (name, metadata) up to date.
    async fn relist(&self, record: &SandboxRecord) -> Result<()> {
        Ledger::get(&self.env)?
            .call(RegisterSandbox {
                summary: record.summary(),
            })
            .await?;
        Ok(())
    }

    /// The sandbox as its object reports it, with the ports listening while it runs.
    async fn describe(
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
        self.sandbox_info(record, state, ports)
    }

    fn sandbox_info(
        &self,
        record: SandboxRecord,
        daemon: Option<handoff_wire::SandboxState>,
        ports: Vec<handoff_wire::PortInfo>,
    ) -> SandboxInfo {
        SandboxInfo {
            instance_type: self.machine(&record).map(|m| m.name.to_string()),
            record,
            daemon,
            ports,
        }
    }

    /// The daemon, with the sandbox present and running on it: a paused sandbox is restored
    /// from its snapshot, and one the daemon lost is recreated and restored.
    async fn ready(&self) -> Result<Daemon> {
        let mut record = self.record()?;
        let daemon = self.daemon(&record).await?;
        let now = now_ms();
        if record.status == Status::Paused {
            let state = self.put_on(&daemon, &record, false).await?;
            self.restore_snapshot(&record, &daemon).await?;
            record.status = Status::Running;
            record.daemon_created_at = Some(state.created_at);
            record.last_active_at = now;
            store::save(&self.sql(), &record)?;
            self.ensured_at.set(now);
            self.sandbox_status_changed(&record).await;
        } else if now - self.ensured_at.get() > ENSURE_EVERY_MS {
            record = self.ensure_on(&daemon).await?;
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
    async fn ensure_on(&self, daemon: &Daemon) -> Result<SandboxRecord> {
        let mut record = self.record()?;
        let state = self.put_on(daemon, &record, false).await?;
        if record.daemon_created_at != Some(state.created_at) {
            self.restore_snapshot(&record, daemon).await?;
            record.daemon_created_at = Some(state.created_at);
            store::save(&self.sql(), &record)?;
        }
        self.ensured_at.set(now_ms());
        Ok(record)
    }

    /// Puts the sandbox's spec on the daemon, its secrets' values filled in from the registry
    /// (a secret deleted since it was attached goes without: its stand-in stays as it is).
    async fn put_on(
        &self,
        daemon: &Daemon,
        record: &SandboxRecord,
        start: bool,
    ) -> Result<handoff_wire::SandboxState> {
        let mut spec = record.spec.clone();
        if !spec.secrets.is_empty() {
            let names = spec.secrets.iter().map(|g| g.name.clone()).collect();
            let revealed = match crate::registry::api::client(&self.env) {
                Ok(registry) => registry.call(RevealSandboxSecrets { names }).await,
                Err(e) => Err(e),
            };
            match revealed {
                Ok(mut revealed) => {
                    for grant in &mut spec.secrets {
                        grant.value = revealed.values.remove(&grant.name).unwrap_or_default();
                    }
                }
                Err(e) => console_error!("sandbox {}: its secrets: {e}", record.id),
            }
        }
        daemon.put(&spec, start).await
    }

    async fn sandbox_status_changed(&self, record: &SandboxRecord) {
        let op = SetSandboxStatus {
            id: record.id.clone(),
            status: record.status,
        };
        let result = match Ledger::get(&self.env) {
            Ok(ledger) => ledger.call(op).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            console_error!("sandbox {}: recording status: {e}", record.id);
        }
    }

    /// Sets the alarm for the next of: pausing when idle (while running), the end of its
    /// lifetime.
    async fn schedule_idle(&self, record: &SandboxRecord) -> Result<()> {
        let idle = (record.status == Status::Running)
            .then(|| record.last_active_at + record.idle_timeout_s * 1000);
        let next = match (idle, record.expires_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(at) = next {
            self.state.storage().set_alarm(alarm_offset(at)).await?;
        }
        Ok(())
    }

    /// A sandbox made from a template starts out restoring from the template's snapshot; it
    /// copies that snapshot as its own soon after, so deleting the template never leaves it
    /// without one.
    async fn adopt_template_snapshot(&self, record: &mut SandboxRecord) -> Result<()> {
        let Some(template) = record
            .snapshot_key
            .clone()
            .filter(|k| crate::templates::is_template_key(k))
        else {
            return Ok(());
        };
        let key = crate::artifacts::snapshot_key(&record.id, now_ms());
        let size = self.copy_object(&template, &key).await?;
        // The record as it is now: a pause may have stored a snapshot meanwhile.
        let mut latest = self.record()?;
        if latest.snapshot_key.as_deref() == Some(template.as_str()) {
            latest.snapshot_key = Some(key);
            latest.snapshot_bytes = Some(size);
            store::save(&self.sql(), &latest)?;
        } else {
            let _ = self.env.bucket(crate::artifacts::BUCKET)?.delete(key).await;
        }
        *record = latest;
        Ok(())
    }

    /// Deletes the sandbox at the end of its lifetime; pauses it once it has been idle for its
    /// timeout.
    async fn idle_check(&self) -> Result<()> {
        let Ok(mut record) = self.record() else {
            return Ok(());
        };
        if let Err(e) = self.adopt_template_snapshot(&mut record).await {
            console_error!(
                "sandbox {}: copying its template's snapshot: {e}",
                record.id
            );
        }
        if record.expires_at.is_some_and(|at| now_ms() >= at) {
            SandboxHandler::delete(self, api::Delete {}).await?;
            return Ok(());
        }
        if record.status != Status::Running {
            return self.schedule_idle(&record).await;
        }
        if now_ms() - record.last_active_at >= record.idle_timeout_s * 1000 {
            let paused = SandboxHandler::pause(self, Pause {}).await?;
            // What is left to wake for: the end of its lifetime.
            self.schedule_idle(&paused.record).await?;
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
