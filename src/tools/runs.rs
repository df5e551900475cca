//! The `opencode_*` tools: start a run, read it, list runs and sessions, cancel.

use super::params::{
    check_id, check_limit, CancelRunParams, GetResultParams, ListRunsParams, ListSessionsParams,
    RunTaskParams,
};
use super::run_controls::Controls;
use super::views::{CancelRunOutput, ListRunsOutput, ListSessionsOutput, RunTaskOutput, RunView};
use super::{Ctx, ToolHandler};
use crate::config;
use crate::error::{Error, ErrorKind, Result};
use crate::ids;
use crate::ledger::api::{self as ledger, CreateRun, GetRun};
use crate::links;
use crate::runs::{RunRecord, RunStatus};
use crate::time::now_ms;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rmcp::model::ToolAnnotations;

pub struct RunTask;
pub struct GetResult;
pub struct ListRuns;
pub struct CancelRun;
pub struct ListSessions;

const RUN_NOT_FOUND_HINT: &str = "check the runId, or call opencode_list_runs to see recent runs";

impl ToolHandler for RunTask {
    const NAME: &'static str = "opencode_run_task";
    const TITLE: &'static str = "Start a coding task";
    const TASKS: bool = true;
    type Params = RunTaskParams;
    type Output = RunTaskOutput;

    fn annotations() -> ToolAnnotations {
        // Starts work that pushes branches and opens pull requests on an external forge.
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true)
    }

    async fn run(ctx: &Ctx<'_>, mut params: RunTaskParams) -> Result<RunTaskOutput> {
        let controls = Controls::check(
            ctx.env,
            params.max_cost_usd,
            params.max_tokens,
            params.max_duration_seconds,
            params.callback_url.take(),
        )?;
        let mut spec = params.validate(&config::forge_git_url(ctx.env))?;
        controls.apply(&mut spec);
        spec.origin = Some(ctx.base_url.clone());
        // The run records the model it will use, so results never show `null` for the default.
        if spec.model.is_none() {
            spec.model = Some(config::default_model(ctx.env));
        }
        let created = ctx
            .ledger
            .call(CreateRun {
                principal: ctx.principal.id.clone(),
                spec,
                task_ttl_ms: ctx.task_ttl_ms,
            })
            .await
            .map_err(|e| {
                hint(
                    e,
                    ErrorKind::NotFound,
                    "omit sessionId to start a new session, or call opencode_list_sessions",
                )
            })?;
        let run = created.run;
        Ok(RunTaskOutput {
            web_ui_url: links::run_page_url(ctx.env, &ctx.base_url, &run.id, now_ms()),
            run_id: run.id,
            session_id: run.session_id,
            status: run.status,
            deduplicated: created.deduplicated,
        })
    }

    fn summary(out: &RunTaskOutput) -> String {
        let again = if out.deduplicated {
            " (an earlier call with this idempotencyKey started it)"
        } else {
            ""
        };
        format!(
            "Run {} is {}{again}. Poll opencode_get_result with this runId; runs take minutes to hours.",
            out.run_id,
            out.status.as_str()
        )
    }
}

impl ToolHandler for GetResult {
    const NAME: &'static str = "opencode_get_result";
    const TITLE: &'static str = "Get a run's status and result";
    type Params = GetResultParams;
    type Output = RunView;

    fn annotations() -> ToolAnnotations {
        read_only()
    }

    async fn run(ctx: &Ctx<'_>, params: GetResultParams) -> Result<RunView> {
        check_id("runId", ids::RUN, &params.run_id)?;
        let run = fetch_run(ctx, &params.run_id).await?;
        Ok(view(ctx, run))
    }

    fn summary(run: &RunView) -> String {
        let head = format!(
            "Run {} ({}) is {}",
            run.run_id,
            run.title,
            run.status.as_str()
        );
        match (&run.result, &run.progress) {
            (Some(result), _) => {
                let mut parts = vec![head];
                if let Some(summary) = &result.summary {
                    parts.push(format!("Summary: {summary}"));
                }
                if let Some(url) = &result.pull_request_url {
                    parts.push(format!("Pull request: {url}"));
                }
                if let Some(error) = &result.error {
                    parts.push(format!("Error {}: {}", error.code.as_str(), error.message));
                }
                sentences(&parts)
            }
            (None, Some(p)) => format!(
                "{head} ({}: {}). Poll again in 30-60 seconds.",
                p.phase, p.message
            ),
            (None, None) => format!("{head}. Poll again in 30-60 seconds."),
        }
    }
}

impl ToolHandler for ListRuns {
    const NAME: &'static str = "opencode_list_runs";
    const TITLE: &'static str = "List runs";
    type Params = ListRunsParams;
    type Output = ListRunsOutput;

    fn annotations() -> ToolAnnotations {
        read_only()
    }

    async fn run(ctx: &Ctx<'_>, params: ListRunsParams) -> Result<ListRunsOutput> {
        if let Some(session_id) = &params.session_id {
            check_id("sessionId", ids::SESSION, session_id)?;
        }
        let limit = check_limit(params.limit)?;
        let before = decode_cursor(RUNS_CURSOR, params.cursor.as_deref())?;
        let page = ctx
            .ledger
            .call(ledger::ListRuns {
                session_id: params.session_id,
                status: params.status,
                limit,
                before,
            })
            .await?;
        Ok(ListRunsOutput {
            runs: page.items.into_iter().map(Into::into).collect(),
            next_cursor: page.next.map(|seq| encode_cursor(RUNS_CURSOR, seq)),
        })
    }

    fn summary(out: &ListRunsOutput) -> String {
        let more = if out.next_cursor.is_some() {
            "; more with cursor=nextCursor"
        } else {
            ""
        };
        format!("{} run(s), newest first{more}.", out.runs.len())
    }
}

impl ToolHandler for CancelRun {
    const NAME: &'static str = "opencode_cancel_run";
    const TITLE: &'static str = "Cancel a run";
    type Params = CancelRunParams;
    type Output = CancelRunOutput;

    fn annotations() -> ToolAnnotations {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(true)
            .open_world(false)
    }

    async fn run(ctx: &Ctx<'_>, params: CancelRunParams) -> Result<CancelRunOutput> {
        check_id("runId", ids::RUN, &params.run_id)?;
        let cancelled = ctx
            .ledger
            .call(ledger::CancelRun {
                run_id: params.run_id.clone(),
                principal: ctx.principal.id.clone(),
            })
            .await
            .map_err(not_found_hint)?;
        let run = cancelled.run;
        let message = if cancelled.changed {
            format!("Run {} cancelled.", run.id)
        } else if run.status == RunStatus::Cancelled {
            format!("Run {} was already cancelled.", run.id)
        } else {
            format!(
                "Run {} had already ended ({}); nothing to cancel.",
                run.id,
                run.status.as_str()
            )
        };
        Ok(CancelRunOutput {
            run_id: run.id,
            status: run.status,
            cancelled: cancelled.changed,
            message,
        })
    }

    fn summary(out: &CancelRunOutput) -> String {
        out.message.clone()
    }
}

impl ToolHandler for ListSessions {
    const NAME: &'static str = "opencode_list_sessions";
    const TITLE: &'static str = "List work sessions";
    type Params = ListSessionsParams;
    type Output = ListSessionsOutput;

    fn annotations() -> ToolAnnotations {
        read_only()
    }

    async fn run(ctx: &Ctx<'_>, params: ListSessionsParams) -> Result<ListSessionsOutput> {
        let limit = check_limit(params.limit)?;
        let before = decode_cursor(SESSIONS_CURSOR, params.cursor.as_deref())?;
        let page = ctx
            .ledger
            .call(ledger::ListSessions { limit, before })
            .await?;
        Ok(ListSessionsOutput {
            sessions: page.items.into_iter().map(Into::into).collect(),
            next_cursor: page.next.map(|seq| encode_cursor(SESSIONS_CURSOR, seq)),
        })
    }

    fn summary(out: &ListSessionsOutput) -> String {
        let more = if out.next_cursor.is_some() {
            "; more with cursor=nextCursor"
        } else {
            ""
        };
        format!("{} session(s), newest first{more}.", out.sessions.len())
    }
}

/// One run from the ledger; an unknown one says how to find runs.
pub(super) async fn fetch_run(ctx: &Ctx<'_>, run_id: &str) -> Result<RunRecord> {
    ctx.ledger
        .call(GetRun {
            run_id: run_id.to_string(),
        })
        .await
        .map_err(not_found_hint)
}

/// A ledger error about a run, an unknown run saying how to find runs.
pub(super) fn not_found_hint(error: Error) -> Error {
    hint(error, ErrorKind::NotFound, RUN_NOT_FOUND_HINT)
}

/// A run as the tools show it, with a fresh link to its page.
pub(super) fn view(ctx: &Ctx<'_>, run: RunRecord) -> RunView {
    let url = links::run_page_url(ctx.env, &ctx.base_url, &run.id, now_ms());
    RunView::at(run, url, now_ms())
}

#[cfg_attr(target_arch = "wasm32", allow(dead_code))] // listed from catalog.json there
pub(super) fn read_only() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// Appends what to do next to errors of one kind.
fn hint(error: Error, kind: ErrorKind, next: &str) -> Error {
    if error.kind == kind {
        Error::new(kind, format!("{}; {next}", error.message))
    } else {
        error
    }
}

const RUNS_CURSOR: &str = "runs";
const SESSIONS_CURSOR: &str = "sessions";

/// Cursors are opaque to clients: base64url of `<list>:<sequence number>`.
pub(super) fn encode_cursor(list: &str, seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{list}:{seq}"))
}

pub(super) fn decode_cursor(list: &str, cursor: Option<&str>) -> Result<Option<i64>> {
    let Some(cursor) = cursor else {
        return Ok(None);
    };
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| {
            let (name, seq) = text.split_once(':')?;
            (name == list).then(|| seq.parse::<i64>().ok()).flatten()
        })
        .filter(|seq| *seq > 0)
        .map(Some)
        .ok_or_else(|| {
            Error::invalid(format!(
                "`cursor` is not a nextCursor returned by this list of {list}; omit it to start from the newest"
            ))
        })
}

/// Parts joined as sentences with ". ", without doubling the stop a part (the agent's summary,
/// an error message) already ends with.
fn sentences(parts: &[String]) -> String {
    let mut text = String::new();
    for part in parts {
        if !text.is_empty() {
            text.push_str(if text.ends_with(['.', '!', '?']) {
                " "
            } else {
                ". "
            });
        }
        text.push_str(part.trim_end());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_keep_one_stop_between_parts() {
        let parts = [
            "Run r is completed",
            "Summary: Fixed it.",
            "Pull request: u",
            "Error x: gone!  ",
        ];
        let parts: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            sentences(&parts),
            "Run r is completed. Summary: Fixed it. Pull request: u. Error x: gone!"
        );
        assert_eq!(sentences(&[]), "");
    }

    #[test]
    fn cursors_round_trip_and_reject_foreign_values() {
        let c = encode_cursor(RUNS_CURSOR, 42);
        assert_eq!(decode_cursor(RUNS_CURSOR, Some(&c)).unwrap(), Some(42));
        assert!(decode_cursor(SESSIONS_CURSOR, Some(&c)).is_err());
        assert!(decode_cursor(RUNS_CURSOR, Some("garbage!")).is_err());
        assert!(decode_cursor(RUNS_CURSOR, Some(&encode_cursor(RUNS_CURSOR, -1))).is_err());
        assert_eq!(decode_cursor(RUNS_CURSOR, None).unwrap(), None);
    }
}
