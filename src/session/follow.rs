//! Following the working agent: one look per alarm at its messages and status, turned into
//! progress and, through `policy::judge`, into the decision to keep following or finish.

use super::driver::{Driver, Next};
use super::opencode::{Activity, Agent};
use super::policy::{self, Look, Turn};
use super::store::{Current, Phase};
use super::turn;
use crate::config;
use crate::config::runs as runs_config;
use crate::error::{Error, ErrorKind, Result};
use crate::runs::{RunErrorCode, RunRecord};
use crate::sandbox::api::Info;
use crate::time::now_ms;
use serde_json::json;

impl Driver<'_> {
    /// One look at the working agent.
    pub(super) async fn follow(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        let max_run_ms = config::max_run_ms(self.env);
        // A coding run near its deadline stops its agent while its git token is still good.
        let stop_at = match current.worker {
            None => current.deadline - runs_config::finish_reserve_ms(max_run_ms),
            Some(_) => current.deadline,
        };
        // No ask of the agent holds this look much past that (a hung agent would hold it for a
        // whole request timeout): the next look stops the agent.
        let agent = Agent {
            answer_by: Some(stop_at),
            ..self.agent(&current)?
        };
        let session = current.agent_session.clone().unwrap_or_default();
        let now = now_ms();
        let late = now > current.deadline;
        if late || now > stop_at {
            let aborted = super::stop::abort_soon(&agent, &session).await;
            if !aborted && !self.daemon_answers().await {
                // Not the agent but its sandbox is out of reach (a network cut, a daemon
                // restarting): waited out as any outage is. The look once it is back stops
                // the agent (late, its work still pushed) instead of giving the run up now.
                return Err(Error::unavailable(
                    "the sandbox daemon is not answering at the run's time limit".to_string(),
                ));
            }
            if current.worker.is_none() && aborted {
                // Its work so far is pushed to its branch (`finish`), as a run over its
                // budget's is (the push's token is good for a while even past the deadline).
                let repository = current.checkout.is_some();
                current.stop = Some(policy::out_of_time_message(max_run_ms, repository, late));
                current.stop_code = Some(RunErrorCode::TimedOut);
                current.phase = Phase::Finishing;
                self.save(&current)?;
                return Ok(Next::Now);
            }
            // A worker's run, or an agent that does not answer (nothing to finish with): the
            // run ends now, keeping what the turn did.
            let message = if aborted {
                policy::out_of_time_message(max_run_ms, false, late)
            } else {
                policy::out_of_time_unanswered(max_run_ms)
            };
            self.fail_keeping_turn(&current, RunErrorCode::TimedOut, message, aborted)
                .await?;
            return Ok(Next::Now);
        }
        if current.retry_at.is_some() {
            return self.await_retry(current, run).await;
        }
        // A read of the messages costs OpenCode tens of milliseconds of CPU, its status a few:
        // while the agent is busy, the messages are read every LOOK_EVERY_MS only.
        let now = now_ms();
        if current.looked_at.is_some_and(|at| now - at < LOOK_EVERY_MS) {
            match agent.activity(&session).await {
                Ok(Activity::Busy) => return Ok(self.until_turn_ends(&agent, &session).await),
                Ok(_) => {}
                Err(e) => return self.agent_unreachable(&current, e).await,
            }
        }
        current.looked_at = Some(now);
        // Messages first, then the status: a turn read as settled and a session idle after it
        // is really over, whereas the other order races a step that starts in between.
        // The latest 60 messages hold a short turn; a longer one is read back to its prompt
        // (up to 1,000). Once a look has found the turn long, the reading starts at 1,000 and
        // may go on to all: the prompt is surely written, so the whole history is read only
        // for a turn of over 1,000 messages.
        let reads: &[Option<u32>] = if current.detail.steps >= 50 {
            &[Some(1_000), None]
        } else {
            &[Some(60), Some(1_000)]
        };
        let messages = match turn::messages_since(&agent, &session, &current.marker, reads).await {
            Ok(messages) => messages,
            Err(e) => return self.agent_unreachable(&current, e).await,
        };
        let turn = turn::read_turn(&messages, &current.marker);
        let activity = match agent.activity(&session).await {
            Ok(activity) => activity,
            Err(e) => return self.agent_unreachable(&current, e).await,
        };
        if turn.prompted {
            current.detail = turn.detail.clone();
        }
        self.save(&current)?;
        if let Some(message) = super::worker_run::agent_over_limit(&current) {
            let _ = agent.abort(&session).await;
            self.fail(&current, super::worker_run::OVER_LIMIT, message)
                .await?;
            return Ok(Next::Now);
        }
        if let Some(message) = over_budget(run, &current) {
            let _ = agent.abort(&session).await;
            if current.worker.is_some() {
                self.fail(&current, RunErrorCode::BudgetExceeded, message)
                    .await?;
                return Ok(Next::Now);
            }
            // The work so far is pushed before the run ends (`finish`).
            current.stop = Some(message);
            current.phase = Phase::Finishing;
            self.save(&current)?;
            return Ok(Next::Now);
        }
        // Counted from the turn's first answer (OpenCode creates it as the model call starts),
        // so a prompt OpenCode has not taken up yet is not a silent model.
        let waiting_on_model = activity == Activity::Busy && turn.answered && !turn.tool_running;
        current.quiet = policy::quiet(current.quiet, waiting_on_model, turn.motion, now);
        let silent_ms = current.quiet.map_or(0, |(_, since)| now - since);
        if silent_ms > runs_config::model_stall_ms(self.env) {
            let _ = agent.abort(&session).await;
            return self.model_silent(current, silent_ms).await;
        }
        let message = policy::working_message(&activity, &current.detail);
        let digest =
            crate::mac::sha256_hex(json!([message, current.detail]).to_string().as_bytes());
        let now = now_ms();
        let repeat = match &current.reported {
            Some((last, at)) => *last != digest || now - at >= REPORT_EVERY_MS,
            None => true,
        };
        if repeat {
            self.progress(&current, &message).await?;
            current.reported = Some((digest, now));
        }
        let look = Look {
            idle: activity == Activity::Idle,
            answered: turn.answered,
            settled: turn.settled,
            errored: turn.error.is_some(),
            now,
            waited_ms: now - current.prompted_at.unwrap_or(current.started_at),
            idle_unsettled_since: current.idle_unsettled_since,
        };
        let (verdict, unsettled_since) = policy::judge(&look);
        current.idle_unsettled_since = unsettled_since;
        if verdict == Turn::Over && self.retries_turn(&current, turn.retryable) {
            let error = turn.error.clone().unwrap_or_default();
            return self.schedule_retry(current, &error).await;
        }
        if verdict == Turn::Over {
            current.phase = Phase::Finishing;
        }
        self.save(&current)?;
        match verdict {
            Turn::Over => Ok(Next::Now),
            Turn::NeverAnswered => Err(Error::internal(
                "the agent went idle without answering the task".to_string(),
            )),
            Turn::Working => Ok(match activity {
                Activity::Busy => self.until_turn_ends(&agent, &session).await,
                // Idle but not over: its last answer still being written, or the prompt not
                // taken up yet. That passes in a moment, not a whole interval.
                Activity::Idle => Next::After(config::poll_interval_ms(self.env).min(SETTLING_MS)),
                Activity::Retry { .. } => Next::After(config::poll_interval_ms(self.env)),
            }),
        }
    }

    /// Waits for the busy agent's turn to end, watching its events until the poll interval is
    /// over (in watches of at most `WATCH_MAX_MS`), so a finished turn is noticed at once
    /// instead of at the next look. Between two watches it asks whether the agent is still
    /// busy: a turn that ended just before a watch began sends no event that watch could see.
    /// Looks again at once when the turn ended or the interval is over; otherwise (a watch
    /// failed or its stream ended early) once the rest has passed.
    pub(super) async fn until_turn_ends(&self, agent: &Agent, session: &str) -> Next {
        let started = now_ms();
        let interval = config::poll_interval_ms(self.env);
        let watching_until = started + interval.min(WATCHING_MAX_MS);
        // The rest of the interval, once no watch is running.
        let rest = || match started + interval - now_ms() {
            left if left > 0 => Next::After(left),
            _ => Next::Now,
        };
        loop {
            let watch_ms = (watching_until - now_ms()).min(WATCH_MAX_MS);
            if watch_ms <= 0 {
                return rest();
            }
            let watched_from = now_ms();
            if let Ok(true) = agent.watch_for_idle(session, watch_ms as u64).await {
                return Next::Now;
            }
            // A watch that did not last its time failed: no new one, the rest is waited out.
            let failed = now_ms() - watched_from < watch_ms - WATCH_SLACK_MS;
            if failed || now_ms() >= watching_until {
                return rest();
            }
            if !matches!(agent.activity(session).await, Ok(Activity::Busy)) {
                return Next::Now;
            }
        }
    }

    /// Whether the sandbox's daemon answers (an agent that does not, inside a sandbox that
    /// does, is hung).
    async fn daemon_answers(&self) -> bool {
        match self.sandbox() {
            Ok(sandbox) => matches!(sandbox.call(Info {}).await, Ok(info) if info.daemon.is_some()),
            Err(_) => false,
        }
    }

    /// The agent did not answer. If the sandbox it ran in is gone (a new container or daemon
    /// serves it now), the run fails at once saying so; if the sandbox is the same and the
    /// agent stopped, the run resumes (`resume.rs`); otherwise the error goes on as it was.
    async fn agent_unreachable(&self, current: &Current, e: Error) -> Result<Next> {
        let Some(born) = &current.sandbox_born else {
            return Err(policy::agent_gone(e));
        };
        let Ok(info) = self.sandbox()?.call(Info {}).await else {
            return Err(policy::agent_gone(e));
        };
        let Some(daemon) = info.daemon else {
            // The daemon is not answering (restarting? cut off?): tried again for a while
            // (`policy::retries`).
            return Err(Error::unavailable(format!(
                "the sandbox daemon is not answering: {e}"
            )));
        };
        if daemon.created_at == born.created_at {
            // The sandbox kept its files: an agent whose port is closed stopped, and is
            // started again on its session.
            if e.kind == ErrorKind::PortClosed {
                return self.agent_stopped(current.clone()).await;
            }
            return Err(policy::agent_gone(e));
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
        self.fail(current, RunErrorCode::SandboxLost, message)
            .await?;
        Ok(Next::Now)
    }
}

/// How often the messages of a busy agent are read.
const LOOK_EVERY_MS: i64 = 2_000;
/// The longest one watch for the end of a turn lasts.
const WATCH_MAX_MS: i64 = 10_000;
/// The longest one step watches (a session's alarm takes several steps, and an alarm must end
/// within minutes): with a longer poll interval, the rest is waited out.
const WATCHING_MAX_MS: i64 = 60_000;
/// How much sooner than asked a watch may end and still count as having lasted its time.
const WATCH_SLACK_MS: i64 = 500;
/// How soon an idle agent whose turn is not over yet is looked at again.
const SETTLING_MS: i64 = 500;
/// How often an unchanged progress report is repeated (it keeps the stall watchdog fed).
const REPORT_EVERY_MS: i64 = 10_000;

/// Whether the run is over its budget, counting the agent's usage as just read.
fn over_budget(run: &RunRecord, current: &Current) -> Option<String> {
    let mut seen = run.clone();
    if let Some(progress) = seen.progress.as_mut() {
        progress.detail = Some(current.detail.clone());
    }
    seen.over_budget(now_ms()).map(|e| e.message())
}
