//! What a work session object can be asked, and its typed client (the ledger's).

use crate::error::Result;
use crate::rpc::{self, Ack};
use worker::Env;

/// Binding name of the session Durable Object namespace (wrangler.toml).
pub const BINDING: &str = "SESSIONS";

rpc::ops! {
    /// A request to a session object.
    pub enum SessionRequest, answered by SessionHandler {
        /// Queue a run of this session.
        dispatch: Dispatch { run_id: String, session_id: String } => Ack;
        /// The run ended elsewhere (cancelled, timed out): stop working on it.
        run_ended: RunEnded { run_id: String } => Ack;
        /// Something the run waits for happened (an approval): take its next step now.
        wake: Wake { run_id: String } => Ack;
        /// Become a spare session: start the sandbox and the agent a run like `like_run` needs,
        /// then wait frozen for the run that takes this session over.
        prepare: Prepare { session_id: String, like_run: String } => Ack;
    }
}

/// A handle on one session's object.
pub type SessionClient = rpc::Client<SessionRequest>;

/// The object of session `session_id`.
pub fn client(env: &Env, session_id: &str) -> Result<SessionClient> {
    Ok(rpc::Client::new(
        env.durable_object(BINDING)?.get_by_name(session_id)?,
    ))
}
