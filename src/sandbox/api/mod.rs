//! What a sandbox object can be asked, and the typed client the Worker uses (with the reader of
//! a streamed exec, `exec_stream`, and the watcher of a program's event stream, `port_watch`).

pub mod exec_stream;
pub mod port_watch;

use crate::error::Result;
use crate::rpc::{self, Ack};
use crate::sandboxes::SandboxRecord;
use handoff_wire::desktop::DesktopReply;
use handoff_wire::{
    EgressLog, Encoding, ExecRequest, ExecResult, FileContent, FileList, FileWritten, GitClone,
    PortInfo, ProcessInfo, ProcessLogs, SandboxSpec, SandboxState, StartProcess, Verdict,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use worker::{Env, Request, Response};

/// What a fork starts from: the copied workspace (none when the sandbox never had one) and the
/// source's settings.
#[derive(Debug, Serialize, Deserialize)]
pub struct ForkSource {
    pub snapshot: Option<String>,
    pub bytes: Option<i64>,
    pub spec: SandboxSpec,
    pub idle_timeout_s: i64,
}

/// The sandbox object's route for a streamed exec (everything else is one RPC route).
pub const EXEC_STREAM_PATH: &str = "/exec-stream";

/// Binding name of the sandbox Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "SANDBOXES";

rpc::ops! {
    /// A request to a sandbox object.
    pub enum SandboxRequest, answered by SandboxHandler {
        /// Creates the sandbox (refused if it exists), its workspace restored from `snapshot`
        /// (an R2 key it then owns) or `template` (a template's key, which it never deletes)
        /// when given.
        create: Create {
            id: String,
            name: String,
            created_by: String,
            spec: SandboxSpec,
            idle_timeout_s: i64,
            metadata: Map<String, Value>,
            snapshot: Option<String>,
            template: Option<String>,
            /// When it is deleted whatever it is doing (none: it lives until deleted).
            expires_at: Option<i64>,
        } => SandboxInfo;
        /// Copies the sandbox's workspace as it is now (its latest snapshot when paused) to R2
        /// under `key`, for a fork or a template.
        snapshot_for: SnapshotFor { key: String } => ForkSource;
        info: Info {} => SandboxInfo;
        /// Changes settings while the sandbox lives: variables set and removed, network rules
        /// and metadata replaced, the idle timeout; what is `None` stays.
        update: Update {
            env_set: BTreeMap<String, String>,
            env_unset: Vec<String>,
            allow_out: Option<Vec<String>>,
            deny_out: Option<Vec<String>>,
            idle_timeout_s: Option<i64>,
            metadata: Option<Map<String, Value>>,
        } => SandboxInfo;
        /// Attaches a secret (by name) for `hosts`, or changes its hosts; `None` detaches it.
        secret: Secret { name: String, hosts: Option<Vec<String>> } => SandboxInfo;
        exec: Exec { request: ExecRequest } => ExecResult;
        /// An action on the sandbox's desktop, answered with the screen after it. The action is a
        /// `handoff_wire::desktop::DesktopAction` as JSON (built typed by the tool, decoded by
        /// the daemon); the object only passes it on, so its decoder stays out of the Worker.
        desktop: Desktop { action: Value } => DesktopReply;
        /// A file's content; `max` asks for a larger cap than the daemon's default (at most
        /// `LARGE_READ_CAP`).
        read_file: ReadFile { path: String, encoding: Encoding, max: Option<u64> } => FileContent;
        write_file: WriteFile { path: String, base64: String } => FileWritten;
        list_files: ListFiles { path: String } => FileList;
        zip_dir: ZipDir { path: String } => Zipped;
        pause: Pause {} => SandboxInfo;
        resume: Resume {} => SandboxInfo;
        delete: Delete {} => Ack;
        egress: Egress { limit: u32, verdict: Option<Verdict> } => EgressLog;
        /// Creates the sandbox if it does not exist, or brings its spec up to date (for the
        /// sandboxes work sessions own).
        ensure: Ensure {
            id: String,
            name: String,
            created_by: String,
            spec: SandboxSpec,
            idle_timeout_s: i64,
        } => SandboxInfo;
        spawn: Spawn { request: StartProcess } => ProcessInfo;
        kill: Kill { id: u64 } => ProcessInfo;
        /// Stops (`frozen`) or continues a running background process: frozen, it keeps its
        /// memory and uses no CPU (a session's kept agent between runs).
        freeze: Freeze { id: u64, frozen: bool } => ProcessInfo;
        /// One background process's state (running, exit code, when it ended).
        process: Process { id: u64 } => ProcessInfo;
        logs: Logs { id: u64 } => ProcessLogs;
        clone_repo: CloneRepo { request: GitClone } => ExecResult;
        /// A request to a program listening inside the sandbox.
        call_port: CallPort { request: PortRequest } => PortReply;
    }
}

/// A request to a program inside the sandbox (e.g. OpenCode's API).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PortRequest {
    pub port: u16,
    pub method: String,
    /// Path and query, e.g. `/session/status?directory=/home/sandbox/app`.
    pub path: String,
    pub body: Option<String>,
    /// Sent to the program as its `Authorization`.
    pub authorization: Option<String>,
    /// Give up (HTTP 504 from the daemon) if the program has not started answering by then.
    pub timeout_ms: Option<u64>,
    /// Read the answer (an event stream) only until it holds this text or the time is up, then
    /// close it; the reply's body stays empty and `seen` says whether the text came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<port_watch::Watch>,
    /// A successful answer is JSON to be pruned to this skeleton as it is read
    /// (`crate::json_cost::pruned`): the answer may then be far larger than what is kept of
    /// it, which is all the reply's body holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<serde_json::Value>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PortReply {
    pub status: u16,
    pub body: String,
    /// Whether a watched answer held the text it was watched for.
    #[serde(default)]
    pub seen: bool,
}

/// A sandbox as the object reports it: its record, the daemon's view while it runs, and the
/// ports something listens on.
#[derive(Debug, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub record: SandboxRecord,
    pub daemon: Option<SandboxState>,
    pub ports: Vec<PortInfo>,
    /// The Cloudflare Container instance type it runs on (none: the local daemon).
    #[serde(default)]
    pub instance_type: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Zipped {
    pub base64: String,
    pub size: u64,
}

/// A handle on one sandbox's object.
pub type SandboxClient = rpc::Client<SandboxRequest>;

/// The object of sandbox `sandbox_id`.
pub fn client(env: &Env, sandbox_id: &str) -> Result<SandboxClient> {
    Ok(rpc::Client::new(
        env.durable_object(BINDING)?.get_by_name(sandbox_id)?,
    ))
}

/// The command's output as NDJSON `ExecEvent`s while it runs, ending with `exit`.
pub async fn exec_stream(client: &SandboxClient, request: ExecRequest) -> Result<Response> {
    rpc::call_streaming(client.stub(), EXEC_STREAM_PATH, &request).await
}

/// Passes an HTTP request for a preview through to the sandbox's port.
pub async fn preview(client: &SandboxClient, req: Request) -> Result<Response> {
    client.stub().fetch_with_request(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_travel_tagged_with_their_snake_case_name() {
        let info: SandboxRequest = Info {}.into();
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"info": {}})
        );
        let kill: SandboxRequest = Kill { id: 7 }.into();
        let text = serde_json::to_string(&kill).unwrap();
        assert_eq!(text, r#"{"kill":{"id":7}}"#);
        match serde_json::from_str::<SandboxRequest>(&text).unwrap() {
            SandboxRequest::Kill(Kill { id }) => assert_eq!(id, 7),
            other => panic!("decoded as {other:?}"),
        }
        assert!(serde_json::from_str::<SandboxRequest>(r#"{"format_disk":{}}"#).is_err());
    }
}
