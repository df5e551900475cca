//! What the ledger does for each op of its API. A [`Call`] is one request: the ledger, its
//! database, the time the request arrived and the MCP session it was checked against.

use super::api::*;
use super::{find_run, request_hash, store, RunLedger};
use crate::error::{Error, Result};
use crate::ids;
use crate::rpc::Ack;
use crate::runs::{RunError, RunErrorCode, RunRecord, RunStatus};
use crate::time::{now_ms, rfc3339};
use futures::future::select;
use std::time::Duration;
use worker::{Delay, SqlStorage};

mod changes;

pub(super) struct Call<'a> {
    ledger: &'a RunLedger,
    sql: SqlStorage,
    now: i64,
    mcp_session: Option<McpSessionRef>,
}

impl<'a> Call<'a> {
    /// A request, after its MCP session (when it names one) was found live and the caller's, or
    /// recorded at its first request (a signed id).
    pub(super) async fn new(
        ledger: &'a RunLedger,
        mcp_session: Option<McpSessionRef>,
    ) -> Result<Self> {
        let sql = ledger.sql();
        let now = now_ms();
        if let Some(session) = &mcp_session {
            if ledger
                .live_sessions
                .check(&ledger.env, &sql, session, now)?
            {
                // Recorded just now: the housekeeping alarm purges it like any other.
                ledger.reschedule().await?;
            }
        }
        Ok(Call {
            ledger,
            sql,
            now,
            mcp_session,
        })
    }
}

impl LedgerHandler for Call<'_> {
    async fn open_mcp_session(&self, op: OpenMcpSession) -> Result<OpenedMcpSession> {
        let id = ids::new_id(ids::MCP_SESSION);
        store::open_mcp_session(
            &self.sql,
            &id,
            &op.principal,
            &op.protocol_version,
            op.client.as_deref(),
            self.now,
        )?;
        self.ledger.reschedule().await?;
        Ok(OpenedMcpSession { id })
    }

    async fn check_mcp_session(&self, _: CheckMcpSession) -> Result<Ack> {
        Ok(Ack {})
    }

    async fn close_mcp_session(&self, _: CloseMcpSession) -> Result<Ack> {
        let session = self
            .mcp_session
            .as_ref()
            .ok_or_else(|| Error::invalid("no MCP session to close"))?;
        store::end_mcp_session(&self.sql, &session.id, self.now)?;
        self.ledger.live_sessions.forget(&session.id);
        self.wake_streams();
        Ok(Ack {})
    }

    async fn create_run(&self, op: CreateRun) -> Result<CreatedRun> {
        let (sql, now, spec, principal) = (&self.sql, self.now, op.spec, op.principal.as_str());
        let session = self.mcp_session.as_ref().map(|s| s.id.as_str());
        // A new task of the session: its streams report it (its run's first transition is
        // written by then).
        let mark_task = |run_id: &str| -> Result<()> {
            let Some(ttl) = op.task_ttl_ms else {
                return Ok(());
            };
            store::insert_task(sql, run_id, session, ttl, now)?;
            self.wake_streams();
            Ok(())
        };
        let request_hash = request_hash(&spec)?;
        // The deployment's defaults fill the limits the caller left open (after the hash, so a
        // retried call matches although the defaults changed meanwhile).
        let mut spec = spec;
        let defaults = crate::config::runs::default_budget(&self.ledger.env);
        spec.budget = Some(spec.budget.unwrap_or_default().or(&defaults)).filter(|b| !b.is_empty());
        if let Some(key) = &spec.idempotency_key {
            if let Some((run_id, hash)) = store::find_by_idempotency_key(sql, principal, key)? {
                if hash != request_hash {
                    return Err(Error::conflict(format!(
                        "idempotencyKey {key:?} was already used for a different request (run {run_id}); \
                         use a new key for a new task"
                    )));
                }
                mark_task(&run_id)?;
                let run = find_run(sql, &run_id)?;
                return Ok(CreatedRun {
                    run,
                    deduplicated: true,
                });
            }
        }
        let session_id = match &spec.session_id {
            Some(id) if store::session_exists(sql, id)? => id.clone(),
            Some(id) => return Err(Error::not_found(format!("session {id} not found"))),
            // A worker run's session is its own and is never continued: it is no work session
            // to list.
            None if spec.worker.is_some() => ids::new_id(ids::SESSION),
            // The caller's spare session, prepared ahead, when there is a fresh one.
            None => {
                let lives = crate::config::runs::spare_lifetime_ms(&self.ledger.env);
                let id = match store::take_spare(sql, principal, lives, now)? {
                    Some(spare) => spare,
                    None => ids::new_id(ids::SESSION),
                };
                store::insert_session(sql, &id, principal, now)?;
                id
            }
        };
        let run_id = ids::new_id(ids::RUN);
        store::insert_run(
            sql,
            &run_id,
            &session_id,
            principal,
            &spec,
            &request_hash,
            now,
        )?;
        mark_task(&run_id)?;
        let run = find_run(sql, &run_id)?;
        // From here on the run is durable: a failed hand-off is retried by the alarm.
        self.ledger.dispatch(sql, &run_id, &session_id).await;
        if spec.session_id.is_none() && spec.worker.is_none() {
            self.ledger
                .prepare_spare(sql, principal, &run_id, now)
                .await;
        }
        self.ledger.reschedule().await?;
        Ok(CreatedRun {
            run,
            deduplicated: false,
        })
    }

    async fn get_run(&self, op: GetRun) -> Result<RunRecord> {
        find_run(&self.sql, &op.run_id)
    }

    async fn await_run(&self, op: AwaitRun) -> Result<RunRecord> {
        let deadline = self.now + i64::from(op.wait_ms.min(MAX_AWAIT_MS));
        loop {
            let run = find_run(&self.sql, &op.run_id)?;
            let ready =
                run.status.is_terminal() || (!op.until_terminal && run.updated_at > op.after);
            let left = deadline - now_ms();
            if ready || left <= 0 {
                return Ok(run);
            }
            self.woken_or_after([op.run_id.as_str()], left).await;
        }
    }

    async fn spare_ready(&self, op: SpareReady) -> Result<Ack> {
        store::spare_ready(&self.sql, &op.session_id)?;
        Ok(Ack {})
    }

    async fn spare_gone(&self, op: SpareGone) -> Result<Ack> {
        store::drop_spare(&self.sql, &op.session_id)?;
        Ok(Ack {})
    }

    async fn session_run(&self, op: SessionRun) -> Result<RunRecord> {
        store::session_run(&self.sql, &op.session_id)?.ok_or_else(|| {
            Error::not_found(format!("session {} has no run in progress", op.session_id))
        })
    }

    async fn list_runs(&self, op: ListRuns) -> Result<Page<RunRecord>> {
        let (items, next) = store::list_runs(
            &self.sql,
            op.session_id.as_deref(),
            op.status,
            op.before,
            op.limit,
        )?;
        Ok(Page { items, next })
    }

    async fn list_sessions(&self, op: ListSessions) -> Result<Page<crate::runs::SessionRecord>> {
        let (items, next) = store::list_sessions(&self.sql, op.before, op.limit)?;
        Ok(Page { items, next })
    }

    async fn cancel_run(&self, op: CancelRun) -> Result<Cancelled> {
        let (sql, now, run_id) = (&self.sql, self.now, op.run_id.as_str());
        let before = find_run(sql, run_id)?;
        let error = RunError {
            code: RunErrorCode::Cancelled,
            message: format!("cancelled by {} at {}", op.principal, rfc3339(now)),
        };
        let (_, changed) =
            store::transition(sql, run_id, RunStatus::Cancelled, Some(&error), None, now)?;
        self.moved(run_id)?;
        if changed {
            super::await_report(sql, &before, now)?;
            self.ledger.notify_session_of_end(&before).await;
            self.ledger.reschedule().await?;
        }
        Ok(Cancelled {
            run: find_run(sql, run_id)?,
            changed,
        })
    }

    async fn transition(&self, op: Transition) -> Result<Transitioned> {
        let (status, applied) = store::transition(
            &self.sql,
            &op.run_id,
            op.to,
            op.error.as_ref(),
            op.outcome.as_ref(),
            self.now,
        )?;
        self.moved(&op.run_id)?;
        // A late report of an ended run releases its held callback.
        if applied || op.outcome.is_some() {
            self.ledger.reschedule().await?;
        }
        Ok(Transitioned { status, applied })
    }

    async fn register_sandbox(&self, op: RegisterSandbox) -> Result<Ack> {
        store::insert_sandbox(&self.sql, &op.summary)?;
        Ok(Ack {})
    }

    async fn set_sandbox_status(&self, op: SetSandboxStatus) -> Result<Ack> {
        store::set_sandbox_status(&self.sql, &op.id, op.status, self.now)?;
        Ok(Ack {})
    }

    async fn list_sandboxes(
        &self,
        op: ListSandboxes,
    ) -> Result<Page<crate::sandboxes::SandboxSummary>> {
        let (items, next) = store::list_sandboxes(&self.sql, op.before, op.limit)?;
        Ok(Page { items, next })
    }

    async fn list_worker_runs(&self, op: ListWorkerRuns) -> Result<Page<RunRecord>> {
        let (items, next) = store::list_worker_runs(
            &self.sql,
            op.worker.as_deref(),
            op.status,
            op.before,
            op.limit,
        )?;
        Ok(Page { items, next })
    }

    async fn worker_log(&self, op: WorkerLog) -> Result<Transitioned> {
        let applied = store::set_live_log(&self.sql, &op.run_id, &op.text, self.now)?;
        self.wrote(&op.run_id);
        let status = find_run(&self.sql, &op.run_id)?.status;
        Ok(Transitioned { status, applied })
    }

    async fn await_approval(&self, op: AwaitApproval) -> Result<Transitioned> {
        let applied = store::await_approval(&self.sql, &op.run_id, &op.approval, self.now)?;
        self.moved(&op.run_id)?;
        let status = find_run(&self.sql, &op.run_id)?.status;
        if applied {
            self.ledger.reschedule().await?;
        }
        Ok(Transitioned { status, applied })
    }

    async fn decide(&self, op: Decide) -> Result<RunRecord> {
        let run = store::decide(
            &self.sql,
            &op.run_id,
            op.decision,
            &op.principal,
            op.reason.as_deref(),
            self.now,
        )?;
        self.moved(&op.run_id)?;
        // The session waits at the gate: wake it to go on, or to clean up.
        if run.status.is_terminal() {
            self.ledger.notify_session_of_end(&run).await;
        } else {
            self.ledger.wake_session(&run).await;
        }
        self.ledger.reschedule().await?;
        Ok(run)
    }

    async fn artifact_settled(&self, op: ArtifactSettled) -> Result<Ack> {
        store::settle_artifact(&self.sql, &op.run_id, op.artifact, op.stored, self.now)?;
        self.wrote(&op.run_id);
        Ok(Ack {})
    }

    async fn record_usage(&self, op: RecordUsage) -> Result<Ack> {
        let (total, usage) = op.counted();
        store::record_usage(&self.sql, &op.run_id, total, &usage)?;
        Ok(Ack {})
    }

    async fn progress(&self, op: Progress) -> Result<Transitioned> {
        let (status, applied) = store::progress(
            &self.sql,
            &op.run_id,
            &op.phase,
            &op.message,
            op.detail.as_ref(),
            self.now,
        )?;
        self.wrote(&op.run_id);
        Ok(Transitioned { status, applied })
    }

    async fn create_exec_task(&self, op: CreateExecTask) -> Result<TaskRecord> {
        let id = ids::new_id(ids::EXEC_TASK);
        let session = self.mcp_session.as_ref().map(|s| s.id.as_str());
        let json = serde_json::to_string(&op.exec)?;
        store::insert_exec_task(&self.sql, &id, session, op.ttl_ms, self.now, &json)?;
        self.wake_streams();
        self.find_task(&id)
    }

    async fn end_exec_task(&self, op: EndExecTask) -> Result<TaskRecord> {
        let record = self.find_task(&op.task_id)?;
        let TaskWork::Exec(mut exec) = record.work else {
            return Err(Error::invalid(format!(
                "task {} is not a command",
                op.task_id
            )));
        };
        if exec.end.is_some() {
            return self.find_task(&op.task_id);
        }
        let status = op.end.status;
        exec.end = Some(op.end);
        let json = serde_json::to_string(&exec)?;
        store::end_exec_task(&self.sql, &op.task_id, &json, status, self.now)?;
        self.moved(&op.task_id)?;
        self.find_task(&op.task_id)
    }

    async fn get_task(&self, op: GetTask) -> Result<TaskRecord> {
        self.find_task(&op.task_id)
    }

    async fn list_tasks(&self, op: ListTasks) -> Result<Page<TaskRecord>> {
        let (rows, next) = store::list_tasks(&self.sql, op.before, op.limit, self.now)?;
        Ok(Page {
            items: rows
                .into_iter()
                .map(task_record)
                .collect::<Result<Vec<_>>>()?,
            next,
        })
    }

    async fn changes(&self, op: Changes) -> Result<ChangeSet> {
        self.wait_for_changes(op).await
    }

    async fn subscribe(&self, op: Subscribe) -> Result<Ack> {
        let session = self.session_for("subscribe")?;
        find_run(&self.sql, &op.run_id)?;
        store::subscribe(&self.sql, session, &op.uri, &op.run_id)?;
        self.wake_streams();
        Ok(Ack {})
    }

    async fn unsubscribe(&self, op: Unsubscribe) -> Result<Ack> {
        let session = self.session_for("unsubscribe")?;
        store::unsubscribe(&self.sql, session, &op.uri)?;
        self.wake_streams();
        Ok(Ack {})
    }
}

impl Call<'_> {
    /// Wakes the calls waiting for `run_id` to change (`await_run`, streams watching it).
    fn wrote(&self, run_id: &str) {
        self.ledger.waiters.wake(run_id);
    }

    /// [`Self::wrote`] for a write that may move `run_id`'s status: also wakes the streams of
    /// the MCP session whose task it is.
    fn moved(&self, run_id: &str) -> Result<()> {
        self.ledger.moved(&self.sql, run_id)
    }

    /// Returns at the next write under any of `keys` or after `left_ms`, whichever comes first.
    async fn woken_or_after<'k>(&self, keys: impl IntoIterator<Item = &'k str>, left_ms: i64) {
        let woken = self.ledger.waiters.register_any(keys);
        let timer = Delay::from(Duration::from_millis(left_ms.max(0) as u64));
        let _ = select(Box::pin(woken), timer).await;
    }

    fn find_task(&self, id: &str) -> Result<TaskRecord> {
        store::get_task(&self.sql, id, self.now)?
            .map(task_record)
            .transpose()?
            .ok_or_else(|| task_not_found(id))
    }

    /// The envelope's MCP session, which `what` needs.
    fn session_for(&self, what: &str) -> Result<&str> {
        self.mcp_session
            .as_ref()
            .map(|s| s.id.as_str())
            .ok_or_else(|| Error::invalid(format!("{what} needs an MCP session")))
    }
}

fn task_record((task, work): (store::TaskRow, store::Work)) -> Result<TaskRecord> {
    Ok(TaskRecord {
        id: task.run_id,
        ttl_ms: task.ttl_ms,
        created_at: task.created_at,
        work: match work {
            store::Work::Run(run) => TaskWork::Run(run),
            store::Work::Exec(json) => TaskWork::Exec(serde_json::from_str(&json)?),
        },
    })
}

fn task_not_found(id: &str) -> Error {
    Error::not_found(format!(
        "task {id} not found or expired (a run stays readable with opencode_get_result)"
    ))
}
