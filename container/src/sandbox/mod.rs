//! Sandboxes: a directory each (`<root>/<id>/home` is the workspace), a persisted spec and host
//! user, and — while running — an isolated init, a cgroup and an egress proxy. The registry
//! adopts the directories it finds at start, so a daemon restart keeps every sandbox's files;
//! processes start again on the next command.
//!
//! Every sandbox has a host user of its own (`--uid-base` + a slot), which owns its workspace
//! and runs its processes, so no two sandboxes — and no sandbox and the host — share a user.
//! The sandbox root is `0711` and each sandbox directory `0711` with a `0700` workspace: the
//! sandbox's user can reach its own workspace and nothing else there.

pub mod cgroup;
mod command;
pub mod confine;
pub mod detect;
mod direct;
pub mod gate;
pub mod init;
pub mod isolation;
mod layout;
mod reap;
pub mod seccomp;
mod secrets;
mod validate;
pub mod volume;

use crate::clock::now_ms;
use crate::egress;
use crate::error::{ApiError, Result};
use crate::netns;
use crate::processes::table::Table;
use crate::tree;
use cgroup::{Cgroups, SandboxCgroup};
use confine::Namespaces;
use handoff_wire::{Isolation, SandboxSpec, SandboxState, SandboxStatus};
use init::Init;
use isolation::{HostIsolation, Mode, PROXY_PORT};
use layout::{data_dir, set_mode, write_meta, Meta};
pub use layout::{scratch_archive, INCOMING, OUTGOING};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::Mutex as AsyncMutex;
pub use validate::valid_id;
use validate::{check_id, check_spec};

pub struct Registry {
    root: PathBuf,
    /// A host directory of tools shown read-only at `TOOLS_DIR` in every sandbox.
    tools: Option<PathBuf>,
    host: HostIsolation,
    cgroups: Option<Cgroups>,
    etc: Vec<PathBuf>,
    /// Host user of slot 0 (kept for the start-up probe); sandbox `n` gets `uid_base + n`.
    uid_base: u32,
    /// Per-sandbox file systems (disk quotas), where the host allows them.
    volumes: Option<Arc<volume::Pool>>,
    /// Why there are no quotas, when there are none.
    volumes_missing: Option<String>,
    /// Held while a sandbox is created.
    creating: Mutex<()>,
    /// The one sandbox this daemon serves (a container of its own), if it serves only one.
    pinned: Option<String>,
    /// Whether sandbox users are kept off the network beyond loopback (container mode).
    direct: direct::DirectEgress,
    sandboxes: Mutex<HashMap<String, Arc<Sandbox>>>,
}

pub struct Sandbox {
    pub id: String,
    dir: PathBuf,
    pub home: PathBuf,
    mode: Mode,
    meta: Mutex<Meta>,
    runtime: AsyncMutex<Option<Runtime>>,
    pub gate: gate::Gate,
    pub processes: Table,
    pub egress: egress::Log,
    /// Whether its processes see the workspace at `/home/sandbox` and go out through the egress
    /// proxy: in namespaces, and as the one sandbox of a container.
    at_workspace: bool,
    /// Credentials the egress proxy adds while the commands that brought them run.
    pub credentials: Arc<egress::Credentials>,
    isolation: Isolation,
    tools: Option<PathBuf>,
    /// The host user that owns the workspace and runs the processes.
    pub uid: u32,
    seccomp: Arc<seccomp::Programs>,
    /// Signs the certificates the egress proxy presents where it swaps secrets in.
    authority: Mutex<Option<Arc<egress::Authority>>>,
}

struct Runtime {
    init: Option<Init>,
    cgroup: Option<SandboxCgroup>,
    proxy: Option<tokio::task::JoinHandle<()>>,
}

/// What a command needs to run inside a started sandbox.
#[derive(Clone)]
pub struct Running {
    /// The pid of the sandbox's init (`None` without namespaces).
    pub pid: Option<u32>,
    namespaces: Option<Arc<Namespaces>>,
    cgroup: Option<SandboxCgroup>,
}

/// Whether the daemon runs as root (and so can hand files and processes to sandbox users).
pub fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Registry {
    pub fn open(
        root: PathBuf,
        tools: Option<PathBuf>,
        host: HostIsolation,
        cgroups: Option<Cgroups>,
        uid_base: u32,
        disk_bytes: u64,
        pinned: Option<String>,
    ) -> std::io::Result<Registry> {
        std::fs::create_dir_all(&root)?;
        // Sandbox users must reach their own workspace (and only that) below the root.
        set_mode(&root, 0o711)?;
        let (volumes, volumes_missing) = match volume::Volumes::detect(&root, disk_bytes) {
            Ok(v) => (Some(volume::Pool::new(v, &root)), None),
            Err(why) => (None, Some(why)),
        };
        let registry = Registry {
            root,
            tools,
            host,
            cgroups,
            etc: isolation::etc_files(),
            uid_base,
            volumes,
            volumes_missing,
            creating: Mutex::new(()),
            pinned,
            direct: direct::DirectEgress::default(),
            sandboxes: Mutex::new(HashMap::new()),
        };
        for entry in std::fs::read_dir(&registry.root)?.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if !valid_id(&id) {
                continue;
            }
            if let Some(mut meta) = layout::read_meta(&entry.path()) {
                let dir = entry.path();
                layout::sweep_scratch(&dir);
                if volume::has_volume(&dir) {
                    match &registry.volumes {
                        Some(v) => v
                            .volumes
                            .ensure_mounted(&dir)
                            .map_err(std::io::Error::other)?,
                        None => eprintln!(
                            "handoff-sandboxd: sandbox {id} has a volume, but volumes do not work \
                             here now; its files are unavailable until they do"
                        ),
                    }
                }
                if meta.uid.is_none() {
                    // Made before sandboxes had users of their own: hand it to a new one.
                    let uid = registry.free_uid();
                    registry.prepare_dirs(&dir, uid)?;
                    meta.uid = Some(uid);
                    write_meta(&dir, &meta)?;
                }
                let sandbox = registry.make(&id, meta);
                registry.lock().insert(id, sandbox);
            }
        }
        Ok(registry)
    }

    /// The lowest host user no sandbox has.
    fn free_uid(&self) -> u32 {
        let taken: std::collections::HashSet<u32> = self.lock().values().map(|s| s.uid).collect();
        (self.uid_base + 1..)
            .find(|uid| !taken.contains(uid))
            .unwrap_or(self.uid_base + 1)
    }

    /// The host user of the start-up probe.
    pub fn probe_uid(uid_base: u32) -> u32 {
        uid_base
    }

    /// Modes and owners of a sandbox directory: `0711` root's, the workspace `0700` the
    /// sandbox user's (with everything in it), the daemon's own files `0600`.
    fn prepare_dirs(&self, dir: &Path, uid: u32) -> std::io::Result<()> {
        let home = data_dir(dir).join("home");
        std::fs::create_dir_all(&home)?;
        set_mode(dir, 0o711)?;
        set_mode(&home, 0o700)?;
        if privileged() {
            tree::chown_all(&home, uid)?;
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Sandbox>>> {
        self.sandboxes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Stops every sandbox and unmounts their volumes (the next start mounts them again).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Sandbox>> = self.lock().values().cloned().collect();
        for sandbox in all {
            sandbox.stop().await;
            if let (Some(pool), true) = (&self.volumes, volume::has_volume(&sandbox.dir)) {
                if let Err(e) = pool.volumes.unmount(&sandbox.dir) {
                    eprintln!("handoff-sandboxd: {}: {e}", sandbox.id);
                }
            }
        }
        if let Some(pool) = &self.volumes {
            pool.drain();
        }
    }

    fn make(&self, id: &str, meta: Meta) -> Arc<Sandbox> {
        let dir = self.root.join(id);
        let data = data_dir(&dir);
        Arc::new(Sandbox {
            id: id.to_string(),
            home: data.join("home"),
            egress: egress::Log::open(dir.join("egress.jsonl")),
            credentials: Arc::default(),
            processes: Table::new(data.join("logs")),
            tools: self.tools.clone(),
            dir,
            mode: self.host.mode,
            at_workspace: self.host.mode == Mode::Namespaces
                || (self.host.mode == Mode::Container && self.pinned.as_deref() == Some(id)),
            uid: meta.uid.unwrap_or(self.uid_base),
            meta: Mutex::new(meta),
            runtime: AsyncMutex::new(None),
            gate: gate::Gate::default(),
            isolation: self.isolation(),
            seccomp: self.host.seccomp.clone(),
            authority: Mutex::new(None),
        })
    }

    /// The sandbox, if it exists — a sandbox whose directory disappeared (a wiped disk) no
    /// longer does, so the Worker recreates and restores it.
    pub fn get(&self, id: &str) -> Result<Arc<Sandbox>> {
        let mut map = self.lock();
        match map.get(id) {
            Some(sandbox) if sandbox.home.is_dir() => Ok(sandbox.clone()),
            Some(_) => {
                if let Some(lost) = map.remove(id) {
                    tokio::spawn(async move { lost.halt().await });
                }
                Err(ApiError::not_found(format!(
                    "sandbox {id} lost its files on this daemon"
                )))
            }
            None => Err(ApiError::not_found(format!(
                "sandbox {id} does not exist on this daemon"
            ))),
        }
    }

    /// Creates the sandbox or replaces its spec.
    pub fn put(&self, id: &str, spec: SandboxSpec) -> Result<Arc<Sandbox>> {
        check_id(id)?;
        check_spec(&spec)?;
        self.host
            .usable()
            .map_err(ApiError::isolation_unavailable)?;
        if let Some(pinned) = self.pinned.as_deref().filter(|p| *p != id) {
            return Err(ApiError::bad_request(format!(
                "this daemon serves sandbox {pinned} only"
            )));
        }
        if let Ok(existing) = self.get(id) {
            existing.set_spec(spec)?;
            return Ok(existing);
        }
        // One creation at a time: two must never pick the same host user, nor give one
        // directory two volumes.
        let _creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(existing) = self.get(id) {
            existing.set_spec(spec)?;
            return Ok(existing);
        }
        let uid = self.free_uid();
        let meta = Meta {
            created_at: now_ms(),
            spec,
            uid: Some(uid),
        };
        let dir = self.root.join(id);
        std::fs::create_dir_all(&dir)?;
        if let Some(volumes) = &self.volumes {
            if !volume::has_volume(&dir) {
                volumes.provide(&dir).map_err(|e| {
                    ApiError::internal(format!("could not make the sandbox's disk: {e}"))
                })?;
            }
        }
        self.prepare_dirs(&dir, uid)?;
        write_meta(&dir, &meta)?;
        let sandbox = self.make(id, meta);
        if sandbox.at_workspace && sandbox.mode == Mode::Container {
            layout::link_workspace(&sandbox.home)?;
        }
        let mut map = self.lock();
        Ok(map.entry(id.to_string()).or_insert(sandbox).clone())
    }

    pub async fn delete(&self, id: &str) -> Result<()> {
        let sandbox = self.get(id)?;
        let _exclusive = sandbox.gate.close().await?;
        sandbox.halt().await;
        self.lock().remove(id);
        if let Some(c) = &self.cgroups {
            if let Ok(group) = c.create(id, None) {
                group.remove();
            }
        }
        if let (Some(pool), true) = (&self.volumes, volume::has_volume(&sandbox.dir)) {
            pool.volumes
                .remove(&sandbox.dir)
                .map_err(ApiError::internal)?;
        }
        tokio::fs::remove_dir_all(&sandbox.dir).await?;
        Ok(())
    }

    /// Starts the sandbox's init, cgroup and egress proxy if they are not running.
    pub async fn ensure_running(&self, sandbox: &Arc<Sandbox>) -> Result<Running> {
        self.host
            .usable()
            .map_err(ApiError::isolation_unavailable)?;
        let mut runtime = sandbox.runtime.lock().await;
        // Under the runtime's lock, which a delete's halt takes after closing the gate: no restart.
        sandbox.gate.still_open()?;
        if let Some(rt) = runtime.as_mut() {
            let alive = rt.init.as_mut().is_none_or(Init::alive);
            if alive {
                return Ok(Running {
                    pid: rt.init.as_ref().map(|i| i.pid),
                    namespaces: rt.init.as_ref().map(|i| i.namespaces.clone()),
                    cgroup: rt.cgroup.clone(),
                });
            }
            stop_runtime(runtime.take()).await;
        }
        let cgroup = match &self.cgroups {
            Some(c) => Some(c.create(&sandbox.id, sandbox.spec().limits.as_ref())?),
            None => None,
        };
        let (init, proxy) = match sandbox.mode {
            Mode::Namespaces => {
                let tls = egress::authority::tls_dir(&sandbox.dir)?;
                let mut spec = self
                    .host
                    .init_spec(
                        &sandbox.home,
                        &self.etc,
                        self.tools.as_deref(),
                        cgroup.clone(),
                        sandbox.uid,
                    )
                    .ok_or_else(|| ApiError::internal("namespaces without bubblewrap"))?;
                spec.tls = Some(&tls);
                let init = init::start_init(&spec).await.map_err(|e| {
                    ApiError::unavailable(format!("could not start the sandbox: {e}"))
                })?;
                let listener = netns::listen(Some(init.pid), PROXY_PORT)
                    .map_err(|e| ApiError::internal(format!("egress proxy: {e}")))?;
                let proxy = egress::spawn(sandbox.clone(), listener)?;
                (Some(init), Some(proxy))
            }
            // The one sandbox of a container has the container's network to itself: its proxy
            // listens on the container's loopback.
            Mode::Container if sandbox.at_workspace => {
                let listener = netns::listen(None, PROXY_PORT)
                    .map_err(|e| ApiError::internal(format!("egress proxy: {e}")))?;
                (None, Some(egress::spawn(sandbox.clone(), listener)?))
            }
            Mode::Container | Mode::None | Mode::Unavailable => (None, None),
        };
        let running = Running {
            pid: init.as_ref().map(|i| i.pid),
            namespaces: init.as_ref().map(|i| i.namespaces.clone()),
            cgroup: cgroup.clone(),
        };
        *runtime = Some(Runtime {
            init,
            cgroup,
            proxy,
        });
        Ok(running)
    }
}

impl egress::Served for Sandbox {
    fn spec(&self) -> SandboxSpec {
        Sandbox::spec(self)
    }
    fn credentials(&self) -> &egress::Credentials {
        &self.credentials
    }
    fn log(&self) -> &egress::Log {
        &self.egress
    }
    fn authority(&self) -> Option<Arc<egress::Authority>> {
        self.secret_authority()
    }
}

impl Sandbox {
    pub fn spec(&self) -> SandboxSpec {
        self.meta
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .spec
            .clone()
    }

    fn set_spec(&self, spec: SandboxSpec) -> Result<()> {
        let mut meta = self.meta.lock().unwrap_or_else(|p| p.into_inner());
        meta.spec = spec;
        Ok(write_meta(&self.dir, &meta)?)
    }

    /// The owner daemon-written workspace files get (`None` when the daemon cannot give files
    /// away, i.e. runs unprivileged).
    pub fn owner(&self) -> Option<u32> {
        privileged().then_some(self.uid)
    }

    pub async fn state(&self) -> SandboxState {
        let running = self.runtime.lock().await.is_some();
        let meta = self.meta.lock().unwrap_or_else(|p| p.into_inner()).clone();
        SandboxState {
            id: self.id.clone(),
            status: if running {
                SandboxStatus::Running
            } else {
                SandboxStatus::Stopped
            },
            created_at: meta.created_at,
            workspace: self.workspace_display(),
            isolation: Isolation {
                limits: self.isolation.limits.capped(meta.spec.limits.as_ref()),
                ..self.isolation.clone()
            },
            spec: SandboxSpec {
                secrets: meta.spec.secrets.iter().map(|g| g.redacted()).collect(),
                ..meta.spec
            },
            processes: self.processes.running_count(),
        }
    }

    /// Stops every process and the init; files stay (a deleted sandbox's delete halted it).
    pub async fn stop(&self) {
        if let Ok(_exclusive) = self.gate.exclusive().await {
            self.halt().await;
        }
    }

    /// Stops processes and the init; the caller holds the gate exclusively. Returns once the
    /// sandbox user has no process left (`reap` ends by user what the init's namespace did not
    /// take with it): a workspace must not change under a snapshot being packed.
    pub async fn halt(&self) {
        self.processes.kill_all().await;
        let runtime = self.runtime.lock().await.take();
        stop_runtime(runtime).await;
        // SAFETY: geteuid has no preconditions.
        if self.uid != unsafe { libc::geteuid() } {
            reap::end_all_of(self.uid, self.mode == Mode::Container).await;
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

async fn stop_runtime(runtime: Option<Runtime>) {
    let Some(mut rt) = runtime else { return };
    if let Some(proxy) = rt.proxy.take() {
        proxy.abort();
    }
    if let Some(mut init) = rt.init.take() {
        init.kill().await;
    }
}
