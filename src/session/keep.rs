//! The session's coding agent between runs: left serving when its run ended by itself, taken
//! up by the next run when it fits (`launch.rs`), stopped once it has waited
//! `RUN_AGENT_KEEP_SECONDS` with no run for it.

use super::driver::Driver;
use super::store::{self, Current, KeptAgent};
use crate::config;
use crate::error::{ErrorKind, Result};
use crate::sandbox::api::{Freeze, Info, Kill, Process, SandboxClient};
use crate::sandboxes::Status;
use crate::time::now_ms;
use worker::console_warn;

impl Driver<'_> {
    /// Stops the kept agent if it is `process` and forgets it.
    pub(super) async fn forget_kept_agent(&self, process: u64) -> Result<()> {
        let mut meta = store::meta(&self.sql)?;
        if meta.agent.as_ref().is_some_and(|k| k.process == process) {
            meta.agent = None;
            store::save_meta(&self.sql, &meta)?;
            let _ = self.sandbox()?.call(Kill { id: process }).await;
        }
        Ok(())
    }

    /// Leaves the run's agent serving for the session's next run (a coding agent whose turn
    /// ended by itself), or stops it.
    pub(super) async fn release_agent(&self, current: &Current, keep: bool) -> Result<()> {
        let mut meta = store::meta(&self.sql)?;
        match meta.agent.as_mut() {
            Some(kept)
                if keep
                    && current.agent_process == Some(kept.process)
                    && config::runs::agent_keep_ms(self.env) > 0 =>
            {
                kept.released_at = Some(now_ms());
                store::save_meta(&self.sql, &meta)
            }
            _ => {
                self.stop_agent(current, false).await;
                Ok(())
            }
        }
    }

    /// Stops the kept agent once it has waited `RUN_AGENT_KEEP_SECONDS` with no run for it;
    /// otherwise freezes it (once) and says how long it may still wait. Frozen, it keeps its
    /// memory and costs no CPU; the next run thaws it (`launch.rs`).
    pub(super) async fn expire_kept_agent(&self) -> Result<Option<i64>> {
        let mut meta = store::meta(&self.sql)?;
        let Some(kept) = meta.agent.clone() else {
            return Ok(None);
        };
        let left = kept.released_at.unwrap_or(0) + config::runs::agent_keep_ms(self.env) - now_ms();
        if left > 0 {
            if !kept.frozen {
                // Marked first: the next run thaws it anyway, and a failed freeze only costs
                // the CPU it used before freezing existed.
                if let Some(agent) = meta.agent.as_mut() {
                    agent.frozen = true;
                }
                store::save_meta(&self.sql, &meta)?;
                let freeze = Freeze {
                    id: kept.process,
                    frozen: true,
                };
                if let Err(e) = self.sandbox()?.call(freeze).await {
                    console_warn!("session {}: kept agent not frozen: {}", self.session_id, e);
                }
            }
            return Ok(Some(left));
        }
        meta.agent = None;
        store::save_meta(&self.sql, &meta)?;
        let sandbox = self.sandbox()?;
        // Pausing ended it, and asking a paused sandbox about a process would wake it (and
        // restore its workspace) for nothing.
        let paused = matches!(
            sandbox.call(Info {}).await,
            Ok(info) if info.record.status == Status::Paused
        );
        if !paused && matches!(still_running(&sandbox, &kept).await, Ok(true)) {
            let _ = sandbox.call(Kill { id: kept.process }).await;
        }
        Ok(None)
    }
}

/// Whether the kept agent's process is still the one that was started; an error when the
/// sandbox cannot say (a process it does not know is not running).
pub(super) async fn still_running(sandbox: &SandboxClient, kept: &KeptAgent) -> Result<bool> {
    match sandbox.call(Process { id: kept.process }).await {
        Ok(p) => Ok(p.running && p.started_at == kept.started_at),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Stops an agent's process for good: done when the sandbox says it ended or does not know
/// it, an error when the sandbox cannot be reached (the agent may still run then, and a
/// second one must not be started beside it).
pub(super) async fn kill_agent(sandbox: &SandboxClient, process: u64) -> Result<()> {
    match sandbox.call(Kill { id: process }).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Thaws the kept agent: whether it is still the process that was started, or `None` when the
/// sandbox did not answer (the agent may still be frozen then). A process the sandbox does not
/// know (ended, lost, or stopped by a pause) is not running: no need to ask again.
pub(super) async fn thaw(sandbox: &SandboxClient, kept: &KeptAgent) -> Option<bool> {
    let thaw = Freeze {
        id: kept.process,
        frozen: false,
    };
    match sandbox.call(thaw).await {
        Ok(p) => Some(p.running && !p.frozen && p.started_at == kept.started_at),
        Err(e) if e.kind == ErrorKind::NotFound => Some(false),
        Err(_) => None,
    }
}
