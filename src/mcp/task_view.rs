//! How a task looks on the wire in each era: its status (a failed run or command is a completed
//! request with an `isError` result in 2026-07-28, a failed task in 2025-11-25), status line,
//! times, TTL and poll interval, and its result once it ended.

use crate::ledger::api::{TaskRecord, TaskWork};
use crate::runs::{RunRecord, RunStatus};
use crate::time::rfc3339;
use crate::tools::{self, Ctx};
use serde_json::{json, Map, Value};

/// How often clients should poll a task: runs move on in seconds, end in minutes.
pub const POLL_INTERVAL_MS: i64 = 5_000;
/// Commands end sooner.
pub const EXEC_POLL_INTERVAL_MS: i64 = 2_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Era {
    Legacy,
    Modern,
}

/// A task's state in run terms.
pub struct State {
    pub status: RunStatus,
    pub message: String,
    pub updated_at: i64,
}

pub fn state(record: &TaskRecord) -> State {
    match &record.work {
        TaskWork::Run(run) => State {
            status: run.status,
            message: run_message(run),
            updated_at: run.updated_at,
        },
        TaskWork::Exec(exec) => match &exec.end {
            Some(end) => State {
                status: end.status,
                message: end.message.clone(),
                updated_at: end.at,
            },
            None => State {
                status: RunStatus::Running,
                message: format!(
                    "running in {}: {}",
                    exec.sandbox_id,
                    crate::error::excerpt(&exec.command)
                ),
                updated_at: record.created_at,
            },
        },
    }
}

fn status_name(status: RunStatus, era: Era) -> &'static str {
    match status {
        RunStatus::Queued
        | RunStatus::Starting
        | RunStatus::Running
        | RunStatus::PendingApproval => "working",
        RunStatus::Completed => "completed",
        RunStatus::Failed if era == Era::Modern => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// One line on what the run is doing or how it ended.
fn run_message(run: &RunRecord) -> String {
    match (&run.error, &run.progress) {
        (Some(error), _) => format!("{}: {}", run.status.as_str(), error.message),
        (None, Some(p)) if !run.status.is_terminal() => {
            format!("{}: {}: {}", run.status.as_str(), p.phase, p.message)
        }
        _ => run.status.as_str().to_string(),
    }
}

/// The task object (2025-11-25 `Task`, 2026-07-28 `Task` with `…Ms` names).
pub fn task(record: &TaskRecord, era: Era) -> Map<String, Value> {
    let state = state(record);
    let (ttl, poll) = match era {
        Era::Legacy => ("ttl", "pollInterval"),
        Era::Modern => ("ttlMs", "pollIntervalMs"),
    };
    let mut task = Map::new();
    task.insert("taskId".into(), json!(record.id));
    task.insert("status".into(), json!(status_name(state.status, era)));
    task.insert("statusMessage".into(), json!(state.message));
    task.insert("createdAt".into(), json!(rfc3339(record.created_at)));
    task.insert("lastUpdatedAt".into(), json!(rfc3339(state.updated_at)));
    task.insert(ttl.into(), json!(record.ttl_ms));
    if !state.status.is_terminal() {
        let every = match record.work {
            TaskWork::Run(_) => POLL_INTERVAL_MS,
            TaskWork::Exec(_) => EXEC_POLL_INTERVAL_MS,
        };
        task.insert(poll.into(), json!(every));
    }
    task
}

/// The task's result once it ended (cancelled tasks have none): for a run what
/// `opencode_get_result` answers, for a command what `sandbox_exec` answers.
pub fn result(ctx: &Ctx<'_>, record: TaskRecord) -> Option<Value> {
    let status = state(&record).status;
    if !status.is_terminal() {
        return None;
    }
    match record.work {
        TaskWork::Run(run) => Some(json!(tools::run_result(ctx, *run))),
        TaskWork::Exec(exec) => exec.end.map(|end| end.result),
    }
}

/// A task as `tasks/get` shows it in the modern era: with the result inline once done.
pub fn detailed(ctx: &Ctx<'_>, record: TaskRecord) -> Map<String, Value> {
    let mut task = task(&record, Era::Modern);
    let cancelled = state(&record).status == RunStatus::Cancelled;
    if !cancelled {
        if let Some(result) = result(ctx, record) {
            task.insert("result".into(), result);
        }
    }
    task
}
