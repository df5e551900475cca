//! Ending a run whose agent is done: the transcript to R2, then — for a repository — commit,
//! push `handoff/<runId>` and open the pull request (`finish.rs`), and the outcome to the
//! ledger.

use super::driver::{Driver, Next};
use super::finish::{self, Failure};
use super::git::Remote;
use super::opencode::Agent;
use super::policy;
use super::store::{self, Current, TurnRead};
use super::turn;
use crate::artifacts::Artifact;
use crate::config;
use crate::config::runs as runs_config;
use crate::error::{ErrorKind, Result};
use crate::links;
use crate::runs::{RunError, RunErrorCode, RunRecord, RunStatus};
use crate::time::now_ms;
use crate::tokens::{self, Service};

impl Driver<'_> {
    pub(super) async fn finish(&self, mut current: Current, run: &RunRecord) -> Result<Next> {
        let agent = self.agent(&current)?;
        let read = match current.turn_read.clone() {
            Some(read) => read,
            None => match self.read_ended_turn(&mut current, run, &agent).await? {
                Some(read) => read,
                None => return Ok(Next::Now),
            },
        };
        let TurnRead {
            mut outcome,
            stop,
            detail,
        } = read;
        let summary = outcome
            .summary
            .clone()
            .unwrap_or_else(|| "(the agent ended without a summary)".to_string());
        outcome.summary = Some(summary.clone());
        if let Some(checkout) = &current.checkout {
            self.report(
                &current,
                "pushing",
                "committing and pushing the changes",
                Some(detail),
            )
            .await?;
            // Valid a little past the deadline, so a run stopped near it still pushes.
            let git_token = tokens::mint(
                self.env,
                Service::Git,
                &current.run_id,
                Some(&format!("{}/{}", checkout.owner, checkout.name)),
                current.deadline.max(now_ms() + runs_config::PUSH_WINDOW_MS) / 1000,
            )?;
            let remote = Remote::new(
                &self.worker_url(run)?,
                &checkout.owner,
                &checkout.name,
                &git_token,
            );
            // Anyone who can read the pull request can read this link: it needs the owner's
            // sign-in, never a bearer token.
            let page = links::run_page_plain_url(&self.worker_public_url(run), &run.id);
            let pushed = match finish::push(
                &agent.sandbox,
                checkout,
                &run.id,
                &run.title,
                &summary,
                &remote,
            )
            .await
            {
                Ok(pushed) => pushed,
                // The sandbox not answering is an outage, waited out like any other
                // (`policy::retries`): the work is still in the sandbox, to push once it is back.
                Err(Failure { error, .. }) if error.kind == ErrorKind::Unavailable => {
                    return Err(error)
                }
                Err(Failure { phase, error }) => {
                    // Only writing the commit needs the disk; a failed push is the remote's.
                    let full = phase == finish::COMMITTING
                        && finish::disk_is_full(&agent.sandbox, &checkout.dir).await;
                    let message = policy::push_failure_message(phase, &error.message, full);
                    self.fail_with(&current, RunErrorCode::PushFailed, message, Some(outcome))
                        .await?;
                    return Ok(Next::Now);
                }
            };
            if let Some(pushed) = pushed {
                outcome.branch = Some(pushed.branch.clone());
                outcome.commits = pushed.commits;
                outcome.changed_files = pushed.changed_files;
                outcome.diffstat = pushed.diffstat;
                outcome.left_out = pushed.left_out;
                if let Some(diff) = pushed.diff {
                    self.store_artifact(&mut outcome, &run.id, Artifact::Diff, diff)
                        .await;
                }
                // A run stopped early (over its budget, its model silent) keeps its work on the
                // branch, without a pull request for what was not finished.
                if stop.is_none() {
                    let message = format!("opening a pull request from {}", pushed.branch);
                    self.report(&current, "opening_pr", &message, None).await?;
                    match finish::open_pull_request(
                        self.env,
                        checkout,
                        &pushed.branch,
                        &run.title,
                        &summary,
                        &run.id,
                        &page,
                    )
                    .await
                    {
                        Ok(url) => outcome.pull_request_url = Some(url),
                        Err(error) => {
                            let message =
                                format!("failed while opening the pull request: {}", error.message);
                            self.fail_with(
                                &current,
                                RunErrorCode::PrFailed,
                                message,
                                Some(outcome),
                            )
                            .await?;
                            return Ok(Next::Now);
                        }
                    }
                }
            }
        }
        let (status, error) = match stop {
            Some(message) => (
                RunStatus::Failed,
                Some(RunError {
                    code: current.stop_code.unwrap_or(RunErrorCode::BudgetExceeded),
                    message,
                }),
            ),
            None => (RunStatus::Completed, None),
        };
        self.transition(&current.run_id, status, error, Some(outcome))
            .await?;
        store::clear_current(&self.sql)?;
        Ok(Next::Now)
    }

    /// Reads what the agent's ended turn left — its summary, usage and conversation (stored)
    /// — and saves it (`Current::turn_read`) before the agent is released; `None` when the
    /// turn ended on a failed model call, and the run with it.
    async fn read_ended_turn(
        &self,
        current: &mut Current,
        run: &RunRecord,
        agent: &Agent,
    ) -> Result<Option<TurnRead>> {
        let session = current.agent_session.clone().unwrap_or_default();
        let messages =
            turn::messages_since(agent, &session, &current.marker, &turn::TURN_READS).await?;
        let turn = turn::read_turn(&messages, &current.marker);
        let transcript = agent.transcript(&session).await;
        // Stopped over budget — by the session, or by the proxy refusing the next model call.
        let stop = current.stop.clone().or_else(|| {
            turn.error
                .as_ref()
                .and_then(|_| run.over_budget(now_ms()).map(|e| e.message()))
        });
        // What the turn left is kept whatever happens next: a run that fails from here on
        // still shows its summary, usage and conversation (and the branch, once pushed).
        let outcome = self.turn_outcome(&run.id, &turn, transcript).await;
        if let (Some(error), None) = (&turn.error, &stop) {
            let message = format!("the agent's model call failed: {error}");
            self.fail_with(current, RunErrorCode::AgentFailed, message, Some(outcome))
                .await?;
            return Ok(None);
        }
        let read = TurnRead {
            outcome,
            stop,
            detail: turn.detail,
        };
        current.turn_read = Some(read.clone());
        self.save(current)?;
        // An agent whose turn ended by itself serves the session's next run.
        let keep = current.worker.is_none() && current.stop.is_none() && turn.error.is_none();
        self.release_agent(current, keep).await?;
        Ok(Some(read))
    }

    /// The origin links in pull requests should use (the public one, never the sandbox alias).
    fn worker_public_url(&self, run: &RunRecord) -> String {
        config::public_url(self.env)
            .or_else(|| run.origin.clone())
            .unwrap_or_default()
    }
}
