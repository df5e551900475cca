//! The work session Durable Object, one per `sessionId`: it owns the session's sandbox and its
//! OpenCode conversation, and drives the session's runs one at a time, in the order they were
//! accepted. It is alarm-driven — every step is persisted — so a restart of the Worker resumes
//! the run where it was; every step is reported to the ledger.

pub mod api;
mod checkout;
mod complete;
mod driver;
mod finish;
mod follow;
mod git;
mod keep;
mod launch;
mod opencode;
mod outbox;
mod policy;
mod resume;
mod retry;
mod spare;
mod stop;
mod store;
mod turn;
mod worker_run;

use crate::config;
use crate::error::{Error, Result};
use crate::rpc::{self, Ack};
use crate::time::now_ms;
use api::{Dispatch, Prepare, RunEnded, SessionHandler, SessionRequest, Wake};
use driver::{Driver, Next};
use std::rc::Rc;
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, State};

/// Steps one alarm may take before it yields (each step persists its state).
const STEPS_PER_ALARM: usize = 20;
/// How soon an alarm that yielded after `STEPS_PER_ALARM` steps comes back.
const YIELD_MS: i64 = 50;

/// Cloned for each op it answers over RPC (`rpc::export_rpc!`).
#[cfg_attr(not(feature = "bundle-front"), durable_object)]
#[derive(Clone)]
pub struct WorkSession {
    state: Rc<State>,
    env: Env,
}

#[cfg(not(feature = "bundle-front"))]
impl DurableObject for WorkSession {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("session schema: {e}");
        }
        Self {
            state: Rc::new(state),
            env,
        }
    }

    async fn fetch(&self, _req: Request) -> worker::Result<Response> {
        rpc::fetch_refused()
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let Some(driver) = self.driver()? else {
            return Response::ok("");
        };
        let mut done = 0;
        while done < STEPS_PER_ALARM {
            match driver.step().await {
                Ok(Next::Now) => done += 1,
                Ok(Next::After(ms)) => {
                    self.state.storage().set_alarm(ms).await?;
                    return Response::ok("");
                }
                Ok(Next::Idle) => return Response::ok(""),
                Err(e) => {
                    console_error!("session {}: {e}", driver.session_id);
                    break;
                }
            }
        }
        // More to do (come back at once: the steps wait themselves), or a failed step to
        // retry (after the poll interval).
        let failed = done < STEPS_PER_ALARM;
        let next = if failed {
            config::poll_interval_ms(&self.env)
        } else {
            YIELD_MS
        };
        self.state.storage().set_alarm(next).await?;
        Response::ok("")
    }
}

rpc::export_rpc!(WorkSession, |session, text| {
    rpc::serve_text(text, |request: SessionRequest| request.dispatch(session)).await
});

impl WorkSession {
    fn driver(&self) -> Result<Option<Driver<'_>>> {
        let sql = self.state.storage().sql();
        let Some(session_id) = store::meta(&sql)?.session_id else {
            return Ok(None);
        };
        Ok(Some(Driver {
            env: &self.env,
            sql,
            session_id,
        }))
    }
}

impl SessionHandler for WorkSession {
    async fn dispatch(&self, op: Dispatch) -> Result<Ack> {
        let (sql, run_id, session_id) = (self.state.storage().sql(), op.run_id, op.session_id);
        let mut meta = store::meta(&sql)?;
        if meta.session_id.is_none() {
            meta.session_id = Some(session_id);
            store::save_meta(&sql, &meta)?;
        }
        // A spare session's first run takes it over: it is no longer spare.
        if store::spare(&sql)?.is_some() {
            store::save_spare(&sql, None)?;
        }
        store::enqueue(&sql, &run_id, now_ms())?;
        let storage = self.state.storage();
        // An idle session's alarm may be set far ahead (its kept agent's expiry): the new run
        // starts now.
        if storage.get_alarm().await?.is_none() || store::current(&sql)?.is_none() {
            storage.set_alarm(0).await?;
        }
        Ok(Ack {})
    }

    async fn run_ended(&self, op: RunEnded) -> Result<Ack> {
        let (sql, run_id) = (self.state.storage().sql(), op.run_id);
        store::remove_pending(&sql, &run_id)?;
        let current = store::current(&sql)?.filter(|c| c.run_id == run_id);
        if let Some(current) = current {
            if let Some(driver) = self.driver()? {
                if current.worker.is_some() {
                    store::clear_current(&sql)?;
                    driver.stop_agent(&current, false).await;
                } else {
                    // The turn stops now; the next step stops the agent for good and keeps
                    // what the turn did until then (`Driver::step`).
                    driver.interrupt(&current).await;
                }
            }
            self.state.storage().set_alarm(0).await?;
        }
        Ok(Ack {})
    }

    async fn prepare(&self, op: Prepare) -> Result<Ack> {
        let sql = self.state.storage().sql();
        let mut meta = store::meta(&sql)?;
        // Only a new session becomes a spare one.
        if meta.session_id.is_some() {
            return Err(Error::conflict(format!(
                "session {} already exists",
                op.session_id
            )));
        }
        meta.session_id = Some(op.session_id);
        store::save_meta(&sql, &meta)?;
        let spare = store::Spare {
            like_run: op.like_run,
            prepared: false,
        };
        store::save_spare(&sql, Some(&spare))?;
        self.state.storage().set_alarm(0).await?;
        Ok(Ack {})
    }

    async fn wake(&self, op: Wake) -> Result<Ack> {
        let sql = self.state.storage().sql();
        if store::current(&sql)?.is_some_and(|c| c.run_id == op.run_id) {
            self.state.storage().set_alarm(0).await?;
        }
        Ok(Ack {})
    }
}
