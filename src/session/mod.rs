//! The work session Durable Object, one per `sessionId`: it owns the session's sandbox and its
//! OpenCode conversation, and drives the session's runs one at a time, in the order they were
//! accepted. It is alarm-driven — every step is persisted — so a restart of the Worker resumes
//! the run where it was; every step is reported to the ledger.

mod checkout;
mod complete;
mod driver;
mod finish;
mod git;
mod launch;
mod opencode;
mod store;

pub use driver::transcript_key;

use crate::config;
use crate::error::Result;
use crate::rpc;
use crate::time::now_ms;
use driver::{Driver, Next};
use serde::{Deserialize, Serialize};
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, State, Stub};

/// Binding name of the session Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "SESSIONS";
/// Steps one alarm may take before it yields (each step persists its state).
const STEPS_PER_ALARM: usize = 20;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum SessionOp {
    /// Queue a run of this session.
    Dispatch { run_id: String, session_id: String },
    /// The run ended elsewhere (cancelled, timed out): stop working on it.
    RunEnded { run_id: String },
}

#[derive(Debug, Serialize, Deserialize)]
struct Ack {}

/// A handle on one session's object.
pub struct SessionClient {
    stub: Stub,
    session_id: String,
}

impl SessionClient {
    pub fn get(env: &Env, session_id: &str) -> Result<SessionClient> {
        let stub = env.durable_object(BINDING)?.get_by_name(session_id)?;
        Ok(SessionClient {
            stub,
            session_id: session_id.to_string(),
        })
    }

    pub async fn dispatch(&self, run_id: &str) -> Result<()> {
        let op = SessionOp::Dispatch {
            run_id: run_id.to_string(),
            session_id: self.session_id.clone(),
        };
        rpc::call::<_, Ack>(&self.stub, &op).await.map(|_| ())
    }

    pub async fn run_ended(&self, run_id: &str) -> Result<()> {
        let op = SessionOp::RunEnded {
            run_id: run_id.to_string(),
        };
        rpc::call::<_, Ack>(&self.stub, &op).await.map(|_| ())
    }
}

#[durable_object]
pub struct WorkSession {
    state: State,
    env: Env,
}

impl DurableObject for WorkSession {
    fn new(state: State, env: Env) -> Self {
        if let Err(e) = store::create_schema(&state.storage().sql()) {
            console_error!("session schema: {e}");
        }
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        rpc::serve(req, |op: SessionOp| self.handle(op)).await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let Some(driver) = self.driver()? else {
            return Response::ok("");
        };
        for _ in 0..STEPS_PER_ALARM {
            match driver.step().await {
                Ok(Next::Now) => continue,
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
        // More to do, or a failed step to retry: come back shortly.
        self.state
            .storage()
            .set_alarm(config::poll_interval_ms(&self.env))
            .await?;
        Response::ok("")
    }
}

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

    async fn handle(&self, op: SessionOp) -> Result<Ack> {
        let sql = self.state.storage().sql();
        match op {
            SessionOp::Dispatch { run_id, session_id } => {
                let mut meta = store::meta(&sql)?;
                if meta.session_id.is_none() {
                    meta.session_id = Some(session_id);
                    store::save_meta(&sql, &meta)?;
                }
                store::enqueue(&sql, &run_id, now_ms())?;
                let storage = self.state.storage();
                if storage.get_alarm().await?.is_none() {
                    storage.set_alarm(0).await?;
                }
            }
            SessionOp::RunEnded { run_id } => {
                store::remove_pending(&sql, &run_id)?;
                let current = store::current(&sql)?.filter(|c| c.run_id == run_id);
                if let Some(current) = current {
                    store::clear_current(&sql)?;
                    if let Some(driver) = self.driver()? {
                        driver.stop_agent(&current).await;
                    }
                    self.state.storage().set_alarm(0).await?;
                }
            }
        }
        Ok(Ack {})
    }
}
