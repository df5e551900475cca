//! Driving one run through its phases: prepare the session's sandbox → clone → start OpenCode →
//! prompt → follow the agent → transcript, commit, push, pull request. Every step persists the
//! run's state before returning, so an alarm after a restart continues from the same place.

use super::opencode::{self, Activity, Agent};
use super::store::{self, Current, Phase};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ids;
use crate::ledger::Ledger;
use crate::proxy::tokens::{self, Service};
use crate::runs::{error_codes, ProgressDetail, RunError, RunRecord, RunStatus};
use crate::sandbox::{SandboxClient, SandboxOp};
use crate::time::now_ms;
use handoff_wire::{ExecRequest, WORKSPACE};
use std::collections::BTreeMap;
use worker::{console_warn, Env, SqlStorage};

/// What the session should do after a step.
pub enum Next {
    /// Take the next step at once.
    Now,
    /// Wake up again after this many milliseconds.
    After(i64),
    /// Nothing left to do.
    Idle,
}

/// Consecutive failures to reach the sandbox before the run is given up.
const MAX_FAILURES: u32 = 5;
/// How long the agent may stay idle without answering the prompt.
const FIRST_ANSWER_MS: i64 = 120_000;
/// How long the agent may stay idle with an answer that never completed before the turn is
/// taken as over.
const UNSETTLED_GRACE_MS: i64 = 30_000;

pub struct Driver<'a> {
    pub env: &'a Env,
    pub sql: SqlStorage,
    pub session_id: String,
}

/// The sandbox a work session owns: `sbx_` and the session id's random part.
pub fn sandbox_id(session_id: &str) -> String {
    format!(
        "{}{}",
        ids::SANDBOX,
        session_id.trim_start_matches(ids::SESSION)
    )
}

impl Driver<'_> {
    pub(super) fn sandbox(&self) -> Result<SandboxClient> {
        SandboxClient::get(self.env, &sandbox_id(&self.session_id))
    }

    /// One step of the session's work.
    pub async fn step(&self) -> Result<Next> {
        let Some(current) = store::current(&self.sql)? else {
            return match store::next_pending(&self.sql)? {
                Some(run_id) => self.begin(&run_id).await,
                None => Ok(Next::Idle),
            };
        };
        let ledger = Ledger::get(self.env)?;
        let run = ledger.get_run(&current.run_id).await?;
        if run.status.is_terminal() {
            // Cancelled or timed out elsewhere: stop the agent and move on.
            self.stop_agent(&current).await;
            store::clear_current(&self.sql)?;
            return Ok(Next::Now);
        }
        let phase = current.phase;
        match self.advance(current.clone(), &run).await {
            Ok(next) => Ok(next),
            Err(e) if e.kind == ErrorKind::Unavailable && current.failures + 1 < MAX_FAILURES => {
                console_warn!(
                    "session {}: {} (attempt {} of {MAX_FAILURES})",
                    self.session_id,
                    e.message,
                    current.failures + 1
                );
                let mut retry = current;
                retry.failures += 1;
                self.save(&retry)?;
                Ok(Next::After(config::poll_interval_ms(self.env)))
            }
            Err(e) => {
                let code = match (e.kind, phase) {
                    (ErrorKind::Unavailable, Phase::Working) => error_codes::SANDBOX_LOST,
                    (ErrorKind::Unavailable | ErrorKind::NotConfigured, _) => {
                        error_codes::SANDBOX_UNAVAILABLE
                    }
                    (_, Phase::Cloning) => "clone_failed",
                    (_, Phase::StartingAgent | Phase::Prompting) => "agent_failed",
                    _ => "run_failed",
                };
                let message = format!("failed while {}: {}", phase_words(phase), e.message);
                self.fail(&current, code, message).await?;
                Ok(Next::Now)
            }
        }
    }

    async fn begin(&self, run_id: &str) -> Result<Next> {
        let ledger = Ledger::get(self.env)?;
        let started = ledger
            .transition(run_id, RunStatus::Starting, None, None)
            .await?;
        store::remove_pending(&self.sql, run_id)?;
        if !started.applied {
            return Ok(Next::Now);
        }
        let now = now_ms();
        let current = Current {
            run_id: run_id.to_string(),
            phase: Phase::Preparing,
            started_at: now,
            deadline: now + config::max_run_ms(self.env),
            dir: WORKSPACE.to_string(),
            checkout: None,
            agent_process: None,
            agent_session: None,
            marker: format!("[handoff:{run_id}]"),
            prompted_at: None,
            failures: 0,
            detail: ProgressDetail::default(),
            idle_unsettled_since: None,
            sandbox_born: None,
        };
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// Saves the run's state unless it was cleared meanwhile (a cancel arrived while awaiting).
    pub(super) fn save(&self, current: &Current) -> Result<()> {
        match store::current(&self.sql)? {
            Some(stored) if stored.run_id == current.run_id => {
                store::save_current(&self.sql, current)
            }
            None if current.phase == Phase::Preparing => store::save_current(&self.sql, current),
            _ => Ok(()),
        }
    }

    pub(super) async fn progress(&self, current: &Current, message: &str) -> Result<()> {
        let ledger = Ledger::get(self.env)?;
        let reply = ledger
            .progress(
                &current.run_id,
                current.phase.name(),
                message,
                Some(current.detail.clone()),
            )
            .await?;
        if !reply.applied {
            return Err(Error::conflict("the run ended"));
        }
        Ok(())
    }

    async fn advance(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        current.failures = 0;
        match current.phase {
            Phase::Preparing => {
                self.progress(&current, "preparing the sandbox").await?;
                let spec = self.sandbox_spec(run)?;
                self.sandbox()?
                    .ensure(SandboxOp::Ensure {
                        id: sandbox_id(&self.session_id),
                        name: format!("session {}", self.session_id),
                        created_by: run.created_by.clone(),
                        spec,
                        idle_timeout_s: 900,
                    })
                    .await?;
                current.phase = if run.repository.is_some() {
                    Phase::Cloning
                } else {
                    Phase::StartingAgent
                };
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Cloning => {
                let checkout = self.clone_repository(&current, run).await?;
                current.dir = checkout.dir.clone();
                current.checkout = Some(checkout);
                current.phase = Phase::StartingAgent;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::StartingAgent => {
                self.progress(&current, "starting OpenCode").await?;
                self.start_agent(&mut current, run).await?;
                current.phase = Phase::Prompting;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Prompting => {
                self.prompt_agent(&mut current, run).await?;
                Ledger::get(self.env)?
                    .transition(&current.run_id, RunStatus::Running, None, None)
                    .await?;
                current.phase = Phase::Working;
                current.prompted_at = Some(now_ms());
                self.save(&current)?;
                self.progress(&current, "the agent is working").await?;
                Ok(Next::After(config::poll_interval_ms(self.env)))
            }
            Phase::Working => self.follow(current).await,
            Phase::Finishing => self.finish(current, run).await,
        }
    }

    pub(super) fn token(
        &self,
        current: &Current,
        service: Service,
        repo: Option<&str>,
    ) -> Result<String> {
        tokens::mint(
            self.env,
            service,
            &current.run_id,
            repo,
            current.deadline / 1000,
        )
    }

    /// One look at the working agent.
    async fn follow(&self, mut current: Current) -> Result<Next> {
        let sandbox = self.sandbox()?;
        let password = store::meta(&self.sql)?.agent_password.unwrap_or_default();
        let session = current.agent_session.clone().unwrap_or_default();
        let agent = Agent {
            sandbox: &sandbox,
            password: &password,
            dir: &current.dir,
        };
        if now_ms() > current.deadline {
            let _ = agent.abort(&session).await;
            let message = format!(
                "the run took longer than {} (RUN_MAX_DURATION_SECONDS) and was stopped",
                human(config::max_run_ms(self.env) / 1000)
            );
            self.fail(&current, error_codes::TIMED_OUT, message).await?;
            return Ok(Next::Now);
        }
        // Messages first, then the status: a turn read as settled and a session idle after it
        // is really over, whereas the other order races a step that starts in between.
        let messages = match agent.messages(&session, Some(60)).await {
            Ok(messages) => messages,
            Err(e) => return self.agent_unreachable(&current, e).await,
        };
        let turn = opencode::read_turn(&messages, &current.marker);
        let activity = match agent.activity(&session).await {
            Ok(activity) => activity,
            Err(e) => return self.agent_unreachable(&current, e).await,
        };
        if turn.prompted {
            current.detail = turn.detail.clone();
        }
        let message = match &activity {
            Activity::Retry { attempt, message } => {
                format!("the model call failed, retrying (attempt {attempt}): {message}")
            }
            _ => match current.detail.recent.last() {
                Some(step) => format!(
                    "step {}: {} {}",
                    current.detail.steps, step.tool, step.title
                ),
                None => "thinking".to_string(),
            },
        };
        self.save(&current)?;
        self.progress(&current, &message).await?;
        let idle = activity == Activity::Idle;
        let now = now_ms();
        let waited = now - current.prompted_at.unwrap_or(current.started_at);
        // An answer that stays unfinished while the agent is idle (it died mid-step) ends the
        // turn after a grace period rather than at the stall watchdog.
        let unsettled_for = match (
            idle && turn.answered && !turn.settled,
            current.idle_unsettled_since,
        ) {
            (true, Some(since)) => now - since,
            (true, None) => {
                current.idle_unsettled_since = Some(now);
                0
            }
            (false, _) => {
                current.idle_unsettled_since = None;
                0
            }
        };
        if idle && (turn.settled || turn.error.is_some() || unsettled_for > UNSETTLED_GRACE_MS) {
            current.phase = Phase::Finishing;
            self.save(&current)?;
            return Ok(Next::Now);
        }
        self.save(&current)?;
        if idle && !turn.answered && waited > FIRST_ANSWER_MS {
            return Err(Error::internal(
                "the agent went idle without answering the task".to_string(),
            ));
        }
        Ok(Next::After(config::poll_interval_ms(self.env)))
    }

    /// The agent did not answer. If the sandbox it ran in is gone (a new container or daemon
    /// serves it now), the run fails at once saying so; otherwise the error goes on as it was.
    async fn agent_unreachable(&self, current: &Current, e: Error) -> Result<Next> {
        let Some(born) = &current.sandbox_born else {
            return Err(agent_gone(e));
        };
        let Ok(info) = self.sandbox()?.info().await else {
            return Err(agent_gone(e));
        };
        if info.daemon.as_ref().map(|d| d.created_at) == Some(born.created_at) {
            return Err(agent_gone(e));
        }
        let what = if born.container {
            "the sandbox's container stopped"
        } else {
            "the sandbox daemon lost the sandbox"
        };
        let message = format!(
            "{what} while the agent was working, taking the agent and its unpushed work with \
             it; run the task again"
        );
        self.fail(current, error_codes::SANDBOX_LOST, message)
            .await?;
        Ok(Next::Now)
    }

    /// Ends the run as failed (stopping its agent); terminal states stay as they are.
    pub(super) async fn fail(&self, current: &Current, code: &str, message: String) -> Result<()> {
        self.stop_agent(current).await;
        let error = RunError {
            code: code.to_string(),
            message,
        };
        Ledger::get(self.env)?
            .transition(&current.run_id, RunStatus::Failed, Some(error), None)
            .await?;
        store::clear_current(&self.sql)?;
        Ok(())
    }

    /// Aborts the agent's turn and stops OpenCode (best effort).
    pub async fn stop_agent(&self, current: &Current) {
        let Ok(sandbox) = self.sandbox() else {
            return;
        };
        if let Some(session) = &current.agent_session {
            let password = store::meta(&self.sql)
                .ok()
                .and_then(|m| m.agent_password)
                .unwrap_or_default();
            let agent = Agent {
                sandbox: &sandbox,
                password: &password,
                dir: &current.dir,
            };
            let _ = agent.abort(session).await;
        }
        if let Some(process) = current.agent_process {
            let _ = sandbox.kill_process(process).await;
        }
    }
}

/// R2 key of a run's transcript.
pub fn transcript_key(run_id: &str) -> String {
    format!("runs/{run_id}/transcript.json")
}

pub(super) fn argv(args: &[&str], cwd: Option<&str>) -> ExecRequest {
    ExecRequest {
        command: String::new(),
        argv: Some(args.iter().map(|s| s.to_string()).collect()),
        cwd: cwd.map(str::to_string),
        env: BTreeMap::new(),
        timeout_ms: 60_000,
        credentials: Vec::new(),
    }
}

/// An unreachable agent inside a reachable sandbox means OpenCode stopped.
pub(super) fn agent_gone(e: Error) -> Error {
    if e.kind == ErrorKind::PortClosed {
        Error::internal("the agent (OpenCode) stopped unexpectedly".to_string())
    } else {
        e
    }
}

fn phase_words(phase: Phase) -> &'static str {
    match phase {
        Phase::Preparing => "preparing the sandbox",
        Phase::Cloning => "cloning the repository",
        Phase::StartingAgent => "starting the agent",
        Phase::Prompting => "handing the task to the agent",
        Phase::Working => "the agent was working",
        Phase::Finishing => "finishing",
    }
}

fn human(secs: i64) -> String {
    if secs >= 3600 {
        format!("{} h", secs / 3600)
    } else if secs >= 60 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_agent_port_reads_as_the_agent_stopping() {
        let gone = agent_gone(Error::new(ErrorKind::PortClosed, "nothing is listening"));
        assert_eq!(gone.kind, ErrorKind::Internal);
        assert!(gone.message.contains("stopped unexpectedly"), "{gone}");
        // Any other error passes through as it was, whatever its words.
        let other = agent_gone(Error::invalid("nothing is listening"));
        assert_eq!(other.kind, ErrorKind::InvalidInput);
    }

    #[test]
    fn session_sandboxes_share_the_session_id() {
        assert_eq!(sandbox_id("ses_abc"), "sbx_abc");
    }
}
