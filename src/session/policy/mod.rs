//! The run engine's decisions, as pure functions of what it saw: whether a failed step is tried
//! again, which error code a failure gets, whether the agent's turn is over, and what the
//! progress line says. The driver only gathers the facts and carries the decisions out.

mod turn;
pub use turn::{judge, quiet, Look, Turn};

use super::opencode::Activity;
use super::store::Phase;
use crate::error::{Error, ErrorKind};
use crate::runs::{ProgressDetail, RunErrorCode};
use crate::time::backoff_ms;

/// Consecutive failures to reach the sandbox before the run is given up.
pub const MAX_FAILURES: u32 = 5;
/// The longest wait between two tries to reach a sandbox that does not answer.
pub const MAX_RETRY_DELAY_MS: i64 = 15_000;
/// How many times a run's agent is started again after it stopped mid-run (`resume.rs`).
pub const MAX_RESUMES: u32 = 3;

/// What a step that failed to reach the sandbox knows about the outage so far.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// Earlier consecutive failures.
    pub failures: u32,
    /// Milliseconds since the first of them.
    pub for_ms: i64,
    /// How long a sandbox that works on by itself is waited for (`RUN_DAEMON_OUTAGE_SECONDS`).
    pub tolerated_ms: i64,
}

/// Whether a step in `phase` that failed with `kind` is tried again. Only an unreachable
/// sandbox is: a few times while the run sets things up, and for the tolerated time while the
/// sandbox works on by itself — an agent working (resumed once the daemon is back), a worker's
/// script running or waiting — so a daemon restart or a network outage of minutes does not end
/// the run.
pub fn retries(kind: ErrorKind, outage: Outage, phase: Phase) -> bool {
    kind == ErrorKind::Unavailable
        && if detached(phase) {
            outage.for_ms < outage.tolerated_ms
        } else {
            outage.failures + 1 < MAX_FAILURES
        }
}

/// How an error of the artifacts bucket refusing a write begins.
pub const STORAGE_REFUSED: &str = "the artifacts storage (R2) refused";

/// The progress line of a run waiting out an outage (`error`, for up to `tolerated_s`).
pub fn waiting_message(error: &str, tolerated_s: i64) -> String {
    let within = human(tolerated_s);
    if error.starts_with(STORAGE_REFUSED) {
        format!("{error}; trying again for up to {within} in all")
    } else {
        format!("the sandbox is not answering ({error}); trying again for up to {within} in all")
    }
}

/// Whether the sandbox carries on by itself in `phase`, or holds the run's work until it is
/// pushed (`Finishing`), so an outage is waited out.
pub fn detached(phase: Phase) -> bool {
    matches!(
        phase,
        Phase::Executing
            | Phase::AwaitingApproval
            | Phase::Collecting
            | Phase::Working
            | Phase::Resuming
            | Phase::Finishing
    )
}

/// The wait before the next try after `failures` consecutive failures: the poll interval,
/// doubled with each failure, at most [`MAX_RETRY_DELAY_MS`].
pub fn retry_delay_ms(poll_ms: i64, failures: u32) -> i64 {
    backoff_ms(poll_ms, failures, MAX_RETRY_DELAY_MS)
}

/// How long a health check of a starting OpenCode waits for its answer after `unanswered`
/// checks that got none: 250 ms, doubled with each, at most 4 s. The first is short because
/// OpenCode accepts connections before it serves and never answers those (a 1 s wait cost
/// every cold start about a second); the doubling still sees an OpenCode too busy to answer
/// quickly.
pub fn health_try_ms(unanswered: u32) -> i64 {
    backoff_ms(250, unanswered, 4_000)
}

/// The code of a run whose step in `phase` failed with `kind` for good.
pub fn failure_code(kind: ErrorKind, phase: Phase) -> RunErrorCode {
    match (kind, phase) {
        (ErrorKind::Unavailable, Phase::Working | Phase::Executing | Phase::Finishing) => {
            RunErrorCode::SandboxLost
        }
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

/// The message of a run whose changes could not be committed or pushed while `phase`
/// ("committing", "pushing"…). A full disk — `disk_full` as measured in the sandbox, or the
/// error saying so — is said in so many words, with what to do: the changes are still in the
/// sandbox's workspace.
pub fn push_failure_message(phase: &str, error: &str, disk_full: bool) -> String {
    let lower = error.to_ascii_lowercase();
    let says_full = [
        "no space left on device",
        "out of diskspace",
        "disk quota exceeded",
        "enospc",
    ]
    .iter()
    .any(|sign| lower.contains(sign));
    if disk_full || says_full {
        format!(
            "the sandbox's disk is full, so the changes could not be saved while {phase} \
             ({error}); they are still in the session's sandbox: free space there (sandbox_exec, \
             e.g. remove build output) and run the task again in this session"
        )
    } else {
        format!("failed while {phase}: {error}")
    }
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

/// Why a coding run was stopped at or near its deadline (`RUN_MAX_DURATION_SECONDS`;
/// `late`: past it, the session's look came after it), and where its work is.
pub fn out_of_time_message(max_run_ms: i64, repository: bool, late: bool) -> String {
    let limit = human(max_run_ms / 1000);
    let work = if repository {
        "; its work so far is on its branch if it changed anything (no pull request). \
         Continue in the same session to go on"
    } else {
        ""
    };
    if late {
        return format!(
            "the run took longer than {limit} (RUN_MAX_DURATION_SECONDS) and was stopped{work}"
        );
    }
    let reserve = human(crate::config::runs::finish_reserve_ms(max_run_ms) / 1000);
    format!(
        "the run reached its time limit of {limit} (RUN_MAX_DURATION_SECONDS): the agent was \
         stopped {reserve} before it to keep its work{work}"
    )
}

/// Why a run was stopped at or near its deadline whose agent did not take the stop.
pub fn out_of_time_unanswered(max_run_ms: i64) -> String {
    format!(
        "the run reached its time limit of {} (RUN_MAX_DURATION_SECONDS) and was stopped (its \
         agent did not answer)",
        human(max_run_ms / 1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::Step;

    #[test]
    fn an_out_of_time_run_says_its_limit_and_where_its_work_is() {
        let message = out_of_time_message(4 * 3_600_000, true, false);
        assert!(message.contains("time limit of 4 h"), "{message}");
        assert!(message.contains("stopped 5 min before it"), "{message}");
        assert!(message.contains("on its branch"), "{message}");
        let message = out_of_time_message(20_000, false, false);
        assert!(message.contains("stopped 2 s before it"), "{message}");
        assert!(!message.contains("branch"), "{message}");
        let message = out_of_time_message(20_000, true, true);
        assert!(message.contains("took longer than 20 s"), "{message}");
        assert!(message.contains("on its branch"), "{message}");
        let message = out_of_time_unanswered(20_000);
        assert!(message.contains("time limit of 20 s"), "{message}");
        assert!(message.contains("did not answer"), "{message}");
    }

    #[test]
    fn a_wait_names_what_it_waits_for() {
        let storage = format!("{STORAGE_REFUSED} runs/r/logs.json: EPERM");
        assert_eq!(
            waiting_message(&storage, 300),
            format!("{storage}; trying again for up to 5 min in all")
        );
        let sandbox = waiting_message("connection refused", 300);
        assert!(sandbox.starts_with("the sandbox is not answering (connection refused)"));
    }

    #[test]
    fn a_starting_agents_health_check_gives_up_quickly_then_waits_longer() {
        // A check OpenCode accepted before it serves is never answered: the first try is short.
        assert_eq!(health_try_ms(0), 250);
        // An OpenCode too busy to answer quickly is still seen, the tries growing to 4 s.
        assert_eq!(health_try_ms(1), 500);
        assert_eq!(health_try_ms(4), 4_000);
        assert_eq!(health_try_ms(30), 4_000);
    }
    #[test]
    fn only_an_unreachable_sandbox_is_retried_and_only_for_a_while() {
        let outage = |failures: u32, for_ms: i64| Outage {
            failures,
            for_ms,
            tolerated_ms: 300_000,
        };
        let w = Phase::Cloning;
        assert!(retries(ErrorKind::Unavailable, outage(0, 0), w));
        assert!(retries(
            ErrorKind::Unavailable,
            outage(MAX_FAILURES - 2, 0),
            w
        ));
        assert!(!retries(
            ErrorKind::Unavailable,
            outage(MAX_FAILURES - 1, 0),
            w
        ));
        // A running worker script or a working agent outlives an outage of the daemon, the
        // network or the Worker for the tolerated time, however many tries it takes.
        for phase in [Phase::Executing, Phase::Working, Phase::Resuming] {
            assert!(retries(ErrorKind::Unavailable, outage(500, 299_999), phase));
            assert!(!retries(ErrorKind::Unavailable, outage(3, 300_000), phase));
        }
        for kind in [
            ErrorKind::Internal,
            ErrorKind::InvalidInput,
            ErrorKind::NotFound,
            ErrorKind::NotConfigured,
            ErrorKind::PortClosed,
        ] {
            assert!(!retries(kind, outage(0, 0), w), "{kind:?}");
        }
    }

    #[test]
    fn tries_back_off_from_the_poll_interval() {
        assert_eq!(retry_delay_ms(500, 0), 500);
        assert_eq!(retry_delay_ms(500, 1), 1_000);
        assert_eq!(retry_delay_ms(500, 3), 4_000);
        assert_eq!(retry_delay_ms(500, 40), MAX_RETRY_DELAY_MS);
        // A poll interval above the cap is kept.
        assert_eq!(retry_delay_ms(20_000, 2), 20_000);
    }

    #[test]
    fn a_full_disk_is_named_when_a_push_fails() {
        let full = push_failure_message(
            "committing",
            "git status failed: fatal: sha1 file '.git/index.lock' write error. Out of diskspace",
            false,
        );
        assert!(full.starts_with("the sandbox's disk is full"), "{full}");
        assert!(
            full.contains("index.lock") && full.contains("committing"),
            "{full}"
        );
        // git does not always say why: a directory it could not create on a full disk is
        // reported as missing. The free space measured in the sandbox tells.
        let misreported = "git checkout failed: fatal: cannot update the ref \
            'refs/heads/handoff/run_1': unable to create directory for \
            '.git/logs/refs/heads/handoff/run_1': No such file or directory";
        let told = push_failure_message("committing", misreported, true);
        assert!(told.starts_with("the sandbox's disk is full"), "{told}");
        assert!(told.contains("unable to create directory"), "{told}");
        let other = push_failure_message("pushing", "remote rejected", false);
        assert_eq!(other, "failed while pushing: remote rejected");
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
