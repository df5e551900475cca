//! Carrying a run on after its agent stopped mid-run (OpenCode killed, the sandbox daemon
//! restarted) in a sandbox that kept its files. OpenCode keeps its sessions in the workspace
//! (`launch::AGENT_STATE`), so a new OpenCode serves the same session: it is started again and
//! told to carry on, at most [`policy::MAX_RESUMES`] times per run. Each resume is a
//! `resuming_agent` phase in the run's timeline.

use super::driver::{Driver, Next};
use super::launch::model_of;
use super::policy;
use super::store::{Current, Phase};
use super::turn;
use crate::config;
use crate::error::Result;
use crate::runs::{RunErrorCode, RunRecord};
use serde_json::Value;

impl Driver<'_> {
    /// OpenCode stopped while it worked and its sandbox kept its files: resume the run, or
    /// fail it once it was resumed [`policy::MAX_RESUMES`] times (a worker's agent, whose
    /// allowed tools and secrets are set up per pass, is not resumed).
    pub(super) async fn agent_stopped(&self, mut current: Current) -> Result<Next> {
        if current.worker.is_some() || current.resumes >= policy::MAX_RESUMES {
            let message = policy::stopped_for_good(current.resumes);
            self.fail(&current, RunErrorCode::AgentFailed, message)
                .await?;
            return Ok(Next::Now);
        }
        current.resumes += 1;
        current.phase = Phase::Resuming;
        self.save(&current)?;
        Ok(Next::Now)
    }

    /// Starts OpenCode again on the run's session and tells it to carry on (once, even across
    /// restarts of this step).
    pub(super) async fn resume(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        let message = format!(
            "the agent stopped unexpectedly; starting it again to carry on (resume {} of {})",
            current.resumes,
            policy::MAX_RESUMES
        );
        self.progress(&current, &message).await?;
        self.start_agent(&mut current, run, &Default::default())
            .await?;
        let agent = self.agent(&current)?;
        let session = current.agent_session.clone().unwrap_or_default();
        if !agent.session_exists(&session).await? {
            let message = "the agent stopped and its conversation was lost with it; the work \
                           so far is in the sandbox's workspace, unpushed; run the task again"
                .to_string();
            self.fail(&current, RunErrorCode::AgentFailed, message)
                .await?;
            return Ok(Next::Now);
        }
        let marker = resume_marker(&current);
        let text = resume_text(&current, &marker);
        self.carry_on(current, run, &marker, &text).await
    }

    /// Tells the agent to carry on with `text` (once: a message holding `marker` is not sent
    /// again) and follows it afresh.
    pub(super) async fn carry_on(
        &self,
        mut current: Current,
        run: &RunRecord,
        marker: &str,
        text: &str,
    ) -> Result<Next> {
        let session = current.agent_session.clone().unwrap_or_default();
        self.hand_over(&mut current, run, (&session, false), (marker, text), None)
            .await?;
        current.phase = Phase::Working;
        current.retry_at = None;
        current.looked_at = None;
        current.idle_unsettled_since = None;
        current.quiet = None;
        current.reported = None;
        self.save(&current)?;
        self.progress(&current, "the agent is working again")
            .await?;
        Ok(Next::After(config::poll_interval_ms(self.env)))
    }

    /// Hands the agent's session (`session`, `fresh`: created just now) a message (`marker`,
    /// `text`) once. The marker is saved before it is sent, so a restart before the agent's
    /// answer was heard finds it saved and looks for the message among the agent's messages (as
    /// far back as the turn goes: the agent may be many steps further by then) rather than send
    /// it twice. A message not marked was never sent and goes with no look.
    pub(super) async fn hand_over(
        &self,
        current: &mut Current,
        run: &RunRecord,
        (session, fresh): (&str, bool),
        (marker, text): (&str, &str),
        tools: Option<&Value>,
    ) -> Result<()> {
        let agent = self.agent(current)?;
        if current.handing_over.as_deref() == Some(marker) {
            if !fresh {
                let messages = turn::messages_since(&agent, session, marker, &LOOK_BACK).await?;
                if turn::prompt_at(&messages, marker).is_some() {
                    return Ok(());
                }
            }
        } else {
            current.handing_over = Some(marker.to_string());
            self.save(current)?;
        }
        let (provider, model) = model_of(self.env, run)?;
        agent.prompt(session, text, &provider, &model, tools).await
    }
}

/// How far back a message that may have been sent is looked for: the latest 10 messages, then
/// 1,000, then all, until it or an earlier prompt is among them (`turn::messages_since`).
const LOOK_BACK: [Option<u32>; 3] = [Some(10), Some(1_000), None];

/// Finds the resume's message among the agent's (it must not contain the run's own marker,
/// which finds the task).
fn resume_marker(current: &Current) -> String {
    format!("[handoff-resume:{}:{}]", current.resumes, current.run_id)
}

fn resume_text(current: &Current, marker: &str) -> String {
    format!(
        "{marker} The agent working on this task stopped unexpectedly and has been started \
         again. Carry on with the task from where it stopped: look at the state of {dir} first \
         (a file may be half-written, a command may not have finished), then finish the work, \
         run the relevant tests, and reply with a short summary of what you changed and why.",
        dir = current.dir
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_is_found_apart_from_the_task() {
        let mut current: Current = serde_json::from_value(serde_json::json!({
            "run_id": "run_1", "phase": "working", "started_at": 0, "deadline": 1,
            "dir": "/w", "checkout": null, "agent_process": null, "agent_session": "s",
            "marker": "[handoff:run_1]", "prompted_at": 0, "failures": 0,
            "detail": crate::runs::ProgressDetail::default()
        }))
        .unwrap();
        assert_eq!(current.resumes, 0, "runs saved before resumes existed");
        current.resumes = 2;
        let marker = resume_marker(&current);
        assert_eq!(marker, "[handoff-resume:2:run_1]");
        let text = resume_text(&current, &marker);
        assert!(text.contains(&marker) && text.contains("/w"));
        assert!(!text.contains(&current.marker));
    }
}
