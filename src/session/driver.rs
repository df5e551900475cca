//! Driving one run through its phases: prepare the session's sandbox → clone (`checkout.rs`) →
//! start OpenCode and prompt it (`launch.rs`) → follow the agent (`follow.rs`) → transcript,
//! commit, push, pull request (`complete.rs`, `finish.rs`). Every step persists the run's state
//! before returning, so an alarm after a restart continues from the same place. The decisions
//! (retry, error codes, turn over) are pure functions in `policy/`.

use super::opencode::Agent;
use super::policy;
use super::store::{self, Current, Phase};
use crate::config;
use crate::config::runs as runs_config;
use crate::error::{Error, Result};
use crate::ledger::api::{GetRun, Ledger, Progress, Transition, Transitioned};
use crate::runs::{ProgressDetail, RunError, RunErrorCode, RunOutcome, RunRecord, RunStatus};
use crate::sandbox::api::{self as sandbox, Ensure, SandboxClient};
use crate::time::now_ms;
use crate::tokens::{self, Service};
use handoff_wire::ExecRequest;
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

pub struct Driver<'a> {
    pub env: &'a Env,
    pub sql: SqlStorage,
    pub session_id: String,
}

/// The sandbox a work session owns: `sbx_` and the session id's random part.
pub fn sandbox_id(session_id: &str) -> String {
    crate::sandboxes::of_session(session_id)
}

impl Driver<'_> {
    pub(super) fn sandbox(&self) -> Result<SandboxClient> {
        sandbox::client(self.env, &sandbox_id(&self.session_id))
    }

    /// The session's OpenCode, serving the run's directory.
    pub(super) fn agent(&self, current: &Current) -> Result<Agent> {
        Ok(Agent {
            sandbox: self.sandbox()?,
            password: store::meta(&self.sql)?.agent_password.unwrap_or_default(),
            dir: current.dir.clone(),
            answer_by: None,
        })
    }

    pub(super) fn ledger(&self) -> Result<Ledger> {
        Ledger::get(self.env)
    }

    /// Reports a status change of the current run to the ledger.
    pub(super) async fn transition(
        &self,
        run_id: &str,
        to: RunStatus,
        error: Option<RunError>,
        outcome: Option<RunOutcome>,
    ) -> Result<Transitioned> {
        let op = Transition {
            run_id: run_id.to_string(),
            to,
            error,
            outcome,
        };
        self.ledger()?.call(op).await
    }

    /// One step of the session's work.
    pub async fn step(&self) -> Result<Next> {
        let Some(current) = store::current(&self.sql)? else {
            return match store::next_pending(&self.sql)? {
                Some(run_id) => self.begin(&run_id).await,
                // Between runs: artifacts the bucket refused are tried again, and a kept agent
                // waits a while for the session's next run, then stops.
                None => {
                    if let Some(next) = self.prepare_spare().await? {
                        // A run that took the session over while it awaited starts now.
                        let taken = store::next_pending(&self.sql)?.is_some();
                        return Ok(if taken { Next::Now } else { next });
                    }
                    let artifacts = self.flush_artifacts().await?;
                    let agent = self.expire_kept_agent().await?;
                    self.retire_spare().await?;
                    // A run dispatched while those awaited starts now: the alarm this step
                    // sets would otherwise replace the one its dispatch set for now.
                    if store::next_pending(&self.sql)?.is_some() {
                        return Ok(Next::Now);
                    }
                    Ok(match artifacts.into_iter().chain(agent).min() {
                        Some(left) => Next::After(left),
                        None => Next::Idle,
                    })
                }
            };
        };
        let run = self
            .ledger()?
            .call(GetRun {
                run_id: current.run_id.clone(),
            })
            .await?;
        if run.status.is_terminal() {
            // Cancelled or timed out elsewhere: stop the agent, keep what its turn did until
            // then (the ledger fills the ended run's empty outcome with it), and move on.
            // A coding run always reports (an empty outcome when the turn left nothing): its
            // callback waits for the report.
            let outcome = self.stop_agent(&current, true).await;
            if current.worker.is_none() {
                let outcome = Some(outcome.unwrap_or_default());
                let kept = self.transition(&current.run_id, run.status, None, outcome);
                if let Err(e) = kept.await {
                    let id = &self.session_id;
                    console_warn!("session {id}: run {}: its turn not kept: {e}", run.id);
                }
            }
            store::clear_current(&self.sql)?;
            return Ok(Next::Now);
        }
        let phase = current.phase;
        match self.advance(current.clone(), &run).await {
            Ok(next) => Ok(next),
            Err(e) if policy::retries(e.kind, self.outage(&current), phase) => {
                // What the failed step saved stands (e.g. the marker of a message it was
                // sending): it is tried again from there, as after a restart.
                let stored = store::current(&self.sql)?;
                let Some(mut retry) = stored.filter(|c| c.run_id == current.run_id) else {
                    return Ok(Next::Now);
                };
                retry.failures = current.failures + 1;
                let now = now_ms();
                let since = *retry
                    .failing_since
                    .insert(current.failing_since.unwrap_or(now));
                console_warn!(
                    "session {}: {} (attempt {}, failing for {} s)",
                    self.session_id,
                    e.message,
                    retry.failures,
                    (now - since) / 1000
                );
                self.save(&retry)?;
                if policy::detached(phase) {
                    let message = policy::waiting_message(
                        &e.message,
                        runs_config::daemon_outage_ms(self.env) / 1000,
                    );
                    // Best effort: the ledger is told again once the sandbox answers.
                    let _ = self.progress(&retry, &message).await;
                }
                let poll = config::poll_interval_ms(self.env);
                Ok(Next::After(policy::retry_delay_ms(
                    poll,
                    retry.failures - 1,
                )))
            }
            Err(e) => {
                let code = policy::failure_code(e.kind, phase);
                let message = policy::failure_message(phase, &e.message);
                // As the failed step left it (an agent it started, the turn it read).
                let stored = store::current(&self.sql)?.filter(|c| c.run_id == current.run_id);
                self.fail(&stored.unwrap_or(current), code, message).await?;
                Ok(Next::Now)
            }
        }
    }

    async fn begin(&self, run_id: &str) -> Result<Next> {
        let started = self
            .transition(run_id, RunStatus::Starting, None, None)
            .await?;
        store::remove_pending(&self.sql, run_id)?;
        if !started.applied {
            return Ok(Next::Now);
        }
        let now = now_ms();
        let current = Current::begin(run_id, now, now + config::max_run_ms(self.env));
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// The session's sandbox as `run` needs it, created if it is not there.
    pub(super) fn ensure_sandbox(&self, run: &RunRecord) -> Result<Ensure> {
        Ok(Ensure {
            id: sandbox_id(&self.session_id),
            name: format!("session {}", self.session_id),
            created_by: run.created_by.clone(),
            spec: self.sandbox_spec(run)?,
            idle_timeout_s: 900,
        })
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

    /// Reports progress in the run's current phase.
    pub(super) async fn progress(&self, current: &Current, message: &str) -> Result<()> {
        let detail = Some(current.detail.clone());
        self.report(current, current.phase.name(), message, detail)
            .await
    }

    /// Reports progress under `phase`; fails when the run ended meanwhile.
    pub(super) async fn report(
        &self,
        current: &Current,
        phase: &str,
        message: &str,
        detail: Option<ProgressDetail>,
    ) -> Result<()> {
        let op = Progress {
            run_id: current.run_id.clone(),
            phase: phase.to_string(),
            message: message.to_string(),
            detail,
        };
        let reply = self.ledger()?.call(op).await?;
        if !reply.applied {
            return Err(Error::conflict("the run ended"));
        }
        Ok(())
    }

    /// The outage a failed step is part of, as the retry policy weighs it.
    fn outage(&self, current: &Current) -> policy::Outage {
        policy::Outage {
            failures: current.failures,
            for_ms: current.failing_since.map_or(0, |since| now_ms() - since),
            tolerated_ms: runs_config::daemon_outage_ms(self.env),
        }
    }

    async fn advance(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        current.failures = 0;
        current.failing_since = None;
        // A worker's script has no model calls for the proxy to refuse: its time budget is
        // held here.
        if current.phase == Phase::Executing {
            if let Some(over) = run.over_budget(now_ms()) {
                self.fail(&current, RunErrorCode::BudgetExceeded, over.message())
                    .await?;
                return Ok(Next::Now);
            }
        }
        if let Some(worker) = &run.worker {
            return self.advance_worker(current, run, &worker.spec).await;
        }
        match current.phase {
            Phase::Preparing => {
                self.progress(&current, "preparing the sandbox").await?;
                self.sandbox()?.call(self.ensure_sandbox(run)?).await?;
                self.clear_warm_repo(run).await?;
                if run.repository.is_some() {
                    // OpenCode starts while the repository is cloned; the next phases wait for
                    // it. A failure here is met again, and reported, when the agent starts.
                    if let Err(e) = self
                        .launch_agent(&mut current, run, &Default::default())
                        .await
                    {
                        console_warn!("session {}: starting OpenCode early: {e}", self.session_id);
                    }
                }
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
                self.start_agent(&mut current, run, &Default::default())
                    .await?;
                current.phase = Phase::Prompting;
                self.save(&current)?;
                Ok(Next::Now)
            }
            Phase::Prompting => {
                self.prompt_agent(&mut current, run, None, &Default::default())
                    .await?;
                self.transition(&current.run_id, RunStatus::Running, None, None)
                    .await?;
                current.phase = Phase::Working;
                current.prompted_at = Some(now_ms());
                self.save(&current)?;
                self.progress(&current, "the agent is working").await?;
                let (agent, session) = (self.agent(&current)?, current.agent_session.clone());
                Ok(self
                    .until_turn_ends(&agent, &session.unwrap_or_default())
                    .await)
            }
            Phase::Working => self.follow(current, run).await,
            Phase::Resuming => self.resume(current, run).await,
            Phase::Finishing => self.finish(current, run).await,
            Phase::Staging | Phase::Executing | Phase::AwaitingApproval | Phase::Collecting => {
                Err(Error::internal("a coding run has no worker phases"))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_sandboxes_share_the_session_id() {
        assert_eq!(sandbox_id("ses_abc"), "sbx_abc");
    }
}
