//! What the run ledger can be asked, and the typed client the Worker and other Durable Objects use.

use crate::error::{ErrorKind, Result};
use crate::mcp_session_ids;
use crate::recent::Recent;
pub use crate::rpc::Page;
use crate::rpc::{self, Ack};
use crate::runs::{
    ProgressDetail, RunError, RunOutcome, RunRecord, RunSpec, RunStatus, SessionRecord, Tokens,
};
use crate::sandboxes::{SandboxSummary, Status};
use crate::time::now_ms;
use crate::workers::{Approval, Decision};
use serde::{Deserialize, Serialize};
use worker::Env;

/// Binding name of the ledger Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "LEDGER";
/// The deployment's one ledger instance.
const INSTANCE: &str = "ledger-v1";

/// A request to the ledger. When `mcp_session` is set the ledger first checks that this MCP
/// session is live and belongs to the caller, so a tool call costs one round trip.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub mcp_session: Option<McpSessionRef>,
    pub op: LedgerRequest,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct McpSessionRef {
    pub id: String,
    pub principal: String,
}

rpc::ops! {
    /// What the ledger can be asked.
    pub enum LedgerRequest, answered by LedgerHandler {
        /// Starts an MCP session.
        open_mcp_session: OpenMcpSession {
            principal: String,
            protocol_version: String,
            client: Option<String>,
        } => OpenedMcpSession;
        /// Only the envelope's session check.
        check_mcp_session: CheckMcpSession {} => Ack;
        /// Ends the envelope's session.
        close_mcp_session: CloseMcpSession {} => Ack;
        /// Records a new run (or finds the one its idempotency key names) and hands it to its
        /// session.
        create_run: CreateRun {
            principal: String,
            spec: RunSpec,
            /// Also makes the run an MCP task, kept this long (of the envelope's MCP session, if any).
            task_ttl_ms: Option<i64>,
        } => CreatedRun;
        /// Records a command started for a task-augmented `sandbox_exec` (of the envelope's MCP
        /// session, if any).
        create_exec_task: CreateExecTask { exec: ExecTask, ttl_ms: i64 } => TaskRecord;
        /// Records how a command task ended (the first end recorded stays).
        end_exec_task: EndExecTask { task_id: String, end: ExecEnd } => TaskRecord;
        /// A live task.
        get_task: GetTask { task_id: String } => TaskRecord;
        /// Live tasks, newest first, strictly older than `before` (a sequence number).
        list_tasks: ListTasks { limit: u32, before: Option<i64> } => Page<TaskRecord>;
        /// What changed since a stream's cursor: the tasks (of the envelope's MCP session when
        /// `task_ids` is `None`) and the watched run resources (the session's subscriptions when
        /// `watched` is `None`). Without a cursor, only the current cursor is returned. With
        /// nothing changed yet, waits up to `wait_ms` (at most [`MAX_AWAIT_MS`]) for a change.
        changes: Changes {
            task_ids: Option<Vec<String>>,
            watched: Option<Vec<Watched>>,
            after: Option<Cursor>,
            wait_ms: u32,
        } => ChangeSet;
        /// Subscribes the envelope's MCP session to a run's resource.
        subscribe: Subscribe { uri: String, run_id: String } => Ack;
        unsubscribe: Unsubscribe { uri: String } => Ack;
        get_run: GetRun { run_id: String } => RunRecord;
        /// The run once it was written after `after` (its `updated_at`; with `until_terminal`,
        /// once it has ended), or as it is after `wait_ms` (at most [`MAX_AWAIT_MS`]).
        await_run: AwaitRun {
            run_id: String,
            after: i64,
            wait_ms: u32,
            until_terminal: bool,
        } => RunRecord;
        /// The work session's run in progress (starting or running); not found when none is.
        session_run: SessionRun { session_id: String } => RunRecord;
        /// A spare session is prepared: from now on it may be handed out.
        spare_ready: SpareReady { session_id: String } => Ack;
        /// A spare session no run took is deleted (or its preparation failed): it is forgotten.
        spare_gone: SpareGone { session_id: String } => Ack;
        /// Newest first, strictly older than `before` (a sequence number).
        list_runs: ListRuns {
            session_id: Option<String>,
            status: Option<RunStatus>,
            limit: u32,
            before: Option<i64>,
        } => Page<RunRecord>;
        /// Newest first.
        list_sessions: ListSessions { limit: u32, before: Option<i64> } => Page<SessionRecord>;
        cancel_run: CancelRun { run_id: String, principal: String } => Cancelled;
        /// A status change reported by the run's driver.
        transition: Transition {
            run_id: String,
            to: RunStatus,
            error: Option<RunError>,
            outcome: Option<RunOutcome>,
        } => Transitioned;
        /// Adds a sandbox to the listing, or updates its name and metadata there.
        register_sandbox: RegisterSandbox { summary: SandboxSummary } => Ack;
        /// Records a sandbox's new status (deleted ones leave the listing).
        set_sandbox_status: SetSandboxStatus { id: String, status: Status } => Ack;
        /// Newest first.
        list_sandboxes: ListSandboxes { limit: u32, before: Option<i64> } => Page<SandboxSummary>;
        /// Worker runs (of one worker, or all), newest first.
        list_worker_runs: ListWorkerRuns {
            worker: Option<String>,
            status: Option<RunStatus>,
            limit: u32,
            before: Option<i64>,
        } => Page<RunRecord>;
        /// The latest lines of a running worker's log (redacted by the driver); counts as
        /// progress.
        worker_log: WorkerLog { run_id: String, text: String } => Transitioned;
        /// A worker run stops at its approval gate with its proposal.
        await_approval: AwaitApproval { run_id: String, approval: Approval } => Transitioned;
        /// The owner's one decision on a pending approval (approved runs go on, others end
        /// cancelled); a second decision is a conflict.
        decide: Decide {
            run_id: String,
            decision: Decision,
            principal: String,
            reason: Option<String>,
        } => RunRecord;
        /// An artifact the bucket refused at the run's end was stored after all, or given up.
        artifact_settled: ArtifactSettled {
            run_id: String,
            artifact: crate::artifacts::Artifact,
            stored: bool,
        } => Ack;
        /// Tokens the credential proxy counted in one model call's answer: `tokens` their total,
        /// `usage` by kind. Both are sent and either may be missing, so a ledger and a proxy of
        /// different releases (while a deploy rolls out) still count the call: the ledger before
        /// the kinds read only `tokens`, the proxy before them sent only `tokens`.
        record_usage: RecordUsage {
            run_id: String,
            #[serde(default)]
            tokens: u64,
            #[serde(default)]
            usage: Option<Tokens>,
        } => Ack;
        /// A progress report; replies the run's status, unchanged.
        progress: Progress {
            run_id: String,
            phase: String,
            message: String,
            detail: Option<ProgressDetail>,
        } => Transitioned;
    }
}

impl RecordUsage {
    /// The call's total (what budgets count) and its tokens by kind, from either release's
    /// shape: kinds all zero when only the total was sent.
    pub fn counted(&self) -> (u64, Tokens) {
        let usage = self.usage.clone().unwrap_or_default();
        (self.tokens.max(usage.total()), usage)
    }
}

/// The longest one `await_run` waits: the caller's request stays open meanwhile.
pub const MAX_AWAIT_MS: u32 = 10_000;

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

/// An MCP task: a run (a task-augmented `opencode_run_task`) or a command (a task-augmented
/// `sandbox_exec`), kept for its TTL.
#[derive(Debug, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub ttl_ms: i64,
    /// When the task was created (its TTL counts from here).
    pub created_at: i64,
    pub work: TaskWork,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum TaskWork {
    Run(Box<RunRecord>),
    Exec(ExecTask),
}

/// A command running as a background process in a sandbox, for a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecTask {
    pub sandbox_id: String,
    pub process_id: u64,
    /// When the process started (tells it apart from a later one with the same id).
    pub process_started_at: i64,
    pub command: String,
    pub timeout_ms: u64,
    /// How it ended, once it was seen to end.
    pub end: Option<ExecEnd>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecEnd {
    /// `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// One line on how it ended.
    pub message: String,
    /// The `sandbox_exec` result (an `isError` result saying why when there is no output).
    pub result: serde_json::Value,
    pub at: i64,
}

/// A resource a stream watches: its URI and the run whose changes it follows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Watched {
    pub uri: String,
    pub run_id: String,
}

/// Where a change stream is: the last transition and the last run update it has reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub seq: i64,
    pub updated_ms: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ChangeSet {
    /// Tasks whose status changed, oldest change first, each with its newest transition.
    pub tasks: Vec<(i64, TaskRecord)>,
    /// URIs of watched resources whose run changed.
    pub updated: Vec<String>,
    /// The cursor after these changes.
    pub cursor: Cursor,
}

impl ChangeSet {
    /// Nothing to report.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty() && self.updated.is_empty()
    }
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
    stub: rpc::ObjectStub,
    mcp_session: Option<McpSessionRef>,
}

impl Ledger {
    pub fn get(env: &Env) -> Result<Ledger> {
        let stub = env.durable_object(BINDING)?.get_by_name(INSTANCE)?.into();
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

    /// Sends one of the ledger's ops and decodes its reply. With an MCP session the ledger
    /// checks it first, every time; what that check answers is remembered for
    /// `check_mcp_session`.
    pub async fn call<O: rpc::Op<Request = LedgerRequest>>(&self, op: O) -> Result<O::Reply> {
        let envelope = Envelope {
            mcp_session: self.mcp_session.clone(),
            op: op.into(),
        };
        let text = self.exchange(&envelope).await?;
        rpc::decode_reply(&text)
    }

    /// Sends an envelope and returns the reply's JSON, remembering what the ledger said of the
    /// session (not generic: one copy for every op).
    async fn exchange(&self, envelope: &Envelope) -> Result<String> {
        let closing = matches!(envelope.op, LedgerRequest::CloseMcpSession(_));
        let reply = rpc::send_text(&self.stub, serde_json::to_string(envelope)?).await;
        if let Some(session) = &self.mcp_session {
            let key = session.cache_key();
            match &reply {
                Err(e) if e.kind == ErrorKind::McpSessionGone => {
                    LIVE_SESSIONS.with(|c| c.forget(&key))
                }
                _ if closing => LIVE_SESSIONS.with(|c| c.forget(&key)),
                Ok(_) => LIVE_SESSIONS.with(|c| c.put(key, (), now_ms())),
                Err(_) => {}
            }
        }
        reply
    }

    /// Issues a signed MCP session id (`mcp_session_ids`) without a round trip: the ledger
    /// records it at its first request that reaches it, and this isolate trusts it for
    /// `SESSION_TRUST_MS` like a session the ledger just accepted (a DELETE here forgets it at
    /// once), so a client's `notifications/initialized` costs none either.
    pub fn issue_signed_mcp_session(key: &[u8], principal: &str, version: &str) -> String {
        let now = now_ms();
        let id = mcp_session_ids::issue(key, principal, version, now);
        let session = McpSessionRef {
            id: id.clone(),
            principal: principal.to_string(),
        };
        LIVE_SESSIONS.with(|c| c.put(session.cache_key(), (), now));
        id
    }

    /// Opens an MCP session for `principal` and returns its id; this isolate trusts it at once
    /// (the client's `notifications/initialized` and first calls cost no session round trip).
    pub async fn open_mcp_session(
        &self,
        principal: &str,
        protocol_version: &str,
        client: Option<String>,
    ) -> Result<String> {
        let opened = self
            .call(OpenMcpSession {
                principal: principal.to_string(),
                protocol_version: protocol_version.to_string(),
                client,
            })
            .await?;
        let session = McpSessionRef {
            id: opened.id.clone(),
            principal: principal.to_string(),
        };
        LIVE_SESSIONS.with(|c| c.put(session.cache_key(), (), now_ms()));
        Ok(opened.id)
    }

    /// Checks the handle's MCP session for calls that do not otherwise reach the ledger (the
    /// sandbox and registry tools, `ping`, the lists): free when this isolate saw the ledger
    /// accept the session within `SESSION_TRUST_MS`, one round trip otherwise. A handle without
    /// a session (the stateless era) has nothing to check.
    pub async fn check_mcp_session(&self) -> Result<()> {
        let Some(session) = &self.mcp_session else {
            return Ok(());
        };
        let key = session.cache_key();
        if LIVE_SESSIONS.with(|c| c.get(&key, now_ms())).is_some() {
            return Ok(());
        }
        self.call(CheckMcpSession {}).await.map(|_| ())
    }
}

/// How long an isolate trusts that an MCP session the ledger accepted is still live, for calls
/// that do not reach the ledger anyway: a session ended elsewhere (DELETE on another isolate,
/// expiry) can still reach sandboxes and the registry for at most this long; every ledger call
/// checks it each time.
pub const SESSION_TRUST_MS: i64 = 5_000;

thread_local! {
    static LIVE_SESSIONS: Recent<()> = const { Recent::new(SESSION_TRUST_MS, 4096) };
}

impl McpSessionRef {
    fn cache_key(&self) -> String {
        format!("{}\n{}", self.id, self.principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of the op before the proxy told token kinds apart.
    #[derive(Deserialize)]
    struct RecordUsageBefore {
        run_id: String,
        tokens: u64,
    }

    #[test]
    fn usage_records_are_read_by_a_ledger_of_either_release() {
        let usage = Tokens {
            input: 120,
            output: 30,
            reasoning: 5,
            ..Tokens::default()
        };
        let op = RecordUsage {
            run_id: "run-1".into(),
            tokens: usage.total(),
            usage: Some(usage.clone()),
        };
        let sent = serde_json::to_string(&LedgerRequest::from(op)).unwrap();

        let value: serde_json::Value = serde_json::from_str(&sent).unwrap();
        let before: RecordUsageBefore =
            serde_json::from_value(value["record_usage"].clone()).unwrap();
        assert_eq!((before.run_id.as_str(), before.tokens), ("run-1", 155));

        let LedgerRequest::RecordUsage(now) = serde_json::from_str(&sent).unwrap() else {
            panic!("not a usage record: {sent}");
        };
        assert_eq!(now.counted(), (155, usage));
    }

    #[test]
    fn usage_records_of_the_release_before_count_their_total() {
        let sent = r#"{"record_usage":{"run_id":"run-1","tokens":42}}"#;
        let LedgerRequest::RecordUsage(op) = serde_json::from_str(sent).unwrap() else {
            panic!("not a usage record");
        };
        assert_eq!(op.counted(), (42, Tokens::default()));
    }
}
