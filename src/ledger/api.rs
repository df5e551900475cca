//! What the run ledger can be asked, and the typed client the Worker and other Durable Objects use.

use crate::error::Result;
use crate::rpc;
use crate::runs::{
    ProgressDetail, RunError, RunOutcome, RunRecord, RunSpec, RunStatus, SessionRecord,
};
use crate::sandbox::{SandboxRecord, Status};
use serde::{Deserialize, Serialize};
use worker::{Env, Stub};

/// Binding name of the ledger Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "LEDGER";
/// The deployment's one ledger instance.
const INSTANCE: &str = "ledger-v1";

/// A request to the ledger. When `mcp_session` is set the ledger first checks that this MCP
/// session is live and belongs to the caller, so a tool call costs one round trip.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub mcp_session: Option<McpSessionRef>,
    pub op: Op,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpSessionRef {
    pub id: String,
    pub principal: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Starts an MCP session; replies `OpenedMcpSession`.
    OpenMcpSession {
        principal: String,
        protocol_version: String,
        client: Option<String>,
    },
    /// Only the envelope's session check; replies `Ack`.
    CheckMcpSession,
    /// Ends the envelope's session; replies `Ack`.
    CloseMcpSession,
    /// Records a new run (or finds the one its idempotency key names) and hands it to its
    /// session; replies `CreatedRun`.
    CreateRun { principal: String, spec: RunSpec },
    /// Replies `RunRecord`.
    GetRun { run_id: String },
    /// Newest first, strictly older than `before` (a sequence number); replies `Page<RunRecord>`.
    ListRuns {
        session_id: Option<String>,
        status: Option<RunStatus>,
        limit: u32,
        before: Option<i64>,
    },
    /// Newest first; replies `Page<SessionRecord>`.
    ListSessions { limit: u32, before: Option<i64> },
    /// Replies `Cancelled`.
    CancelRun { run_id: String, principal: String },
    /// A status change reported by the run's driver; replies `Transitioned`.
    Transition {
        run_id: String,
        to: RunStatus,
        error: Option<RunError>,
        outcome: Option<RunOutcome>,
    },
    /// Adds a sandbox to the listing; replies `Ack`.
    RegisterSandbox { summary: SandboxSummary },
    /// Records a sandbox's new status (deleted ones leave the listing); replies `Ack`.
    SandboxStatus { id: String, status: Status },
    /// Newest first; replies `Page<SandboxSummary>`.
    ListSandboxes { limit: u32, before: Option<i64> },
    /// A progress report; replies `Transitioned` (the run's status, unchanged).
    Progress {
        run_id: String,
        phase: String,
        message: String,
        detail: Option<ProgressDetail>,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Ack {}

/// A sandbox as the listing shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSummary {
    pub id: String,
    pub name: String,
    pub created_by: String,
    pub created_at: i64,
    pub status: Status,
    pub updated_at: i64,
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct OpenedMcpSession {
    pub id: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CreatedRun {
    pub run: RunRecord,
    /// True when an earlier call with the same idempotency key created the run.
    pub deduplicated: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `before` to get the next page; absent on the last page.
    pub next: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Cancelled {
    pub run: RunRecord,
    /// False when the run had already ended.
    pub changed: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Transitioned {
    pub status: RunStatus,
    /// False when the run had already ended and the report was ignored.
    pub applied: bool,
}

/// A handle on the deployment's ledger.
pub struct Ledger {
    stub: Stub,
    mcp_session: Option<McpSessionRef>,
}

impl Ledger {
    pub fn get(env: &Env) -> Result<Ledger> {
        let stub = env.durable_object(BINDING)?.get_by_name(INSTANCE)?;
        Ok(Ledger {
            stub,
            mcp_session: None,
        })
    }

    /// The same ledger, checking the given MCP session on every call.
    pub fn for_mcp_session(env: &Env, session: McpSessionRef) -> Result<Ledger> {
        let mut ledger = Self::get(env)?;
        ledger.mcp_session = Some(session);
        Ok(ledger)
    }

    async fn call<T: serde::de::DeserializeOwned>(&self, op: Op) -> Result<T> {
        let envelope = Envelope {
            mcp_session: self.mcp_session.clone(),
            op,
        };
        rpc::call(&self.stub, &envelope).await
    }

    pub async fn open_mcp_session(
        &self,
        principal: &str,
        protocol_version: &str,
        client: Option<String>,
    ) -> Result<String> {
        let opened: OpenedMcpSession = self
            .call(Op::OpenMcpSession {
                principal: principal.to_string(),
                protocol_version: protocol_version.to_string(),
                client,
            })
            .await?;
        Ok(opened.id)
    }

    pub async fn check_mcp_session(&self) -> Result<()> {
        self.call::<Ack>(Op::CheckMcpSession).await.map(|_| ())
    }

    pub async fn close_mcp_session(&self) -> Result<()> {
        self.call::<Ack>(Op::CloseMcpSession).await.map(|_| ())
    }

    pub async fn create_run(&self, principal: &str, spec: RunSpec) -> Result<CreatedRun> {
        self.call(Op::CreateRun {
            principal: principal.to_string(),
            spec,
        })
        .await
    }

    pub async fn get_run(&self, run_id: &str) -> Result<RunRecord> {
        self.call(Op::GetRun {
            run_id: run_id.to_string(),
        })
        .await
    }

    pub async fn list_runs(
        &self,
        session_id: Option<String>,
        status: Option<RunStatus>,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Page<RunRecord>> {
        self.call(Op::ListRuns {
            session_id,
            status,
            limit,
            before,
        })
        .await
    }

    pub async fn list_sessions(
        &self,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Page<SessionRecord>> {
        self.call(Op::ListSessions { limit, before }).await
    }

    pub async fn cancel_run(&self, run_id: &str, principal: &str) -> Result<Cancelled> {
        self.call(Op::CancelRun {
            run_id: run_id.to_string(),
            principal: principal.to_string(),
        })
        .await
    }

    pub async fn transition(
        &self,
        run_id: &str,
        to: RunStatus,
        error: Option<RunError>,
        outcome: Option<RunOutcome>,
    ) -> Result<Transitioned> {
        self.call(Op::Transition {
            run_id: run_id.to_string(),
            to,
            error,
            outcome,
        })
        .await
    }

    pub async fn register_sandbox(&self, record: &SandboxRecord) -> Result<()> {
        let summary = SandboxSummary {
            id: record.id.clone(),
            name: record.name.clone(),
            created_by: record.created_by.clone(),
            created_at: record.created_at,
            status: record.status,
            updated_at: record.created_at,
            metadata: record.metadata.clone(),
        };
        self.call::<Ack>(Op::RegisterSandbox { summary })
            .await
            .map(|_| ())
    }

    pub async fn sandbox_status(&self, id: &str, status: Status) -> Result<()> {
        self.call::<Ack>(Op::SandboxStatus {
            id: id.to_string(),
            status,
        })
        .await
        .map(|_| ())
    }

    pub async fn list_sandboxes(
        &self,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Page<SandboxSummary>> {
        self.call(Op::ListSandboxes { limit, before }).await
    }

    pub async fn progress(
        &self,
        run_id: &str,
        phase: &str,
        message: &str,
        detail: Option<ProgressDetail>,
    ) -> Result<Transitioned> {
        self.call(Op::Progress {
            run_id: run_id.to_string(),
            phase: phase.to_string(),
            message: message.to_string(),
            detail,
        })
        .await
    }
}
