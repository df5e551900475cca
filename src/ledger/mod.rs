//! The run ledger Durable Object: the one source of truth for runs, work sessions and MCP
//! sessions, in SQLite. Its alarm is the watchdog that guarantees every accepted run reaches a
//! terminal state, and the dispatcher that retries hand-offs to session objects.

pub mod api;
mod callbacks;
mod handler;
mod live_sessions;
mod store;
mod waiters;

use crate::config;
use crate::error::{Error, Result};
use crate::mcp_session_ids;
use crate::rpc;
use crate::runs::{RunError, RunErrorCode, RunRecord, RunSpec, RunStatus};
use crate::session::api as session;
use crate::time::{alarm_offset, now_ms, rfc3339};
use api::Envelope;
use std::cell::Cell;
use std::rc::Rc;
use worker::{
    console_error, durable_object, DurableObject, Env, Request, Response, SqlStorage, State,
};

/// How long a queued run may wait for its hand-off to the session before the alarm retries it.
const DISPATCH_GRACE_MS: i64 = 10_000;
/// The alarm wakes at least this often to purge old MCP sessions.
const HOUSEKEEPING_MS: i64 = 6 * 3600 * 1000;
/// MCP sessions unused for this long are forgotten (the client re-initializes on the 404).
const MCP_SESSION_IDLE_MS: i64 = 30 * 24 * 3600 * 1000;
/// Ended MCP sessions are kept this long so they answer 404 rather than looking unknown, and
/// so a signed id is never recorded again once ended (see `mcp_session_ids`).
const MCP_SESSION_ENDED_KEEP_MS: i64 = 24 * 3600 * 1000;
const _: () = assert!(
    mcp_session_ids::OPEN_WINDOW_MS + mcp_session_ids::CLOCK_SKEW_MS <= MCP_SESSION_ENDED_KEEP_MS
        && MCP_SESSION_ENDED_KEEP_MS <= MCP_SESSION_IDLE_MS
);
/// `last_seen_at` is rewritten at most this often, so polling does not write on every call.
const MCP_SESSION_TOUCH_MS: i64 = 3600 * 1000;

/// Cloned for each op it answers over RPC (`rpc::export_rpc!`): every field is shared.
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
#[derive(Clone)]
pub struct RunLedger {
    state: Rc<State>,
    env: Env,
    /// The alarm time this instance last read or set; `None` when unknown.
    alarm_at: Rc<Cell<Option<i64>>>,
    /// The MCP sessions this instance found live (the rows' mirror, see `live_sessions`).
    live_sessions: Rc<live_sessions::LiveSessions>,
    /// Calls waiting for a run to change (`await_run`).
    waiters: Rc<waiters::Waiters>,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for RunLedger {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("ledger schema: {e}");
        }
        Self {
            state: Rc::new(state),
            env,
            alarm_at: Rc::default(),
            live_sessions: Rc::default(),
            waiters: Rc::default(),
        }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        rpc::fetch_refused()
    }

    async fn alarm(&self) -> worker::Result<Response> {
        self.alarm_at.set(None);
        if let Err(e) = self.housekeeping().await {
            console_error!("ledger alarm: {e}");
            // Make sure a failed round does not leave the ledger without its next wake-up.
            self.state.storage().set_alarm(DISPATCH_GRACE_MS).await?;
        }
        Response::ok("")
    }
}

rpc::export_rpc!(RunLedger, |ledger, text| {
    rpc::serve_text(text, |envelope: Envelope| async move {
        let call = handler::Call::new(ledger, envelope.mcp_session).await?;
        envelope.op.dispatch(&call).await
    })
    .await
});

impl RunLedger {
    fn sql(&self) -> SqlStorage {
        self.state.storage().sql()
    }

    fn stall_ms(&self) -> i64 {
        config::stall_timeout_ms(&self.env) as i64
    }

    /// Wakes the calls waiting on `run_id` (its status may have moved) and the streams of the
    /// MCP session whose task it is.
    fn moved(&self, sql: &SqlStorage, run_id: &str) -> Result<()> {
        self.waiters.wake(run_id);
        if let Some(session) = store::task_session(sql, run_id)? {
            self.waiters.wake(&waiters::session_key(&session));
        }
        Ok(())
    }

    /// Hands a run to its session object; on success records the hand-off.
    async fn dispatch(&self, sql: &SqlStorage, run_id: &str, session_id: &str) {
        let op = session::Dispatch {
            run_id: run_id.to_string(),
            session_id: session_id.to_string(),
        };
        let result = match session::client(&self.env, session_id) {
            Ok(client) => client.call(op).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(_) => {
                if let Err(e) = store::mark_dispatched(sql, run_id, now_ms()) {
                    console_error!("ledger: marking {run_id} dispatched: {e}");
                }
            }
            Err(e) => {
                console_error!("ledger: dispatching {run_id} to {session_id}: {e} (will retry)")
            }
        }
    }

    /// Has a spare session prepared for the principal's next new session, like `run_id`'s (its
    /// model and origin), unless one is fresh or spares are off. Best effort: without one, the
    /// next new session starts its agent itself.
    async fn prepare_spare(&self, sql: &SqlStorage, principal: &str, run_id: &str, now: i64) {
        if !config::runs::spare_sessions(&self.env) {
            return;
        }
        let lives = config::runs::spare_lifetime_ms(&self.env);
        match store::has_spare(sql, principal, lives, now) {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => return console_error!("ledger: looking for a spare session: {e}"),
        }
        let session_id = crate::ids::new_id(crate::ids::SESSION);
        if let Err(e) = store::put_spare(sql, principal, &session_id, now) {
            return console_error!("ledger: recording a spare session: {e}");
        }
        let op = session::Prepare {
            session_id: session_id.clone(),
            like_run: run_id.to_string(),
        };
        let result = match session::client(&self.env, &session_id) {
            Ok(client) => client.call(op).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            console_error!("ledger: preparing spare session {session_id}: {e}");
            let _ = store::drop_spare(sql, &session_id);
        }
    }

    /// Tells a run's session that the run ended outside its control (cancel, watchdog), so it
    /// stops working on it. Best effort: the session also checks the ledger before each step.
    async fn notify_session_of_end(&self, run: &RunRecord) {
        let op = session::RunEnded {
            run_id: run.id.clone(),
        };
        let result = match session::client(&self.env, &run.session_id) {
            Ok(client) => client.call(op).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            console_error!(
                "ledger: telling {} that {} ended: {e}",
                run.session_id,
                run.id
            );
        }
    }

    /// Tells a run's session that what the run waited for happened (best effort: the session
    /// also looks again on its own).
    async fn wake_session(&self, run: &RunRecord) {
        let op = session::Wake {
            run_id: run.id.clone(),
        };
        let result = match session::client(&self.env, &run.session_id) {
            Ok(client) => client.call(op).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            console_error!("ledger: waking {} for {}: {e}", run.session_id, run.id);
        }
    }

    /// The alarm's work: fail stalled runs, retry hand-offs, deliver callbacks, forget old MCP
    /// sessions.
    async fn housekeeping(&self) -> Result<()> {
        let sql = self.sql();
        let now = now_ms();
        let stall = self.stall_ms();
        for run in store::stalled_runs(&sql, now - stall)? {
            let error = RunError {
                code: RunErrorCode::TimedOut,
                message: stall_message(&run, now),
            };
            let (_, applied) =
                store::transition(&sql, &run.id, RunStatus::Failed, Some(&error), None, now)?;
            if applied {
                await_report(&sql, &run, now)?;
                self.moved(&sql, &run.id)?;
                self.notify_session_of_end(&run).await;
            }
        }
        for (run_id, session_id) in store::undispatched_runs(&sql, now - DISPATCH_GRACE_MS)? {
            self.dispatch(&sql, &run_id, &session_id).await;
        }
        store::purge_mcp_sessions(
            &sql,
            now - MCP_SESSION_IDLE_MS,
            now - MCP_SESSION_ENDED_KEEP_MS,
        )?;
        self.live_sessions.prune(now);
        self.waiters.prune();
        store::purge_tasks(&sql, now)?;
        store::purge_subscriptions(&sql)?;
        self.deliver_callbacks().await?;
        self.reschedule().await
    }

    /// Makes sure the alarm fires no later than the next deadline.
    async fn reschedule(&self) -> Result<()> {
        let now = now_ms();
        let deadline = store::next_deadline(&self.sql(), self.stall_ms(), DISPATCH_GRACE_MS)?;
        let target = deadline
            .unwrap_or(i64::MAX)
            .min(now + HOUSEKEEPING_MS)
            .max(now);
        let storage = self.state.storage();
        let current = match self.alarm_at.get() {
            Some(at) => Some(at),
            None => storage.get_alarm().await?,
        };
        if current.is_none_or(|at| target < at) {
            storage.set_alarm(alarm_offset(target)).await?;
            self.alarm_at.set(Some(target));
        } else {
            self.alarm_at.set(current);
        }
        Ok(())
    }
}

/// How long the callback of a run that ended elsewhere waits for its driver's report.
const REPORT_GRACE_MS: i64 = 30_000;

/// A coding run its session was working on when it ended elsewhere (`before`: as it was) gets
/// a report of what its agent did once the agent is stopped: its callback waits for that, at
/// most `REPORT_GRACE_MS`.
fn await_report(sql: &SqlStorage, before: &RunRecord, now: i64) -> Result<()> {
    if before.worker.is_none() && matches!(before.status, RunStatus::Starting | RunStatus::Running)
    {
        store::hold_delivery(sql, &before.id, now + REPORT_GRACE_MS)?;
    }
    Ok(())
}

fn find_run(sql: &SqlStorage, run_id: &str) -> Result<RunRecord> {
    store::get_run(sql, run_id)?.ok_or_else(|| Error::not_found(format!("run {run_id} not found")))
}

/// A fingerprint of what a run was asked to do, to tell a retried call from a different request
/// that reuses an idempotency key.
fn request_hash(spec: &RunSpec) -> Result<String> {
    let mut unkeyed = spec.clone();
    unkeyed.idempotency_key = None;
    unkeyed.origin = None;
    Ok(crate::mac::sha256_hex(&serde_json::to_vec(&unkeyed)?))
}

fn stall_message(run: &RunRecord, now: i64) -> String {
    let idle_secs = (now - run.updated_at).max(0) / 1000;
    let last = match &run.progress {
        Some(p) => format!("phase {}", p.phase),
        None => format!("status {}", run.status.as_str()),
    };
    format!(
        "no progress for {} (last: {last} at {}); the sandbox or the agent stopped responding. \
         Start the task again; if this keeps happening, check the sandbox backend",
        human_duration(idle_secs),
        rfc3339(run.updated_at)
    )
}

fn human_duration(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}
