//! Tool parameters: the types clients send, whose doc comments become the tool descriptions and
//! JSON Schemas, and the checks that turn them into validated requests. Every rejection names the
//! field and the rule.

use crate::error::{excerpt, Error, Result};
use crate::ids;
use crate::repository;
use crate::runs::{RunSpec, RunStatus};
use schemars::JsonSchema;
use serde::Deserialize;

pub const TASK_MAX_CHARS: usize = 50_000;
pub const TITLE_MAX_CHARS: usize = 100;
pub const MODEL_MAX_LEN: usize = 200;
pub const IDEMPOTENCY_KEY_MAX_LEN: usize = 200;
pub const LIST_DEFAULT_LIMIT: u32 = 10;
pub const LIST_MAX_LIMIT: u32 = 100;

/// Hand a coding task to an OpenCode agent working in a cloud sandbox. Returns at once with a
/// runId; the agent keeps working for minutes to hours (clone, edit, test, commit, push, pull
/// request). Poll opencode_get_result with the runId to follow it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunTaskParams {
    /// What the agent should do, in plain language: the goal, constraints, how to check the
    /// result. 1 to 50,000 characters.
    #[schemars(length(min = 1, max = 50000))]
    pub task: String,
    /// HTTPS URL of the git repository to work on, e.g. https://github.com/owner/repo. Only
    /// repositories on this deployment's forge (GitHub unless configured otherwise) are accepted.
    #[schemars(length(max = 500))]
    pub repository: Option<String>,
    /// Branch to start from (default: the repository's default branch). Letters, digits and
    /// `._/-` only.
    #[schemars(length(min = 1, max = 200))]
    pub branch: Option<String>,
    /// Continue an earlier work session (same sandbox, same agent conversation): a sessionId
    /// returned by an earlier run. Omit to start a new session.
    pub session_id: Option<String>,
    /// Model as `anthropic/<model>` or `openai/<model>` (any OpenAI-compatible API the
    /// deployment points at), e.g. `anthropic/claude-sonnet-4-5`. Omit for the default.
    #[schemars(length(min = 3, max = 200))]
    pub model: Option<String>,
    /// Short title shown in run lists (at most 100 characters). Defaults to the task's first line.
    #[schemars(length(min = 1, max = 100))]
    pub title: Option<String>,
    /// Any unique string (at most 200 characters). Repeating a call with the same key returns
    /// the run the first call started instead of starting another.
    #[schemars(length(min = 1, max = 200))]
    pub idempotency_key: Option<String>,
    /// Stop the run once its model use costs this many dollars (as OpenCode prices the
    /// model). The run then ends failed with error.code budget_exceeded, its work so far pushed
    /// to its branch. Default: the deployment's.
    pub max_cost_usd: Option<f64>,
    /// Stop the run once its model calls used this many tokens (everything the provider
    /// counts: input, cached input, output). Default: the deployment's.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Stop the run this many seconds after it started. Default: the deployment's.
    #[schemars(range(min = 1))]
    pub max_duration_seconds: Option<u64>,
    /// HTTPS URL to POST the run's result to when it ends, signed with the deployment's
    /// callback secret (header handoff-signature) and retried until it answers 2xx; the
    /// delivery's attempts show in the result. Private and loopback addresses are refused.
    #[schemars(length(min = 1, max = 2000))]
    pub callback_url: Option<String>,
}

/// Get a run's status, live progress and, once it has ended, its result: summary, pull request
/// URL, branch, commits and changed files, or the error that stopped it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GetResultParams {
    /// The runId returned by opencode_run_task.
    pub run_id: String,
}

/// Wait for a run to move on: returns as soon as its status or progress changes (or, with
/// untilDone, once it has ended), or after timeoutSeconds with changed false. Clients that ask
/// for progress get notifications while it waits. Use it instead of calling opencode_get_result
/// in a tight loop; call it again to keep following the run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WaitParams {
    /// The runId returned by opencode_run_task.
    pub run_id: String,
    /// How long to wait at most, in seconds: 1 to 50 (default 45), below the 60 s after which
    /// many clients give up on a tool call.
    #[schemars(range(min = 1, max = 50))]
    pub timeout_seconds: Option<u32>,
    /// Return only once the run has ended (default false: any change of status or progress).
    pub until_done: Option<bool>,
}

pub const WAIT_DEFAULT_SECS: u32 = 45;
pub const WAIT_MAX_SECS: u32 = 50;

impl WaitParams {
    /// The wait in seconds.
    pub fn timeout_secs(&self) -> Result<u32> {
        match self.timeout_seconds {
            None => Ok(WAIT_DEFAULT_SECS),
            Some(s) if (1..=WAIT_MAX_SECS).contains(&s) => Ok(s),
            Some(s) => Err(Error::invalid(format!(
                "`timeoutSeconds` must be between 1 and {WAIT_MAX_SECS} (got {s}); call again to keep waiting"
            ))),
        }
    }
}

/// List runs, newest first, optionally for one session or with one status. Pages with
/// nextCursor.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListRunsParams {
    /// Only runs of this work session.
    pub session_id: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Runs per page, 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit for the newest runs.
    pub cursor: Option<String>,
}

/// Cancel a run. A queued run never starts; a running agent is stopped. Runs that already ended
/// are left as they are.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CancelRunParams {
    /// The runId to cancel.
    pub run_id: String,
}

/// List work sessions, newest first. A session keeps one sandbox and one agent conversation;
/// pass its sessionId to opencode_run_task to continue it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListSessionsParams {
    /// Sessions per page, 1 to 100 (default 10).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// nextCursor from the previous page; omit for the newest sessions.
    pub cursor: Option<String>,
}

impl RunTaskParams {
    /// Checks every field; repositories must live on `forge` (scheme and host).
    pub fn validate(self, forge: &str) -> Result<RunSpec> {
        let task_chars = self.task.chars().count();
        if self.task.trim().is_empty() {
            return Err(Error::invalid("`task` must not be empty"));
        }
        if task_chars > TASK_MAX_CHARS {
            return Err(Error::invalid(format!(
                "`task` is {task_chars} characters; the limit is {TASK_MAX_CHARS}. Shorten it or \
                 point the agent at a file in the repository"
            )));
        }
        let title = match self.title {
            Some(title) => {
                check_text("title", &title, TITLE_MAX_CHARS)?;
                title.trim().to_string()
            }
            None => default_title(&self.task),
        };
        if let Some(repo) = &self.repository {
            repository::split(repo, forge)?;
        }
        if let Some(branch) = &self.branch {
            check_branch(branch)?;
        }
        if let Some(session_id) = &self.session_id {
            check_id("sessionId", ids::SESSION, session_id)?;
        }
        if let Some(model) = &self.model {
            check_model(model)?;
        }
        if let Some(key) = &self.idempotency_key {
            check_idempotency_key(key)?;
        }
        Ok(RunSpec {
            task: self.task,
            title,
            repository: self.repository.map(|r| repository::normalize(&r)),
            branch: self.branch,
            session_id: self.session_id,
            model: self.model,
            idempotency_key: self.idempotency_key,
            origin: None,
            worker: None,
            budget: None,
            callback_url: None,
        })
    }
}

/// The task's first non-empty line, cut to the title limit.
fn default_title(task: &str) -> String {
    crate::runs::title_from(task, TITLE_MAX_CHARS)
}

fn check_text(field: &str, value: &str, max_chars: usize) -> Result<()> {
    let n = value.chars().count();
    if value.trim().is_empty() {
        return Err(Error::invalid(format!("`{field}` must not be empty")));
    }
    if n > max_chars {
        return Err(Error::invalid(format!(
            "`{field}` is {n} characters; the limit is {max_chars}"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "`{field}` must not contain control characters or line breaks"
        )));
    }
    Ok(())
}

pub fn check_id(field: &str, prefix: &str, value: &str) -> Result<()> {
    if ids::is_valid(prefix, value) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`{field}` must be an id like {prefix}0123456789abcdefghjkmnpqrs as returned by handoff (got {:?})",
            excerpt(value)
        )))
    }
}

/// A git branch name that is also safe on any command line (`handoff_wire::is_safe_branch`).
pub fn check_branch(branch: &str) -> Result<()> {
    if handoff_wire::is_safe_branch(branch) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`branch` must be a git branch name: letters, digits and ._/- only, not starting \
             with - / or ., without .. or //, no part ending in .lock and not ending in / or . \
             (got {:?})",
            excerpt(branch)
        )))
    }
}

/// Providers runs can use: the ones the credential proxy serves.
pub const PROVIDERS: [&str; 2] = ["anthropic", "openai"];

fn check_model(model: &str) -> Result<()> {
    let valid = model.len() <= MODEL_MAX_LEN
        && model.split_once('/').is_some_and(|(provider, name)| {
            PROVIDERS.contains(&provider)
                && !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:@/".contains(&b))
        });
    if valid {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`model` must be anthropic/<model> or openai/<model>, e.g. anthropic/claude-sonnet-4-5 (got {:?})",
            excerpt(model)
        )))
    }
}

pub fn check_idempotency_key(key: &str) -> Result<()> {
    if !key.is_empty()
        && key.len() <= IDEMPOTENCY_KEY_MAX_LEN
        && key.bytes().all(|b| b.is_ascii_graphic())
    {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`idempotencyKey` must be 1 to {IDEMPOTENCY_KEY_MAX_LEN} visible ASCII characters without spaces"
        )))
    }
}

/// Checks a page size, defaulting when absent.
pub fn check_limit(limit: Option<u32>) -> Result<u32> {
    match limit {
        None => Ok(LIST_DEFAULT_LIMIT),
        Some(n) if (1..=LIST_MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(Error::invalid(format!(
            "`limit` must be between 1 and {LIST_MAX_LIMIT} (got {n})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(task: &str) -> RunTaskParams {
        RunTaskParams {
            task: task.into(),
            repository: None,
            branch: None,
            session_id: None,
            model: None,
            title: None,
            idempotency_key: None,
            max_cost_usd: None,
            max_tokens: None,
            max_duration_seconds: None,
            callback_url: None,
        }
    }

    #[test]
    fn task_length_is_counted_in_characters() {
        assert!(params(&"é".repeat(50_000))
            .validate("https://github.com")
            .is_ok());
        let err = params(&"a".repeat(50_001))
            .validate("https://github.com")
            .unwrap_err();
        assert!(err.message.contains("50001"), "{}", err.message);
        assert!(params("   ").validate("https://github.com").is_err());
    }

    #[test]
    fn default_title_is_first_line_cut_to_limit() {
        let spec = params("\n  Fix the flaky test\nmore")
            .validate("https://github.com")
            .unwrap();
        assert_eq!(spec.title, "Fix the flaky test");
        let long = params(&"x".repeat(300))
            .validate("https://github.com")
            .unwrap();
        assert_eq!(long.title.chars().count(), 100);
    }

    #[test]
    fn branch_errors_name_the_field() {
        let err = check_branch("--upload-pack=x").unwrap_err();
        assert!(err.message.contains("`branch`"), "{}", err.message);
        assert!(check_branch("main").is_ok());
    }

    #[test]
    fn models_and_keys_and_limits() {
        assert!(check_model("anthropic/claude-sonnet-4-5").is_ok());
        assert!(check_model("openai/gpt-4.1").is_ok());
        assert!(check_model("claude").is_err());
        assert!(check_model("Anthropic/x").is_err());
        assert!(check_model("mistral/large").is_err());
        assert!(check_idempotency_key("abc-123").is_ok());
        assert!(check_idempotency_key("a b").is_err());
        assert_eq!(check_limit(None).unwrap(), 10);
        assert!(check_limit(Some(0)).is_err());
        assert!(check_limit(Some(101)).is_err());
    }
}
