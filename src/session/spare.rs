//! A spare session: prepared ahead for its caller's next new session. The ledger names it when
//! a coding run starts a new session; once that run has ended, it starts the sandbox and the
//! agent a run like that one needs, has the agent serve one warm-up prompt (refused at the
//! proxy), and its agent then waits frozen like a kept one (`keep.rs`). The run that takes
//! the session over finds both ready; a spare no run took is deleted when its agent stops,
//! and the ledger forgets it.

use super::driver::{argv, Driver, Next};
use super::launch::{model_of, AgentSetup};
use super::opencode::{Activity, Agent};
use super::store::{self, Current, Phase};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ledger::api::{GetRun, SpareGone, SpareReady};
use crate::runs::RunRecord;
use crate::sandbox::api::{Delete, Exec};
use crate::time::now_ms;
use std::time::Duration;
use worker::{console_warn, Delay};

/// How long the warm-up prompt may take to end. Its model call is refused at once, but in CI,
/// with other runs' agents busy beside it, it once took more than 15 s.
const WARM_UP_MS: i64 = 45_000;
/// How long an aborted warm-up prompt gets to be written down as ended.
const WARM_UP_SETTLE_MS: i64 = 10_000;

impl Driver<'_> {
    /// Prepares the spare session, once, after the run it was made for has ended (so the two
    /// never compete for the host): its sandbox, and its agent started and answering. Returns
    /// the step's next move, or `None` when there is nothing to prepare.
    pub(super) async fn prepare_spare(&self) -> Result<Option<Next>> {
        let Some(mut spare) = store::spare(&self.sql)?.filter(|s| !s.prepared) else {
            return Ok(None);
        };
        let run = self
            .ledger()?
            .call(GetRun {
                run_id: spare.like_run.clone(),
            })
            .await?;
        if !run.status.is_terminal() {
            return Ok(Some(Next::After(5 * config::poll_interval_ms(self.env))));
        }
        // Marked first: a failed preparation is not tried again (the session's first run
        // starts what is missing), and the sandbox it left is deleted (`retire_spare`).
        spare.prepared = true;
        store::save_spare(&self.sql, Some(&spare))?;
        self.sandbox()?.call(self.ensure_sandbox(&run)?).await?;
        let now = now_ms();
        // Not a run's state, and never saved as one (only a run that is preparing is).
        let mut current = Current::begin(&run.id, now, now);
        current.phase = Phase::StartingAgent;
        self.start_agent(&mut current, &run, &AgentSetup::default())
            .await?;
        if let Err(e) = self.warm_up(&run).await {
            console_warn!("spare session {}: warm-up: {e}", self.session_id);
            // Not known to be over, the warm-up may yet reach the model in the run's time: its
            // agent goes, and with it the spare (`retire_spare`, at the session's next step).
            if let Some(process) = current.agent_process {
                self.forget_kept_agent(process).await?;
            }
        }
        // Frozen at once: since the warm-up is served in the run's own folder, leaving OpenCode
        // 3 s to settle first no longer shows (first model request 0.33–0.37 s in three bench
        // runs without, 0.28–0.41 s in five with).
        // It waits from now on, like an agent its run let go, unless a run took it meanwhile.
        let mut meta = store::meta(&self.sql)?;
        if store::current(&self.sql)?.is_none() {
            if let Some(kept) = meta
                .agent
                .as_mut()
                .filter(|k| Some(k.process) == current.agent_process)
            {
                kept.released_at = Some(now_ms());
                store::save_meta(&self.sql, &meta)?;
            }
        }
        // Only now may the ledger hand it out: a run that took it over earlier would wait
        // behind this preparation.
        let ready = SpareReady {
            session_id: self.session_id.clone(),
        };
        self.ledger()?.call(ready).await?;
        Ok(Some(Next::Now))
    }

    /// Has the spare's OpenCode serve one prompt in the folder the run it was prepared for
    /// works in, so that the run that takes the session over does not wait while OpenCode loads
    /// what its first prompt needs, and learns about that folder (1.2–1.5 s of a bare
    /// OpenCode's first prompt in a fresh clone here, 0.06–0.13 s in a folder it has served).
    /// Where that run clones, the folder gets an empty repository first, so OpenCode takes it
    /// for the git repository it will be; the session's first run clears it
    /// (`checkout::clear_warm_repo`) before it clones there. The prompt's
    /// model call never reaches the model: the proxy refuses the session's token while none of
    /// its runs is in progress, and no run can take the spare before it is marked ready, after
    /// this.
    async fn warm_up(&self, run: &RunRecord) -> Result<()> {
        let sandbox = self.sandbox()?;
        let dir = self.work_dir(run)?;
        let mut meta = store::meta(&self.sql)?;
        if run.repository.is_some() {
            meta.warm_repo = Some(dir.clone());
            store::save_meta(&self.sql, &meta)?;
            let init = sandbox
                .call(Exec {
                    request: argv(&["git", "init", "-q", &dir], None),
                })
                .await?;
            if init.exit_code != Some(0) {
                return Err(Error::internal(format!(
                    "git init {dir}: {}",
                    init.stderr.trim()
                )));
            }
        }
        let agent = Agent {
            sandbox,
            password: meta.agent_password.unwrap_or_default(),
            dir,
            answer_by: None,
        };
        let (provider, model) = model_of(self.env, run)?;
        let session = agent.create_session("handoff warm-up").await?;
        agent
            .prompt(&session, "Reply OK.", &provider, &model, None)
            .await?;
        // Its answer ends (refused) once the model call has been made. Until OpenCode is known
        // to be done with the prompt, it could still make that call after a run has taken the
        // session over, and the proxy would let it through then: so a prompt that has not
        // ended in time is aborted, and one that does not settle even so is an error, whose
        // agent the caller stops.
        if !answered(&agent, &session).await? {
            let _ = agent.abort(&session).await;
            if !agent.settle(&session, WARM_UP_SETTLE_MS).await {
                return Err(Error::internal(format!(
                    "the warm-up prompt did not end within {} s, nor once aborted",
                    WARM_UP_MS / 1000
                )));
            }
        }
        agent.delete_session(&session).await
    }

    /// Deletes a spare session's sandbox once its agent is gone (it waited its time, or never
    /// started) and no run took the session.
    pub(super) async fn retire_spare(&self) -> Result<()> {
        let unused = store::spare(&self.sql)?.is_some_and(|s| s.prepared)
            && store::meta(&self.sql)?.agent.is_none()
            && store::current(&self.sql)?.is_none()
            && store::next_pending(&self.sql)?.is_none();
        if !unused {
            return Ok(());
        }
        store::save_spare(&self.sql, None)?;
        match self.sandbox()?.call(Delete {}).await {
            Err(e) if e.kind != ErrorKind::NotFound => {
                console_warn!(
                    "spare session {}: sandbox not deleted: {e}",
                    self.session_id
                )
            }
            _ => {}
        }
        // The ledger forgets it, so the caller's next coding run names a new spare.
        let gone = SpareGone {
            session_id: self.session_id.clone(),
        };
        // Best effort: a row the ledger keeps ages out after `spare_lifetime_ms`.
        if let Err(e) = self.ledger()?.call(gone).await {
            console_warn!("spare session {}: not forgotten: {e}", self.session_id);
        }
        Ok(())
    }
}

/// Whether the warm-up prompt's answer ended, and OpenCode is idle, within `WARM_UP_MS`.
async fn answered(agent: &Agent, session: &str) -> Result<bool> {
    let deadline = now_ms() + WARM_UP_MS;
    while now_ms() < deadline {
        let messages = agent.messages(session, Some(1)).await?;
        let ended = messages.last().is_some_and(|m| {
            m["info"]["role"] == "assistant"
                && !(m["info"]["time"]["completed"].is_null() && m["info"]["error"].is_null())
        });
        if ended && matches!(agent.activity(session).await?, Activity::Idle) {
            return Ok(true);
        }
        Delay::from(Duration::from_millis(100)).await;
    }
    Ok(false)
}
