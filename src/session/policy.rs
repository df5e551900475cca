//! The run engine's decisions, as pure functions of what it saw: whether a failed step is tried
//! again, which error code a failure gets, whether the agent's turn is over, and what the
//! progress line says. The driver only gathers the facts and carries the decisions out.

use super::opencode::Activity;
use super::store::Phase;
use crate::error::{Error, ErrorKind};
use crate::runs::{ProgressDetail, RunErrorCode};

/// Consecutive failures to reach the sandbox before the run is given up.
pub const MAX_FAILURES: u32 = 5;
/// The same while a worker's script runs or waits (its process lives on in the daemon) and
/// while the agent works (a daemon restart takes it along, but the run resumes once the daemon
/// is back): a daemon or Worker that is briefly away is waited for longer.
pub const MAX_FAILURES_DETACHED: u32 = 30;
/// How many times a run's agent is started again after it stopped mid-run (`resume.rs`).
pub const MAX_RESUMES: u32 = 3;
/// How long the agent may stay idle without answering the prompt.
pub const FIRST_ANSWER_MS: i64 = 120_000;
/// How long the agent may stay idle with an answer that never completed before the turn is
/// taken as over.
pub const UNSETTLED_GRACE_MS: i64 = 30_000;

/// Whether a step in `phase` that failed with `kind`, after `failures` earlier consecutive
/// failures, is tried again (only an unreachable sandbox is, and only so many times).
pub fn retries(kind: ErrorKind, failures: u32, phase: Phase) -> bool {
    kind == ErrorKind::Unavailable && failures + 1 < max_failures(phase)
}

/// How many consecutive failures to reach the sandbox a step in `phase` may have.
pub fn max_failures(phase: Phase) -> u32 {
    match phase {
        Phase::Executing
        | Phase::AwaitingApproval
        | Phase::Collecting
        | Phase::Working
        | Phase::Resuming => MAX_FAILURES_DETACHED,
        _ => MAX_FAILURES,
    }
}

/// The code of a run whose step in `phase` failed with `kind` for good.
pub fn failure_code(kind: ErrorKind, phase: Phase) -> RunErrorCode {
    match (kind, phase) {
        (ErrorKind::Unavailable, Phase::Working | Phase::Executing) => RunErrorCode::SandboxLost,
        (ErrorKind::Unavailable | ErrorKind::NotConfigured, _) => RunErrorCode::SandboxUnavailable,
        (_, Phase::Cloning) => RunErrorCode::CloneFailed,
        (_, Phase::StartingAgent | Phase::Prompting | Phase::Resuming) => RunErrorCode::AgentFailed,
        (ErrorKind::InvalidInput, Phase::Collecting) => RunErrorCode::OutputInvalid,
        _ => RunErrorCode::RunFailed,
    }
}

/// The message of a run whose step in `phase` failed for good.
pub fn failure_message(phase: Phase, error: &str) -> String {
    format!("failed while {}: {error}", phase_words(phase))
}

/// An unreachable agent inside a reachable sandbox means OpenCode stopped.
pub fn agent_gone(e: Error) -> Error {
    if e.kind == ErrorKind::PortClosed {
        Error::internal("the agent (OpenCode) stopped unexpectedly".to_string())
    } else {
        e
    }
}

/// Why a run whose agent stopped is not resumed: a worker's agent, or one resumed too often.
pub fn stopped_for_good(resumes: u32) -> String {
    if resumes == 0 {
        "the agent (OpenCode) stopped unexpectedly".to_string()
    } else {
        format!(
            "the agent (OpenCode) stopped unexpectedly again after it was started again \
             {resumes} times; the work so far is in the sandbox's workspace, unpushed"
        )
    }
}

/// What one look at the working agent saw.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// OpenCode reports the session idle.
    pub idle: bool,
    /// The agent started an answer to this run's prompt.
    pub answered: bool,
    /// That answer completed.
    pub settled: bool,
    /// The model call behind the answer failed.
    pub errored: bool,
    pub now: i64,
    /// Milliseconds since the task was handed over.
    pub waited_ms: i64,
    /// Since when the agent has been idle with an unfinished answer (from the previous look).
    pub idle_unsettled_since: Option<i64>,
}

/// What the driver does after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Keep following the agent.
    Working,
    /// The turn is over: finish the run.
    Over,
    /// The agent went idle without ever answering.
    NeverAnswered,
}

/// Judges a look: the verdict, and the `idle_unsettled_since` to remember for the next one.
/// An answer that stays unfinished while the agent is idle (it died mid-step) ends the turn
/// after a grace period rather than at the stall watchdog.
pub fn judge(look: &Look) -> (Turn, Option<i64>) {
    let unsettled_since = (look.idle && look.answered && !look.settled)
        .then(|| look.idle_unsettled_since.unwrap_or(look.now));
    let unsettled_for = unsettled_since.map_or(0, |since| look.now - since);
    let turn = if look.idle && (look.settled || look.errored || unsettled_for > UNSETTLED_GRACE_MS)
    {
        Turn::Over
    } else if look.idle && !look.answered && look.waited_ms > FIRST_ANSWER_MS {
        Turn::NeverAnswered
    } else {
        Turn::Working
    };
    (turn, unsettled_since)
}

/// The progress line while the agent works: a retried model call, the latest step, or
/// "thinking".
pub fn working_message(activity: &Activity, detail: &ProgressDetail) -> String {
    match activity {
        Activity::Retry { attempt, message } => {
            format!("the model call failed, retrying (attempt {attempt}): {message}")
        }
        _ => match detail.recent.last() {
            Some(step) => format!("step {}: {} {}", detail.steps, step.tool, step.title),
            None => "thinking".to_string(),
        },
    }
}

pub fn phase_words(phase: Phase) -> &'static str {
    match phase {
        Phase::Preparing => "preparing the sandbox",
        Phase::Cloning => "cloning the repository",
        Phase::StartingAgent => "starting the agent",
        Phase::Prompting => "handing the task to the agent",
        Phase::Working => "the agent was working",
        Phase::Resuming => "starting the stopped agent again",
        Phase::Finishing => "finishing",
        Phase::Staging => "writing the worker's files and inputs into the sandbox",
        Phase::Executing => "the worker was running",
        Phase::AwaitingApproval => "waiting for approval",
        Phase::Collecting => "collecting the worker's logs, result and outputs",
    }
}

/// A duration in the largest whole unit: `2 h`, `5 min`, `30 s`.
pub fn human(secs: i64) -> String {
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
    use crate::runs::Step;

    fn look() -> Look {
        Look {
            idle: true,
            answered: true,
            settled: true,
            errored: false,
            now: 1_000_000,
            waited_ms: 5_000,
            idle_unsettled_since: None,
        }
    }

    #[test]
    fn only_an_unreachable_sandbox_is_retried_and_only_a_few_times() {
        let w = Phase::Cloning;
        assert!(retries(ErrorKind::Unavailable, 0, w));
        assert!(retries(ErrorKind::Unavailable, MAX_FAILURES - 2, w));
        assert!(!retries(ErrorKind::Unavailable, MAX_FAILURES - 1, w));
        // A running worker script or a working agent outlives a short outage of the daemon or
        // the Worker (the agent is resumed once the daemon is back).
        for phase in [Phase::Executing, Phase::Working, Phase::Resuming] {
            assert!(retries(ErrorKind::Unavailable, MAX_FAILURES, phase));
            assert!(!retries(
                ErrorKind::Unavailable,
                MAX_FAILURES_DETACHED - 1,
                phase
            ));
        }
        for kind in [
            ErrorKind::Internal,
            ErrorKind::InvalidInput,
            ErrorKind::NotFound,
            ErrorKind::NotConfigured,
            ErrorKind::PortClosed,
        ] {
            assert!(!retries(kind, 0, w), "{kind:?}");
        }
    }

    #[test]
    fn failures_get_the_code_of_what_broke() {
        use RunErrorCode::*;
        let cases = [
            (ErrorKind::Unavailable, Phase::Working, SandboxLost),
            (ErrorKind::Unavailable, Phase::Preparing, SandboxUnavailable),
            (ErrorKind::NotConfigured, Phase::Cloning, SandboxUnavailable),
            (ErrorKind::Internal, Phase::Cloning, CloneFailed),
            (ErrorKind::InvalidInput, Phase::Cloning, CloneFailed),
            (ErrorKind::Internal, Phase::StartingAgent, AgentFailed),
            (ErrorKind::Internal, Phase::Prompting, AgentFailed),
            (ErrorKind::Internal, Phase::Working, RunFailed),
            (ErrorKind::Internal, Phase::Finishing, RunFailed),
            (ErrorKind::Internal, Phase::Preparing, RunFailed),
        ];
        for (kind, phase, code) in cases {
            assert_eq!(failure_code(kind, phase), code, "{kind:?} in {phase:?}");
        }
        assert_eq!(
            failure_message(Phase::Cloning, "no such repository"),
            "failed while cloning the repository: no such repository"
        );
    }

    #[test]
    fn run_error_codes_are_their_serde_names() {
        use strum::VariantArray;
        for code in RunErrorCode::VARIANTS {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
            assert_eq!(code.as_str().parse::<RunErrorCode>().unwrap(), *code);
        }
        assert_eq!(RunErrorCode::PrFailed.as_str(), "pr_failed");
    }

    #[test]
    fn a_settled_or_failed_answer_ends_the_turn_once_the_agent_is_idle() {
        assert_eq!(judge(&look()).0, Turn::Over);
        let errored = Look {
            settled: false,
            answered: false,
            errored: true,
            ..look()
        };
        assert_eq!(judge(&errored).0, Turn::Over);
        let busy = Look {
            idle: false,
            ..look()
        };
        assert_eq!(judge(&busy), (Turn::Working, None));
    }

    #[test]
    fn an_unfinished_answer_of_an_idle_agent_ends_the_turn_after_the_grace_period() {
        let first = Look {
            settled: false,
            ..look()
        };
        // The first idle look starts the clock.
        assert_eq!(judge(&first), (Turn::Working, Some(first.now)));
        let within = Look {
            idle_unsettled_since: Some(first.now - UNSETTLED_GRACE_MS),
            ..first
        };
        assert_eq!(judge(&within).0, Turn::Working);
        let after = Look {
            idle_unsettled_since: Some(first.now - UNSETTLED_GRACE_MS - 1),
            ..first
        };
        assert_eq!(judge(&after).0, Turn::Over);
        // Busy again: the clock is forgotten.
        let busy = Look {
            idle: false,
            ..within
        };
        assert_eq!(judge(&busy), (Turn::Working, None));
    }

    #[test]
    fn an_agent_idle_without_answering_is_given_up_after_the_first_answer_window() {
        let silent = Look {
            answered: false,
            settled: false,
            waited_ms: FIRST_ANSWER_MS,
            ..look()
        };
        assert_eq!(judge(&silent).0, Turn::Working);
        let too_long = Look {
            waited_ms: FIRST_ANSWER_MS + 1,
            ..silent
        };
        assert_eq!(judge(&too_long).0, Turn::NeverAnswered);
    }

    #[test]
    fn the_working_message_names_the_latest_step_or_the_retry() {
        let mut detail = ProgressDetail::default();
        assert_eq!(working_message(&Activity::Busy, &detail), "thinking");
        detail.steps = 3;
        detail.recent.push(Step {
            tool: "bash".into(),
            title: "pytest".into(),
            status: "completed".into(),
            duration_ms: None,
        });
        assert_eq!(
            working_message(&Activity::Busy, &detail),
            "step 3: bash pytest"
        );
        let retry = Activity::Retry {
            attempt: 2,
            message: "overloaded".into(),
        };
        assert_eq!(
            working_message(&retry, &detail),
            "the model call failed, retrying (attempt 2): overloaded"
        );
    }

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
    fn durations_read_in_their_largest_unit() {
        assert_eq!(human(30), "30 s");
        assert_eq!(human(300), "5 min");
        assert_eq!(human(7200), "2 h");
    }
}
