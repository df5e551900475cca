//! The work session Durable Object, one per `sessionId`: it owns the session's sandbox and runs
//! the session's runs one at a time, in the order they were accepted. It is alarm-driven, so a
//! restart of the Worker resumes the queue; every step is reported to the ledger.

use crate::config;
use crate::error::Result;
use crate::ledger::Ledger;
use crate::rpc;
use crate::runs::{error_codes, RunError, RunStatus};
use crate::time::now_ms;
use futures::future::{select, Either};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use worker::{
    console_error, durable_object, Delay, DurableObject, Env, Fetch, Request, Response, SqlStorage,
    State, Stub,
};

/// Binding name of the session Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "SESSIONS";
/// How long the sandbox daemon may take to answer a health probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS pending (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL UNIQUE,
  enqueued_at INTEGER NOT NULL
);
";

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum SessionOp {
    /// Queue a run of this session.
    Dispatch { run_id: String },
    /// The run ended elsewhere (cancelled, timed out): stop working on it.
    RunEnded { run_id: String },
}

#[derive(Debug, Serialize, Deserialize)]
struct Ack {}

/// A handle on one session's object.
pub struct SessionClient {
    stub: Stub,
}

impl SessionClient {
    pub fn get(env: &Env, session_id: &str) -> Result<SessionClient> {
        let stub = env.durable_object(BINDING)?.get_by_name(session_id)?;
        Ok(SessionClient { stub })
    }

    pub async fn dispatch(&self, run_id: &str) -> Result<()> {
        let op = SessionOp::Dispatch {
            run_id: run_id.to_string(),
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
        if let Err(e) = state.storage().sql().exec(SCHEMA, None) {
            console_error!("session schema: {e}");
        }
        Self { state, env }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        let result = match rpc::read_op::<SessionOp>(req).await {
            Ok(op) => self.handle(op).await,
            Err(e) => Err(e),
        };
        rpc::reply(result)
    }

    async fn alarm(&self) -> worker::Result<Response> {
        while let Some(run_id) = next_pending(&self.sql())? {
            if let Err(e) = self.drive(&run_id).await {
                // Leave the run queued: the platform retries a failed alarm, and the ledger's
                // watchdog fails the run if it never gets anywhere.
                console_error!("session: driving {run_id}: {e}");
                return Err(worker::Error::RustError(e.to_string()));
            }
            remove_pending(&self.sql(), &run_id)?;
        }
        Response::ok("")
    }
}

impl WorkSession {
    fn sql(&self) -> SqlStorage {
        self.state.storage().sql()
    }

    async fn handle(&self, op: SessionOp) -> Result<Ack> {
        match op {
            SessionOp::Dispatch { run_id } => {
                self.sql().exec(
                    "INSERT OR IGNORE INTO pending (run_id, enqueued_at) VALUES (?, ?)",
                    vec![run_id.into(), now_ms().into()],
                )?;
                let storage = self.state.storage();
                if storage.get_alarm().await?.is_none() {
                    storage.set_alarm(0).await?;
                }
            }
            SessionOp::RunEnded { run_id } => remove_pending(&self.sql(), &run_id)?,
        }
        Ok(Ack {})
    }

    /// Takes one run from queued to a terminal state (or as far as this version can).
    async fn drive(&self, run_id: &str) -> Result<()> {
        let ledger = Ledger::get(&self.env)?;
        let started = ledger
            .transition(run_id, RunStatus::Starting, None, None)
            .await?;
        if !started.applied {
            return Ok(()); // it ended before its turn (cancelled, timed out)
        }
        ledger
            .progress(run_id, "preparing_sandbox", "looking for a sandbox backend")
            .await?;
        let error = self.sandbox_unavailable_reason().await;
        ledger
            .transition(run_id, RunStatus::Failed, Some(error), None)
            .await?;
        Ok(())
    }

    /// Why no sandbox can be prepared: the sandbox pipeline that runs agents arrives separately;
    /// until then every run ends here with an explanation the user can act on.
    async fn sandbox_unavailable_reason(&self) -> RunError {
        let message = match config::sandbox_daemon_url(&self.env) {
            None => format!(
                "this deployment has no sandbox backend: {} is not set and no Cloudflare Container \
                 is bound. Configure one (README, \"Sandbox backend\") and start the task again",
                config::SANDBOX_DAEMON_URL
            ),
            Some(url) => match probe_daemon(&url).await {
                Err(reason) => format!(
                    "the sandbox daemon at {url} did not answer ({reason}); make sure it is running, \
                     then start the task again"
                ),
                Ok(()) => format!(
                    "the sandbox daemon at {url} answered, but this version of handoff cannot run \
                     tasks in it yet"
                ),
            },
        };
        RunError {
            code: error_codes::SANDBOX_UNAVAILABLE.into(),
            message,
        }
    }
}

/// Asks the daemon's health endpoint, giving up after `PROBE_TIMEOUT`.
async fn probe_daemon(base_url: &str) -> std::result::Result<(), String> {
    let url = worker::Url::parse(&format!("{base_url}/v1/health")).map_err(|e| e.to_string())?;
    let fetch = Fetch::Url(url);
    let request = Box::pin(fetch.send());
    let timeout = Box::pin(Delay::from(PROBE_TIMEOUT));
    let outcome = select(request, timeout).await;
    match outcome {
        Either::Left((Ok(response), _)) if response.status_code() == 200 => Ok(()),
        Either::Left((Ok(response), _)) => Err(format!("HTTP {}", response.status_code())),
        Either::Left((Err(e), _)) => Err(e.to_string()),
        Either::Right(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
    }
}

fn next_pending(sql: &SqlStorage) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Row {
        run_id: String,
    }
    Ok(sql
        .exec("SELECT run_id FROM pending ORDER BY seq LIMIT 1", None)?
        .to_array::<Row>()?
        .pop()
        .map(|r| r.run_id))
}

fn remove_pending(sql: &SqlStorage, run_id: &str) -> Result<()> {
    sql.exec("DELETE FROM pending WHERE run_id = ?", vec![run_id.into()])?;
    Ok(())
}
