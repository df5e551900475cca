//! Stopping a run's agent: its turn aborted at once when the run ends elsewhere (`interrupt`),
//! then OpenCode stopped for good (`stop_agent`) — keeping, when asked, what the turn did until
//! then: its latest text, usage and conversation.

use super::driver::Driver;
use super::opencode::{self, Agent};
use super::store::{self, Current};
use super::turn::{self, Turn};
use crate::artifacts::Artifact;
use crate::error::Result;
use crate::runs::{RunError, RunErrorCode, RunOutcome, RunStatus};
use crate::sandbox::api::Kill;
use futures::future::{select, Either};
use std::time::Duration;
use worker::{console_warn, Delay};

/// How long a stopped agent gets to write its aborted turn down before it is killed.
const ABORT_SETTLE_MS: i64 = 5_000;
/// How long a cancel (or a run at its deadline) waits for the agent to take its abort: as long
/// as any late ask (`opencode::LATE_ASK_MS`).
const INTERRUPT_WAIT: Duration = Duration::from_millis(opencode::LATE_ASK_MS as u64);

/// Ends the run's OpenCode process (best effort).
async fn kill(agent: &Agent, current: &Current) {
    if let Some(process) = current.agent_process {
        let _ = agent.sandbox.call(Kill { id: process }).await;
    }
}

/// Aborts the agent's turn, waiting at most `INTERRUPT_WAIT`: whether it took the abort (a
/// hung agent would keep the caller for the request's whole timeout).
pub(super) async fn abort_soon(agent: &Agent, session: &str) -> bool {
    match select(Box::pin(agent.abort(session)), Delay::from(INTERRUPT_WAIT)).await {
        Either::Left((answer, _)) => answer.is_ok(),
        Either::Right(_) => false,
    }
}

impl Driver<'_> {
    /// Aborts the agent's turn at once (the run was cancelled): the session's next step stops
    /// the agent for good and keeps what the turn did (`Driver::step`). A cancel waits for an
    /// agent that does not answer only `INTERRUPT_WAIT` (the step kills it anyway).
    pub async fn interrupt(&self, current: &Current) {
        if let (Ok(agent), Some(session)) = (self.agent(current), &current.agent_session) {
            abort_soon(&agent, session).await;
        }
    }

    /// Aborts the agent's turn and stops OpenCode (best effort); a worker run's sandbox goes
    /// with it. With `keep_turn`, returns what the turn did until then as the run's outcome
    /// (none when the agent cannot be read or was never prompted).
    pub(super) async fn stop_agent(
        &self,
        current: &Current,
        keep_turn: bool,
    ) -> Option<RunOutcome> {
        if current.worker.is_some() {
            self.release_worker(current).await;
            return None;
        }
        self.forget_agent(current);
        let agent = self.agent(current).ok()?;
        let mut kept = None;
        // An agent that does not take the abort (gone, or hung) is not asked anything more.
        if let Some(session) = current.agent_session.as_deref() {
            if agent.abort(session).await.is_ok() {
                // Until the aborted turn is written as ended, OpenCode would resume it when it
                // starts next — and answer the session's next run with this turn's late reply.
                agent.settle(session, ABORT_SETTLE_MS).await;
                if keep_turn {
                    kept = self.kept_turn(current, &agent, session).await;
                }
            }
        }
        kill(&agent, current).await;
        kept
    }

    /// Stops an agent that did not take its abort: nothing more is asked of it (each ask would
    /// wait its whole timeout), OpenCode is killed; a worker run's sandbox goes with it.
    async fn kill_agent(&self, current: &Current) {
        if current.worker.is_some() {
            return self.release_worker(current).await;
        }
        self.forget_agent(current);
        if let Ok(agent) = self.agent(current) {
            kill(&agent, current).await;
        }
    }

    /// Forgets the session's agent if it is this run's (it is being stopped): no run's now, and
    /// a step between runs must not take it for an agent kept for the next.
    fn forget_agent(&self, current: &Current) {
        if let Err(e) = self.forget(current) {
            console_warn!("session {}: {e}", self.session_id);
        }
    }

    fn forget(&self, current: &Current) -> Result<()> {
        let mut meta = store::meta(&self.sql)?;
        let this_run = meta.agent.as_ref().map(|kept| kept.process) == current.agent_process;
        if this_run && meta.agent.is_some() {
            meta.agent = None;
            store::save_meta(&self.sql, &meta)?;
        }
        Ok(())
    }

    async fn kept_turn(
        &self,
        current: &Current,
        agent: &Agent,
        session: &str,
    ) -> Option<RunOutcome> {
        let reads = &turn::TURN_READS;
        let messages = turn::messages_since(agent, session, &current.marker, reads)
            .await
            .ok()?;
        let turn = turn::read_turn(&messages, &current.marker);
        if !turn.prompted {
            return None;
        }
        let transcript = agent.transcript(session).await;
        Some(self.turn_outcome(&current.run_id, &turn, transcript).await)
    }

    /// What a turn left: its latest text, usage, and the conversation stored (or why not).
    pub(super) async fn turn_outcome(
        &self,
        run_id: &str,
        turn: &Turn,
        transcript: Result<(String, bool)>,
    ) -> RunOutcome {
        let mut outcome = RunOutcome {
            summary: turn
                .last_text
                .as_deref()
                .map(|t| opencode::truncate(t.trim(), 8000)),
            tokens: Some(turn.detail.tokens.clone()),
            cost_usd: Some(turn.detail.cost_usd),
            ..RunOutcome::default()
        };
        match transcript {
            Ok((text, abridged)) => {
                outcome.transcript_abridged = abridged;
                self.store_artifact(&mut outcome, run_id, Artifact::Transcript, text)
                    .await;
            }
            Err(e) => {
                console_warn!(
                    "session {}: run {run_id}: no transcript: {e}",
                    self.session_id
                );
                outcome.transcript_missing =
                    Some(format!("the conversation could not be stored: {e}"));
            }
        }
        outcome
    }

    /// Ends the run as failed (stopping its agent); terminal states stay as they are.
    pub(super) async fn fail(
        &self,
        current: &Current,
        code: RunErrorCode,
        message: String,
    ) -> Result<()> {
        // Once the finish has read the agent's turn, what it left is kept with the failure.
        let outcome = current.turn_read.as_ref().map(|read| read.outcome.clone());
        self.fail_with(current, code, message, outcome).await
    }

    /// [`Self::fail`], keeping what the agent's turn did until then (a run stopped mid-turn) —
    /// unless the agent did not take its abort (`answered` false): then it is killed unasked.
    pub(super) async fn fail_keeping_turn(
        &self,
        current: &Current,
        code: RunErrorCode,
        message: String,
        answered: bool,
    ) -> Result<()> {
        let outcome = if answered {
            self.stop_agent(current, true).await
        } else {
            self.kill_agent(current).await;
            None
        };
        self.end_failed(current, RunError { code, message }, outcome)
            .await
    }

    /// [`Self::fail`], keeping what the run produced before it failed (its agent's summary and
    /// usage, the conversation, a pushed branch).
    pub(super) async fn fail_with(
        &self,
        current: &Current,
        code: RunErrorCode,
        message: String,
        outcome: Option<RunOutcome>,
    ) -> Result<()> {
        self.stop_agent(current, false).await;
        self.end_failed(current, RunError { code, message }, outcome)
            .await
    }

    /// Reports the run failed (its agent stopped already) and moves on.
    async fn end_failed(
        &self,
        current: &Current,
        error: RunError,
        outcome: Option<RunOutcome>,
    ) -> Result<()> {
        self.transition(&current.run_id, RunStatus::Failed, Some(error), outcome)
            .await?;
        store::clear_current(&self.sql)
    }
}
