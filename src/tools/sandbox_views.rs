//! Outputs of the `sandbox_*` tools (their schemas are the tools' `outputSchema`).

use crate::sandbox::api::SandboxInfo;
use crate::sandboxes::{SandboxSummary, Size, Status};
use crate::time::rfc3339;
use handoff_wire::{EgressEntry, ExecResult, FileEntry, FileKind, Verdict};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitsView {
    pub memory_bytes: Option<u64>,
    pub max_processes: Option<u64>,
    /// CPU in thousandths of a core.
    pub cpu_millis: Option<u64>,
    /// Disk for the workspace and process logs together (the sandbox's own file system).
    pub disk_bytes: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IsolationView {
    /// `namespaces` (own user, file system, process and network namespaces; unprivileged,
    /// seccomp-filtered), `container` (the container is the boundary) or, in development
    /// only, `none`.
    pub level: String,
    pub filesystem: String,
    /// `proxy-only` (outbound only through the logging proxy), `open` (a container whose
    /// runtime lets processes connect out directly; the proxy applies to programs that use
    /// it) or, in development only, `host`.
    pub network: String,
    /// Limits actually enforced.
    pub limits: LimitsView,
    /// Anything weaker than the goal.
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineView {
    /// e.g. `standard-2`.
    pub instance_type: String,
    pub vcpus: f64,
    pub memory_mib: u32,
    pub disk_gb: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PortView {
    pub port: u16,
    pub address: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotView {
    pub bytes: Option<i64>,
    pub at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxView {
    pub sandbox_id: String,
    pub name: String,
    /// `running` or `paused` (files kept, processes stopped; the next command resumes it).
    pub status: String,
    pub created_at: String,
    pub last_active_at: String,
    pub idle_timeout_seconds: i64,
    /// small, medium or large, as asked at creation (absent: the backend's own limits).
    /// `isolation.limits` says what is enforced.
    pub size: Option<String>,
    /// The Cloudflare Container it runs on (its size's instance type; `large` when no size was
    /// asked); absent on the local backend, where the size is cgroup limits only.
    pub machine: Option<MachineView>,
    /// The workspace directory inside the sandbox.
    pub workspace: Option<String>,
    /// Names of the sandbox's environment variables (values are not shown).
    pub env_names: Vec<String>,
    pub allow_out: Vec<String>,
    pub deny_out: Vec<String>,
    pub metadata: Map<String, Value>,
    /// Present while the sandbox runs.
    pub isolation: Option<IsolationView>,
    /// Background processes running now (while the sandbox runs).
    pub running_processes: Option<usize>,
    /// Ports something listens on inside the sandbox.
    pub ports: Vec<PortView>,
    /// The last workspace snapshot (taken on pause).
    pub snapshot: Option<SnapshotView>,
    /// Secrets attached: each a variable holding a stand-in, swapped for the value by the
    /// egress proxy in HTTPS request headers to its hosts only.
    pub secrets: Vec<AttachedSecretView>,
    pub lifecycle: LifecycleView,
}

/// What pauses, resumes and ends the sandbox. Pausing (sandbox_pause, or idleTimeoutSeconds
/// without a command, file operation or preview request) returns once the workspace is saved
/// and every process has stopped; there is no in-between state: a pause that fails leaves the
/// sandbox running. Any use of a paused sandbox resumes it with its workspace (processes, /tmp
/// and connections do not survive a pause). It is deleted only by sandbox_delete or at the end
/// of its lifetime.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleView {
    pub idle_timeout_seconds: i64,
    /// While running: when it pauses unless used before.
    pub pauses_when_idle_at: Option<String>,
    /// Any command, file operation or preview request resumes a paused sandbox.
    pub resumes_on_use: bool,
    /// When it is deleted whatever it is doing (absent: it lives until sandbox_delete).
    pub expires_at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachedSecretView {
    pub name: String,
    /// The variable that holds the stand-in (the secret's name).
    pub env_var: String,
    pub hosts: Vec<String>,
}

impl From<SandboxInfo> for SandboxView {
    fn from(info: SandboxInfo) -> Self {
        let r = info.record;
        SandboxView {
            sandbox_id: r.id,
            name: r.name,
            status: r.status.as_str().to_string(),
            created_at: rfc3339(r.created_at),
            last_active_at: rfc3339(r.last_active_at),
            idle_timeout_seconds: r.idle_timeout_s,
            size: Size::of(&r.spec).map(|s| s.as_str().to_string()),
            machine: info.instance_type.map(|name| {
                let machine = Size::of_spec(&r.spec).instance_type();
                MachineView {
                    instance_type: name,
                    vcpus: machine.vcpus,
                    memory_mib: machine.memory_mib,
                    disk_gb: machine.disk_gb,
                }
            }),
            workspace: info.daemon.as_ref().map(|d| d.workspace.clone()),
            env_names: r.spec.env.keys().cloned().collect(),
            lifecycle: LifecycleView {
                idle_timeout_seconds: r.idle_timeout_s,
                pauses_when_idle_at: (r.status == Status::Running)
                    .then(|| rfc3339(r.last_active_at + r.idle_timeout_s * 1000)),
                resumes_on_use: true,
                expires_at: r.expires_at.map(rfc3339),
            },
            secrets: r
                .spec
                .secrets
                .iter()
                .map(|g| AttachedSecretView {
                    name: g.name.clone(),
                    env_var: g.name.clone(),
                    hosts: g.hosts.clone(),
                })
                .collect(),
            allow_out: r.spec.allow_out,
            deny_out: r.spec.deny_out,
            metadata: r.metadata,
            isolation: info.daemon.as_ref().map(|d| IsolationView {
                level: d.isolation.level.clone(),
                filesystem: d.isolation.filesystem.clone(),
                network: d.isolation.network.clone(),
                limits: LimitsView {
                    memory_bytes: d.isolation.limits.memory_bytes,
                    max_processes: d.isolation.limits.pids,
                    cpu_millis: d.isolation.limits.cpu_millis,
                    disk_bytes: d.isolation.limits.disk_bytes,
                },
                notes: d.isolation.notes.clone(),
            }),
            running_processes: info.daemon.as_ref().map(|d| d.processes),
            ports: info
                .ports
                .into_iter()
                .map(|p| PortView {
                    port: p.port,
                    address: p.address,
                })
                .collect(),
            snapshot: r.snapshot_key.as_ref().map(|_| SnapshotView {
                bytes: r.snapshot_bytes,
                at: r.snapshot_at.map(rfc3339),
            }),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSummaryView {
    pub sandbox_id: String,
    pub name: String,
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    pub metadata: Map<String, Value>,
}

impl From<SandboxSummary> for SandboxSummaryView {
    fn from(s: SandboxSummary) -> Self {
        SandboxSummaryView {
            sandbox_id: s.id,
            name: s.name,
            status: s.status.as_str().to_string(),
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
            metadata: s.metadata,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListSandboxesOutput {
    pub sandboxes: Vec<SandboxSummaryView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    /// Absent when the command was killed (e.g. on timeout).
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// True when stdout or stderr was cut to 32 KiB (start and end kept).
    pub truncated: bool,
    pub timed_out: bool,
}

impl From<ExecResult> for ExecOutput {
    fn from(r: ExecResult) -> Self {
        ExecOutput {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
            duration_ms: r.duration_ms,
            truncated: r.truncated,
            timed_out: r.timed_out,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileReadOutput {
    pub path: String,
    /// `text` or `base64`.
    pub encoding: String,
    pub content: String,
    /// Size in bytes.
    pub size: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileWriteOutput {
    pub path: String,
    /// Bytes written.
    pub size: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileEntryView {
    pub name: String,
    pub path: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    pub kind: String,
    pub size: u64,
    pub modified_at: String,
}

impl From<FileEntry> for FileEntryView {
    fn from(e: FileEntry) -> Self {
        FileEntryView {
            name: e.name,
            path: e.path,
            kind: match e.kind {
                FileKind::File => "file",
                FileKind::Dir => "dir",
                FileKind::Symlink => "symlink",
                FileKind::Other => "other",
            }
            .to_string(),
            size: e.size,
            modified_at: rfc3339(e.modified),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileListOutput {
    pub path: String,
    pub entries: Vec<FileEntryView>,
    /// True when the directory has more entries than were listed (1000).
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownloadOutput {
    pub path: String,
    pub size_bytes: u64,
    pub mime_type: String,
    /// The URI of the embedded ZIP resource in this result's content.
    pub resource_uri: String,
    /// The ZIP itself travels as an embedded resource, not in structured content.
    #[serde(skip)]
    #[schemars(skip)]
    pub zip_base64: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusOutput {
    pub sandbox_id: String,
    /// `running`, `paused` or `deleted`.
    pub status: String,
    /// Size of the workspace snapshot saved on pause.
    pub snapshot_bytes: Option<i64>,
}

impl StatusOutput {
    pub fn new(sandbox_id: String, status: Status, snapshot_bytes: Option<i64>) -> Self {
        StatusOutput {
            sandbox_id,
            status: status.as_str().to_string(),
            snapshot_bytes,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewOutput {
    pub url: String,
    pub port: u16,
    pub expires_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EgressView {
    pub at: String,
    pub host: String,
    pub port: u16,
    /// `CONNECT` for HTTPS tunnels, else the HTTP method.
    pub method: String,
    /// `allowed` or `blocked`.
    pub verdict: String,
    pub reason: String,
}

impl From<EgressEntry> for EgressView {
    fn from(e: EgressEntry) -> Self {
        EgressView {
            at: rfc3339(e.at),
            host: e.host,
            port: e.port,
            method: e.method,
            verdict: match e.verdict {
                Verdict::Allowed => "allowed",
                Verdict::Blocked => "blocked",
            }
            .to_string(),
            reason: e.reason,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NetworkLogOutput {
    /// Newest first.
    pub entries: Vec<EgressView>,
}
