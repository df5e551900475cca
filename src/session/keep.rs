//! The session's coding agent between runs: left serving when its run ended by itself, taken
//! up by the next run when it fits (`launch.rs`), stopped once it has waited
//! `RUN_AGENT_KEEP_SECONDS` with no run for it.

use super::driver::Driver;
use super::store::{self, Current, KeptAgent};
use crate::config;
use crate::error::Result;
use crate::sandbox::api::{Kill, Process, SandboxClient};
use crate::time::now_ms;

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
                self.stop_agent(current).await;
                Ok(())
            }
        }
    }

    /// Stops the kept agent once it has waited `RUN_AGENT_KEEP_SECONDS` with no run for it;
    /// otherwise says how long it may still wait.
    pub(super) async fn expire_kept_agent(&self) -> Result<Option<i64>> {
        let mut meta = store::meta(&self.sql)?;
        let Some(kept) = meta.agent.clone() else {
            return Ok(None);
        };
        let left = kept.released_at.unwrap_or(0) + config::runs::agent_keep_ms(self.env) - now_ms();
        if left > 0 {
            return Ok(Some(left));
        }
        meta.agent = None;
        store::save_meta(&self.sql, &meta)?;
        let sandbox = self.sandbox()?;
        if still_running(&sandbox, &kept).await {
            let _ = sandbox.call(Kill { id: kept.process }).await;
        }
        Ok(None)
    }
}

/// Whether the kept agent's process is still the one that was started.
pub(super) async fn still_running(sandbox: &SandboxClient, kept: &KeptAgent) -> bool {
    matches!(
        sandbox.call(Process { id: kept.process }).await,
        Ok(p) if p.running && p.started_at == kept.started_at
    )
}
