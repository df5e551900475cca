//! Parameters of the `sandbox_*` tools (doc comments are the tool descriptions and schema
//! text) and their checks.

use super::params::check_id;
use crate::error::{Error, Result};
use crate::ids;
use handoff_wire::rules;
use handoff_wire::{Encoding, Verdict, EXEC_MAX_TIMEOUT_MS};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub const IDLE_DEFAULT_SECS: u32 = 900;
pub const IDLE_MIN_SECS: u32 = 60;
pub const IDLE_MAX_SECS: u32 = 86_400;
pub const EXEC_DEFAULT_TIMEOUT_MS: u64 = 60_000;
pub const PREVIEW_DEFAULT_SECS: u32 = 3600;
pub const PREVIEW_MIN_SECS: u32 = 60;
pub const PREVIEW_MAX_SECS: u32 = 7 * 24 * 3600;
const MAX_ENV: usize = handoff_wire::rules::ENV_MAX;
const MAX_ENV_VALUE: usize = 32 * 1024;
const MAX_RULES: usize = 100;
const MAX_METADATA_BYTES: usize = 4096;
const MAX_COMMAND: usize = 100_000;

/// Create a sandbox: an isolated Linux environment with its own workspace (/home/sandbox),
/// processes and network — outbound traffic only through a proxy that logs every destination.
/// Returns its sandboxId. It pauses itself (workspace saved) when idle and resumes on the next
/// command.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateParams {
    /// A name to recognize the sandbox by (at most 100 characters).
    #[schemars(length(max = 100))]
    pub name: Option<String>,
    /// Environment variables for every command in the sandbox (at most 100).
    pub env: Option<BTreeMap<String, String>>,
    /// Seconds without activity before the sandbox pauses itself: 60 to 86400, default 900.
    #[schemars(range(min = 60, max = 86400))]
    pub idle_timeout_seconds: Option<u32>,
    /// If given, the only destinations the sandbox may reach: `host`, `*.domain`, `host:port`
    /// or `*`. Without it, public destinations are allowed and private/loopback ones blocked;
    /// wildcards never cover those either: name the host or address to reach one.
    pub allow_out: Option<Vec<String>>,
    /// Destinations the sandbox may never reach (same syntax as allowOut).
    pub deny_out: Option<Vec<String>>,
    /// Free-form labels stored with the sandbox (a JSON object of at most 4 KB).
    pub metadata: Option<Map<String, Value>>,
    /// How much of the machine it may use: small (half a CPU, 512 MiB, 256 processes), medium
    /// (1 CPU, 1 GiB, 512) or large (2 CPUs, 2 GiB, 1024; the default). sandbox_info reports
    /// what is enforced.
    pub size: Option<crate::sandboxes::Size>,
    /// Start from a ready template (sandbox_template_list): its files, and its settings where
    /// these parameters leave them out (env is merged, this call's values winning).
    pub template: Option<String>,
    /// Delete the sandbox (processes, files, snapshot) this many seconds after creation,
    /// running or paused: 60 to 2592000 (30 days). Without it a sandbox lives until
    /// sandbox_delete (it pauses when idle and keeps its workspace).
    #[schemars(range(min = 60, max = 2_592_000))]
    pub lifetime_seconds: Option<u32>,
}

/// A new sandbox from another's workspace as it is now (its last snapshot if it is paused),
/// with the same environment, network rules and idle timeout; the two go their own ways after.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForkParams {
    /// The sandbox to copy.
    pub sandbox_id: String,
    /// A name for the new sandbox (at most 100 characters).
    #[schemars(length(max = 100))]
    pub name: Option<String>,
    /// Labels for the new sandbox (a JSON object of at most 4 KB); `forkedFrom` is added.
    pub metadata: Option<Map<String, Value>>,
}

/// Change a sandbox's settings while it lives: environment variables (set, or remove with
/// null), network rules, idle timeout and metadata. Rules take effect from the next connection,
/// variables from the next command; what is left out stays as it is. A work session's sandbox
/// gets its run's own rules back when its next run starts.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Variables to set (a string) or remove (null); the others stay. At most 100 in all.
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Replaces the allow list (`host`, `*.domain`, `host:port` or `*`; wildcards cover public
    /// destinations only); an empty list allows public destinations again.
    pub allow_out: Option<Vec<String>>,
    /// Replaces the deny list.
    pub deny_out: Option<Vec<String>>,
    /// Seconds without activity before the sandbox pauses itself: 60 to 86400.
    #[schemars(range(min = 60, max = 86400))]
    pub idle_timeout_seconds: Option<u32>,
    /// Replaces the metadata (a JSON object of at most 4 KB).
    pub metadata: Option<Map<String, Value>>,
}

/// A sandbox's details: status, isolation really enforced, limits, network rules, running
/// processes and listening ports.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxIdParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
}

/// List sandboxes, newest first. Pages with nextCursor.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListSandboxesParams {
    /// Sandboxes per page, 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page.
    pub cursor: Option<String>,
}

/// Run a shell command in a sandbox and get its stdout, stderr and exit code. Each stream is
/// capped at 32 KiB (start and end kept, `truncated` set). On timeout the whole process group is
/// killed and `timedOut` is set. A paused sandbox resumes first.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecParams {
    /// The sandbox to run in.
    pub sandbox_id: String,
    /// A shell command line, run with /bin/sh -c.
    #[schemars(length(min = 1, max = 100000))]
    pub command: String,
    /// Working directory, relative to /home/sandbox or absolute under it (default /home/sandbox).
    pub cwd: Option<String>,
    /// Extra environment variables for this command.
    pub env: Option<BTreeMap<String, String>>,
    /// Milliseconds before the command is killed: 1 to 600000 (10 minutes), default 60000.
    #[schemars(range(min = 1, max = 600000))]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum FileEncoding {
    /// UTF-8 text.
    #[default]
    Text,
    /// Base64 of the raw bytes (for binary files).
    Base64,
}

impl From<FileEncoding> for Encoding {
    fn from(e: FileEncoding) -> Encoding {
        match e {
            FileEncoding::Text => Encoding::Text,
            FileEncoding::Base64 => Encoding::Base64,
        }
    }
}

/// Read a file from a sandbox's workspace, as text or base64 (files over 1 MiB are refused:
/// read parts with sandbox_exec, or download the directory).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReadParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Path relative to /home/sandbox, or absolute under it.
    pub path: String,
    /// text (default) or base64.
    pub encoding: Option<FileEncoding>,
}

/// Write a whole file in a sandbox's workspace (up to 8 MiB), creating parent directories.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WriteParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Path relative to /home/sandbox, or absolute under it.
    pub path: String,
    /// The file's content, as text or base64 according to encoding.
    pub content: String,
    /// text (default) or base64.
    pub encoding: Option<FileEncoding>,
}

/// List a directory of a sandbox's workspace (names, types, sizes, modification times).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListFilesParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Directory relative to /home/sandbox, or absolute under it (default /home/sandbox).
    pub path: Option<String>,
}

/// Download a directory of a sandbox's workspace as a ZIP (at most 10 MiB), returned as an
/// embedded resource.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DownloadDirParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Directory relative to /home/sandbox, or absolute under it (default /home/sandbox).
    pub path: Option<String>,
}

/// Publish a port of a sandbox as a preview URL: a signed, unguessable link on an origin of its
/// own that proxies HTTP (streaming included) to a server listening on that port inside the
/// sandbox. Apps should use relative links; they cannot set cookies.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreviewParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// The port a server listens on inside the sandbox (1 to 65535).
    #[schemars(range(min = 1, max = 65535))]
    pub port: u32,
    /// Seconds the link stays valid: 60 to 604800 (7 days), default 3600.
    #[schemars(range(min = 60, max = 604800))]
    pub expires_in_seconds: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerdictFilter {
    Allowed,
    Blocked,
}

/// Read the log of a sandbox's outbound connections, newest first: time, host, port and
/// whether it was allowed or blocked (and why).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NetworkLogParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// Entries to return, 1 to 1000 (default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
    /// Only allowed or only blocked connections.
    pub verdict: Option<VerdictFilter>,
}

impl From<VerdictFilter> for Verdict {
    fn from(v: VerdictFilter) -> Verdict {
        match v {
            VerdictFilter::Allowed => Verdict::Allowed,
            VerdictFilter::Blocked => Verdict::Blocked,
        }
    }
}

pub fn check_sandbox_id(id: &str) -> Result<()> {
    check_id("sandboxId", ids::SANDBOX, id)
}

pub fn check_name(name: &str) -> Result<()> {
    if name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "`name` must be at most 100 characters without control characters",
        ));
    }
    Ok(())
}

pub fn check_env(field: &str, env: &BTreeMap<String, String>) -> Result<()> {
    if env.len() > MAX_ENV {
        return Err(Error::invalid(format!(
            "`{field}` has {} variables; at most {MAX_ENV}",
            env.len()
        )));
    }
    for (name, value) in env {
        if !rules::is_env_name(name) {
            return Err(Error::invalid(format!(
                "`{field}`: {name:?} is not a valid variable name (letters, digits, _; not starting with a digit)"
            )));
        }
        if value.len() > MAX_ENV_VALUE || !rules::is_env_value(value) {
            return Err(Error::invalid(format!(
                "`{field}.{name}` must be at most {MAX_ENV_VALUE} bytes without NUL"
            )));
        }
    }
    Ok(())
}

pub fn check_rules(field: &str, rules: &[String]) -> Result<()> {
    if rules.len() > MAX_RULES {
        return Err(Error::invalid(format!(
            "`{field}` has more than {MAX_RULES} rules"
        )));
    }
    for rule in rules {
        if !rules::is_network_rule(rule) {
            return Err(Error::invalid(format!(
                "`{field}`: {rule:?} is not a rule; use host, *.domain, host:port (port 1-65535) or *"
            )));
        }
    }
    Ok(())
}

pub fn check_metadata(metadata: &Map<String, Value>) -> Result<()> {
    let size = serde_json::to_string(metadata)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > MAX_METADATA_BYTES {
        return Err(Error::invalid(format!(
            "`metadata` is {size} bytes as JSON; at most {MAX_METADATA_BYTES}"
        )));
    }
    Ok(())
}

/// A lifetime in seconds, checked.
pub fn lifetime(seconds: u32) -> Result<u32> {
    if (60..=2_592_000).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(Error::invalid(
            "`lifetimeSeconds` must be 60 to 2592000 (30 days)",
        ))
    }
}

pub fn idle_timeout(value: Option<u32>) -> Result<u32> {
    match value {
        None => Ok(IDLE_DEFAULT_SECS),
        Some(v) if (IDLE_MIN_SECS..=IDLE_MAX_SECS).contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(format!(
            "`idleTimeoutSeconds` must be between {IDLE_MIN_SECS} and {IDLE_MAX_SECS} (got {v})"
        ))),
    }
}

/// `sandbox_exec`'s arguments, checked: the command, its environment, its working directory and
/// its time limit (defaulted).
pub fn check_exec(p: &mut ExecParams) -> Result<(BTreeMap<String, String>, u64)> {
    check_command(&p.command)?;
    let env = p.env.take().unwrap_or_default();
    check_env("env", &env)?;
    if let Some(cwd) = &p.cwd {
        check_path("cwd", cwd)?;
    }
    Ok((env, exec_timeout(p.timeout_ms)?))
}

pub fn exec_timeout(value: Option<u64>) -> Result<u64> {
    match value {
        None => Ok(EXEC_DEFAULT_TIMEOUT_MS),
        Some(v) if (1..=EXEC_MAX_TIMEOUT_MS).contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(format!(
            "`timeoutMs` must be between 1 and {EXEC_MAX_TIMEOUT_MS} (10 minutes; got {v}); start long work in the background"
        ))),
    }
}

pub fn check_command(command: &str) -> Result<()> {
    if command.trim().is_empty() {
        return Err(Error::invalid("`command` must not be empty"));
    }
    if command.len() > MAX_COMMAND {
        return Err(Error::invalid(format!(
            "`command` is {} bytes; at most {MAX_COMMAND} — write a script file and run it",
            command.len()
        )));
    }
    Ok(())
}

pub fn preview_port(port: u32) -> Result<u16> {
    u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| Error::invalid(format!("`port` must be between 1 and 65535 (got {port})")))
}

pub fn preview_ttl(value: Option<u32>) -> Result<u32> {
    match value {
        None => Ok(PREVIEW_DEFAULT_SECS),
        Some(v) if (PREVIEW_MIN_SECS..=PREVIEW_MAX_SECS).contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(format!(
            "`expiresInSeconds` must be between {PREVIEW_MIN_SECS} and {PREVIEW_MAX_SECS} (got {v})"
        ))),
    }
}

pub fn log_limit(value: Option<u32>) -> Result<u32> {
    match value {
        None => Ok(100),
        Some(v) if (1..=1000).contains(&v) => Ok(v),
        Some(v) => Err(Error::invalid(format!(
            "`limit` must be between 1 and 1000 (got {v})"
        ))),
    }
}

pub const MAX_PATH: usize = 4096;

pub fn check_path(field: &str, path: &str) -> Result<()> {
    if path.len() > MAX_PATH || path.contains('\0') {
        return Err(Error::invalid(format!(
            "`{field}` must be at most {MAX_PATH} bytes without NUL"
        )));
    }
    Ok(())
}
