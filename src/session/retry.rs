//! Handing the agent its turn again after the model provider kept failing (429, 5xx) past
//! OpenCode's own retries: the run waits `RUN_MODEL_RETRY_SECONDS` (doubling) and sends a
//! short "carry on" into the same conversation, at most `runs_config::MODEL_RETRIES` times, so an
//! outage of several minutes does not fail the run. The waits show as progress. A worker's
//! agent, whose allowed tools are set per prompt, is not handed back its turn. A model that
//! sends nothing for `RUN_MODEL_STALL_SECONDS` while the agent waits on it is treated the same
//! way: its turn is aborted and handed back, and once out of tries the run stops with its work
//! pushed.

use super::driver::{Driver, Next};
use super::opencode;
use super::store::{Current, Phase};
use crate::config::runs as runs_config;
use crate::error::Result;
use crate::runs::{RunErrorCode, RunRecord};
use crate::time::now_ms;

impl Driver<'_> {
    /// Whether a turn that ended on a provider error (`retryable`: passing trouble) is handed
    /// back: coding runs only, not stopped, fewer than `MODEL_RETRIES` times so far.
    pub(super) fn retries_turn(&self, current: &Current, retryable: bool) -> bool {
        retryable
            && current.worker.is_none()
            && current.stop.is_none()
            && current.model_retries < runs_config::MODEL_RETRIES
    }

    /// Schedules the next try of a turn the provider failed.
    pub(super) async fn schedule_retry(&self, mut current: Current, error: &str) -> Result<Next> {
        current.model_retries += 1;
        let wait = runs_config::model_retry_wait_ms(self.env, current.model_retries);
        current.retry_at = Some(now_ms() + wait);
        self.save(&current)?;
        let message = format!(
            "the model provider kept failing ({}); handing the agent its turn again in {} s \
             (attempt {} of {})",
            opencode::truncate(error, 300),
            wait / 1000,
            current.model_retries,
            runs_config::MODEL_RETRIES
        );
        self.progress(&current, &message).await?;
        Ok(Next::After(wait.min(REPORT_EVERY_MS)))
    }

    /// The model sent nothing for `silent_ms` while the agent waited on it (its turn is
    /// aborted): the turn is handed back like one the provider failed or, out of tries, the
    /// run stops with its work so far pushed to its branch (a worker's run fails).
    pub(super) async fn model_silent(&self, mut current: Current, silent_ms: i64) -> Result<Next> {
        current.quiet = None;
        let error = format!("the model sent nothing for {} s", silent_ms / 1000);
        if self.retries_turn(&current, true) {
            return self.schedule_retry(current, &error).await;
        }
        let message = format!(
            "{error} and the agent was stopped (the turn had been handed back {} times)",
            current.model_retries
        );
        if current.worker.is_some() {
            self.fail(&current, RunErrorCode::AgentFailed, message)
                .await?;
            return Ok(Next::Now);
        }
        current.stop = Some(message);
        current.stop_code = Some(RunErrorCode::AgentFailed);
        current.phase = Phase::Finishing;
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// While a retry is scheduled: wait (saying so), then hand the turn back once.
    pub(super) async fn await_retry(&self, current: Current, run: &RunRecord) -> Result<Next> {
        let Some(at) = current.retry_at else {
            return Ok(Next::Now);
        };
        let left = at - now_ms();
        if left > 0 {
            let message = format!(
                "waiting for the model provider: the agent gets its turn again in {} s \
                 (attempt {} of {})",
                left.div_euclid(1000) + 1,
                current.model_retries,
                runs_config::MODEL_RETRIES
            );
            self.progress(&current, &message).await?;
            return Ok(Next::After(left.min(REPORT_EVERY_MS)));
        }
        let marker = format!(
            "[handoff-retry:{}:{}]",
            current.model_retries, current.run_id
        );
        let text = format!(
            "{marker} The model provider failed for a while and your last step did not \
             finish. Carry on with the task from where you were, then reply with a short \
             summary of what you changed and why."
        );
        self.carry_on(current, run, &marker, &text).await
    }
}

/// How often a waiting run reports that it waits (it keeps the stall watchdog fed).
const REPORT_EVERY_MS: i64 = 10_000;
