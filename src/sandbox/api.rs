//! What a sandbox object can be asked, and the typed client the Worker uses.

use super::daemon::{PortReply, PortRequest};
use super::store::SandboxRecord;
use crate::error::Result;
use crate::rpc;
use handoff_wire::{
    EgressLog, Encoding, ExecRequest, ExecResult, FileContent, FileList, FileWritten, GitClone,
    PortInfo, ProcessInfo, ProcessLogs, SandboxSpec, SandboxState, StartProcess, Verdict,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use worker::{Env, Request, Response, Stub};

/// Binding name of the sandbox Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "SANDBOXES";

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SandboxOp {
    Create {
        id: String,
        name: String,
        created_by: String,
        spec: SandboxSpec,
        idle_timeout_s: i64,
        metadata: Map<String, Value>,
    },
    Info,
    Exec {
        request: ExecRequest,
    },
    ReadFile {
        path: String,
        encoding: Encoding,
    },
    WriteFile {
        path: String,
        base64: String,
    },
    ListFiles {
        path: String,
    },
    ZipDir {
        path: String,
    },
    Pause,
    Resume,
    Delete,
    Egress {
        limit: u32,
        verdict: Option<Verdict>,
    },
    /// Creates the sandbox if it does not exist, or brings its spec up to date (for the
    /// sandboxes work sessions own).
    Ensure {
        id: String,
        name: String,
        created_by: String,
        spec: SandboxSpec,
        idle_timeout_s: i64,
    },
    StartProcess {
        request: StartProcess,
    },
    KillProcess {
        id: u64,
    },
    ProcessLogs {
        id: u64,
    },
    GitClone {
        request: GitClone,
    },
    PortRequest {
        request: PortRequest,
    },
}

/// A sandbox as the object reports it: its record, the daemon's view while it runs, and the
/// ports something listens on.
#[derive(Debug, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub record: SandboxRecord,
    pub daemon: Option<SandboxState>,
    pub ports: Vec<PortInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Zipped {
    pub base64: String,
    pub size: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Ack {}

pub struct SandboxClient {
    stub: Stub,
}

impl SandboxClient {
    pub fn get(env: &Env, sandbox_id: &str) -> Result<SandboxClient> {
        let stub = env.durable_object(BINDING)?.get_by_name(sandbox_id)?;
        Ok(SandboxClient { stub })
    }

    async fn call<T: serde::de::DeserializeOwned>(&self, op: SandboxOp) -> Result<T> {
        rpc::call(&self.stub, &op).await
    }

    pub async fn create(&self, op: SandboxOp) -> Result<SandboxInfo> {
        self.call(op).await
    }
    pub async fn info(&self) -> Result<SandboxInfo> {
        self.call(SandboxOp::Info).await
    }
    pub async fn exec(&self, request: ExecRequest) -> Result<ExecResult> {
        self.call(SandboxOp::Exec { request }).await
    }
    /// The command's output as NDJSON `ExecEvent`s while it runs, ending with `exit`.
    pub async fn exec_stream(&self, request: ExecRequest) -> Result<Response> {
        rpc::call_streaming(&self.stub, super::EXEC_STREAM_PATH, &request).await
    }
    pub async fn read_file(&self, path: String, encoding: Encoding) -> Result<FileContent> {
        self.call(SandboxOp::ReadFile { path, encoding }).await
    }
    pub async fn write_file(&self, path: String, base64: String) -> Result<FileWritten> {
        self.call(SandboxOp::WriteFile { path, base64 }).await
    }
    pub async fn list_files(&self, path: String) -> Result<FileList> {
        self.call(SandboxOp::ListFiles { path }).await
    }
    pub async fn zip_dir(&self, path: String) -> Result<Zipped> {
        self.call(SandboxOp::ZipDir { path }).await
    }
    pub async fn pause(&self) -> Result<SandboxInfo> {
        self.call(SandboxOp::Pause).await
    }
    pub async fn resume(&self) -> Result<SandboxInfo> {
        self.call(SandboxOp::Resume).await
    }
    pub async fn delete(&self) -> Result<Ack> {
        self.call(SandboxOp::Delete).await
    }
    pub async fn egress(&self, limit: u32, verdict: Option<Verdict>) -> Result<EgressLog> {
        self.call(SandboxOp::Egress { limit, verdict }).await
    }

    pub async fn ensure(&self, op: SandboxOp) -> Result<SandboxInfo> {
        self.call(op).await
    }
    pub async fn start_process(&self, request: StartProcess) -> Result<ProcessInfo> {
        self.call(SandboxOp::StartProcess { request }).await
    }
    pub async fn kill_process(&self, id: u64) -> Result<ProcessInfo> {
        self.call(SandboxOp::KillProcess { id }).await
    }
    pub async fn process_logs(&self, id: u64) -> Result<ProcessLogs> {
        self.call(SandboxOp::ProcessLogs { id }).await
    }
    pub async fn git_clone(&self, request: GitClone) -> Result<ExecResult> {
        self.call(SandboxOp::GitClone { request }).await
    }
    pub async fn port_request(&self, request: PortRequest) -> Result<PortReply> {
        self.call(SandboxOp::PortRequest { request }).await
    }

    /// Passes an HTTP request for a preview through to the sandbox's port.
    pub async fn preview(&self, req: Request) -> Result<Response> {
        Ok(self.stub.fetch_with_request(req).await?)
    }
}
