//! The sandbox daemon's HTTP API (`/v1/...`): every request and response body, shared by the
//! Worker (client) and the daemon (server). Serde types only — no IO, no MCP, no users.
//!
//! Routes (all but `/v1/health` need `Authorization: Bearer <token>` whose `sub` is the sandbox):
//! - `GET  /v1/health` → [`Health`]
//! - `PUT  /v1/sandboxes/{id}` [`SandboxSpec`] → [`SandboxState`] (create or update; idempotent);
//!   `?start=1` also starts its processes' isolation in the background, ready for a first command
//!   (`0` or none: at the first command; any other value is refused)
//! - `GET  /v1/sandboxes/{id}` → [`SandboxState`]; `DELETE` removes it and its files
//! - `POST /v1/sandboxes/{id}/stop` → [`SandboxState`] (processes stopped, files kept)
//! - `GET  /v1/sandboxes/{id}/snapshot` → tar.gz of the workspace (the sandbox is stopped first);
//!   `PUT` restores one
//! - `POST /v1/sandboxes/{id}/exec` [`ExecRequest`] → [`ExecResult`]
//! - `POST /v1/sandboxes/{id}/exec/stream` [`ExecRequest`] → NDJSON of [`ExecEvent`]
//! - `POST /v1/sandboxes/{id}/processes` [`StartProcess`] → [`ProcessInfo`]; `GET` lists them
//! - `GET  /v1/sandboxes/{id}/processes/{pid}/logs` → [`ProcessLogs`]; `DELETE .../{pid}` kills
//! - `GET  /v1/sandboxes/{id}/files?path=&encoding=&max=` → [`FileContent`] (`max`: a larger
//!   cap, up to [`LARGE_READ_CAP`])
//! - `PUT  /v1/sandboxes/{id}/files?path=` raw bytes → [`FileWritten`]; `DELETE ?path=&recursive=`
//! - `GET  /v1/sandboxes/{id}/files/list?path=` → [`FileList`]
//! - `POST /v1/sandboxes/{id}/files/mkdir?path=` → [`FileWritten`]
//! - `GET  /v1/sandboxes/{id}/files/zip?path=` → `application/zip`
//! - `POST /v1/sandboxes/{id}/git/clone` [`GitClone`], `.../git/checkout` [`GitCheckout`] → [`ExecResult`]
//! - `GET  /v1/sandboxes/{id}/ports` → [`PortList`]
//! - any  `/v1/sandboxes/{id}/ports/{port}/http/{path}` → proxied to that port in the sandbox
//! - `GET  /v1/sandboxes/{id}/egress?limit=&verdict=` → [`EgressLog`]
//! - `POST /v1/sandboxes/{id}/desktop` [`desktop::DesktopAction`] → [`desktop::DesktopReply`]
//!
//! Errors are [`ErrorBody`] with the status from [`ErrorCode::http_status`]. 503 means
//! transient (retry with backoff); every other error fails fast.

pub mod desktop;
mod headtail;
pub mod rules;
mod sandbox;
pub use headtail::HeadTail;
pub use rules::is_safe_branch;
pub use sandbox::*;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Header bounding how long a proxied sandbox port may take to start answering (milliseconds);
/// past it the daemon answers 504. (A program can accept connections before it is ready.)
pub const RESPONSE_TIMEOUT: &str = "x-handoff-response-timeout-ms";
/// Header whose value is sent to a proxied sandbox port as `Authorization`.
pub const UPSTREAM_AUTHORIZATION: &str = "x-handoff-upstream-authorization";
/// Marks the daemon's own error answers, so a client never takes a program's answer on a
/// sandbox port for one: the daemon removes it from every answer it passes on from a port (a
/// program there could otherwise pass off a made-up error as the daemon's).
pub const DAEMON_ERROR: &str = "x-handoff-daemon";
/// Where tools the daemon provides (`--tools-dir`) appear inside sandboxes; first on PATH.
pub const TOOLS_DIR: &str = "/opt/handoff/bin";
/// The `aud` of tokens the daemon accepts.
pub const TOKEN_AUDIENCE: &str = "handoff-sandboxd";
/// The workspace inside every sandbox; relative paths are resolved against it.
pub const WORKSPACE: &str = "/home/sandbox";

/// Each stream of an exec result is capped at this many bytes (head and tail kept).
pub const EXEC_OUTPUT_CAP: usize = 32 * 1024;
/// Largest file returned by a read.
pub const READ_CAP: u64 = 1024 * 1024;
/// Largest file a read may ask for with `max` (the Worker collecting a worker's outputs).
pub const LARGE_READ_CAP: u64 = 10 * 1024 * 1024;
/// Largest file accepted by a write.
pub const WRITE_CAP: u64 = 8 * 1024 * 1024;

/// The one message for a write over [`WRITE_CAP`], said by the daemon and the Worker alike.
pub fn write_too_large_message(size: u64) -> String {
    format!("the file is {size} bytes; writes are limited to {WRITE_CAP} bytes (8 MiB)")
}
/// Largest directory ZIP.
pub const ZIP_CAP: u64 = 10 * 1024 * 1024;
/// Longest exec timeout.
pub const EXEC_MAX_TIMEOUT_MS: u64 = 10 * 60 * 1000;

/// Claims of a token the Worker mints for one sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenClaims {
    /// The sandbox id the token is for.
    pub sub: String,
    pub aud: String,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub version: String,
    pub isolation: Isolation,
}

/// A credential the sandbox's egress proxy adds, while one command runs, to the plain-HTTP
/// requests it is for. The sandbox never holds it: a program inside sends its request to
/// `prefix` without credentials; the proxy sends it to `upstream` (the rest of the path
/// appended) with `header` set, replacing any header of that name the request carried.
/// Anything else in the sandbox may use it for as long as the command runs, so grants are
/// scoped (one run, one service, one repository) and the upstream checks what they allow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressCredential {
    /// `http://host[:port]/path/` as requested inside the sandbox.
    pub prefix: String,
    /// `http(s)://host[:port]/path/` the proxy sends matching requests to.
    pub upstream: String,
    /// `Name: value`, e.g. `Authorization: Bearer …`; never logged.
    pub header: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExecRequest {
    /// A shell command line, run by `/bin/sh -c` (ignored when `argv` is given).
    #[serde(default)]
    pub command: String,
    /// A program and its arguments, run without a shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// Working directory (inside the workspace); default the workspace.
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout_ms: u64,
    /// Credentials the egress proxy adds while this command runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<EgressCredential>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    pub stdout: String,
    pub stderr: String,
    /// `None` when the process was killed by a signal (e.g. on timeout).
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// True when either stream was cut to `EXEC_OUTPUT_CAP` (head and tail kept).
    pub truncated: bool,
    pub timed_out: bool,
}

/// One line of a streaming exec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecEvent {
    Stdout {
        data: String,
    },
    Stderr {
        data: String,
    },
    Exit {
        exit_code: Option<i32>,
        duration_ms: u64,
        timed_out: bool,
    },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StartProcess {
    /// A shell command line, run by `/bin/sh -c` (ignored when `argv` is given).
    #[serde(default)]
    pub command: String,
    /// A program and its arguments, run without a shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kill the process group after this many milliseconds (at most `EXEC_MAX_TIMEOUT_MS`);
    /// absent: it runs until it ends or is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Names this start (at most [`PROCESS_KEY_MAX`] bytes): a start sent again with the key
    /// of a process the sandbox still knows (running or ended) answers with that process
    /// instead of starting another, so a start whose reply was lost can be sent again. An ended
    /// process the table has let go of keeps answering its key (the last 256 such keys; its
    /// logs are gone by then). The daemon remembers keys while it runs, not across its restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The longest [`StartProcess::key`], in bytes.
pub const PROCESS_KEY_MAX: usize = 128;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Daemon-assigned id, unique within the sandbox.
    pub id: u64,
    pub command: String,
    pub started_at: i64,
    pub running: bool,
    pub exit_code: Option<i32>,
    /// When it ended (milliseconds since the epoch); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// True when its `timeout_ms` ran out and the daemon killed it.
    #[serde(default)]
    pub timed_out: bool,
    /// True while the daemon holds its process group stopped (`POST …/processes/{id}/freeze`):
    /// it keeps its memory and uses no CPU until it is thawed or killed, and is the first the
    /// OOM killer takes. One that lost a process meanwhile is ended by its thaw, which then
    /// answers `running: false`.
    #[serde(default)]
    pub frozen: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessList {
    pub processes: Vec<ProcessInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessLogs {
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    #[default]
    Text,
    Base64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileContent {
    pub path: String,
    pub encoding: Encoding,
    pub content: String,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileWritten {
    pub path: String,
    pub size: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    /// Path inside the sandbox.
    pub path: String,
    pub kind: FileKind,
    pub size: u64,
    /// Milliseconds since the epoch.
    pub modified: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileList {
    pub path: String,
    pub entries: Vec<FileEntry>,
    /// True when the listing was cut at its limit.
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GitClone {
    pub url: String,
    pub branch: Option<String>,
    pub depth: Option<u32>,
    /// Target directory inside the workspace (default: the repository name).
    pub dir: Option<String>,
    /// Credentials the egress proxy adds to the clone's requests (the URL must then be a plain
    /// `http://` one under a credential's prefix); git itself never sees them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<EgressCredential>,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GitCheckout {
    pub dir: String,
    pub branch: String,
    /// Create the branch (`git checkout -b`).
    #[serde(default)]
    pub create: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortInfo {
    pub port: u16,
    pub address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortList {
    pub ports: Vec<PortInfo>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allowed,
    Blocked,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EgressEntry {
    /// Milliseconds since the epoch.
    pub at: i64,
    pub host: String,
    pub port: u16,
    /// `CONNECT` for tunnels (HTTPS), else the HTTP method.
    pub method: String,
    pub verdict: Verdict,
    /// Why it was blocked (or which rule allowed it).
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EgressLog {
    /// Newest first.
    pub entries: Vec<EgressEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    Unauthorized,
    NotFound,
    TooLarge,
    Conflict,
    /// Nothing listens on the sandbox port the request is for (a server not started yet, or one
    /// that stopped). Answered with 400, like other requests that cannot be served as asked.
    PortClosed,
    /// Something in the sandbox did not answer in time.
    Timeout,
    /// Transient: retry with backoff.
    Unavailable,
    /// The host cannot isolate sandboxes, so it runs none (not transient: the operator must
    /// install or enable what the message names).
    IsolationUnavailable,
    Internal,
}

impl ErrorCode {
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest | ErrorCode::PortClosed => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotFound => 404,
            ErrorCode::TooLarge => 413,
            ErrorCode::Conflict => 409,
            ErrorCode::Timeout => 504,
            ErrorCode::Unavailable => 503,
            ErrorCode::IsolationUnavailable => 501,
            ErrorCode::Internal => 500,
        }
    }

    pub fn from_status(status: u16) -> ErrorCode {
        match status {
            400 => ErrorCode::BadRequest,
            401 | 403 => ErrorCode::Unauthorized,
            404 => ErrorCode::NotFound,
            409 => ErrorCode::Conflict,
            413 => ErrorCode::TooLarge,
            504 => ErrorCode::Timeout,
            502 | 503 => ErrorCode::Unavailable,
            501 => ErrorCode::IsolationUnavailable,
            _ => ErrorCode::Internal,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_statuses_and_back() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::NotFound,
            ErrorCode::TooLarge,
            ErrorCode::Conflict,
            ErrorCode::Unavailable,
            ErrorCode::IsolationUnavailable,
        ] {
            assert_eq!(ErrorCode::from_status(code.http_status()), code);
        }
    }
}
