//! MCP tasks in both eras, backed by the run ledger: a task is a durable run (its id is the run
//! id) that a task-augmented `tools/call` of `opencode_run_task` created, kept for its TTL.
//!
//! - 2025-11-25 (`Era::Legacy`): the client asks with `params.task {ttl}`; `tasks/get`,
//!   `tasks/result` (blocks until the run ends), `tasks/list`, `tasks/cancel`; status
//!   notifications on the session's GET stream.
//! - 2026-07-28 (`Era::Modern`, the `io.modelcontextprotocol/tasks` extension): the server
//!   decides, for clients that declare the extension; `tasks/get` carries the result inline once
//!   done, `tasks/cancel` answers an empty ack, `tasks/update` has nothing to take (runs never
//!   ask for input); status notifications through `subscriptions/listen`.
//!
//! A task's result is what `opencode_get_result` answers for the run.

use super::failure::Failure;
use super::jsonrpc::{self, RpcError};
use super::task_view::{self, detailed, task, Era};
use crate::error::Error;
use crate::ledger::api::{
    AwaitRun, CancelRun, CreateExecTask, EndExecTask, ExecEnd, GetTask, ListTasks, TaskRecord,
    TaskWork,
};
use crate::runs::RunStatus;
use crate::tools::{self, Ctx};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{json, Map, Value};
use std::time::Duration;
use worker::Delay;

/// TTL when the client names none: a week (runs take hours; results are read later).
pub const DEFAULT_TTL_MS: i64 = 7 * 24 * 3600 * 1000;
/// Shortest TTL granted: an hour (a run outlives a shorter one before it starts).
pub const MIN_TTL_MS: i64 = 3600 * 1000;
/// Longest TTL granted: 30 days.
pub const MAX_TTL_MS: i64 = 30 * 24 * 3600 * 1000;
/// How often `tasks/result` reads a command task while it blocks.
const RESULT_POLL: Duration = Duration::from_secs(2);
/// The longest `tasks/result` waits inside the ledger for a run task's end before it reports
/// progress and reads the task again (an ended run answers at once).
const RESULT_WAIT_MS: u32 = 5_000;
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The tasks extension of 2026-07-28.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const TASKS_CURSOR: &str = "tasks";

/// The TTL a legacy `params.task` asks for: `Ok(None)` when the call is not task-augmented.
pub fn requested_ttl(params: Option<&Map<String, Value>>) -> Result<Option<i64>, String> {
    let Some(task) = params.and_then(|p| p.get("task")) else {
        return Ok(None);
    };
    let Some(task) = task.as_object() else {
        return Err("`task` must be an object such as {\"ttl\": 86400000}".into());
    };
    match task.get("ttl") {
        None | Some(Value::Null) => Ok(Some(DEFAULT_TTL_MS)),
        Some(ttl) => ttl
            .as_i64()
            .filter(|ttl| *ttl >= 0)
            .map(|ttl| Some(grant(ttl)))
            .ok_or_else(|| "`task.ttl` must be a whole number of milliseconds, 0 or more".into()),
    }
}

/// The TTL granted for a requested one.
pub fn grant(requested: i64) -> i64 {
    requested.clamp(MIN_TTL_MS, MAX_TTL_MS)
}

/// -32021 for a modern tasks method whose client did not declare the extension.
pub fn undeclared(id: &RequestId) -> RpcError {
    RpcError::with_data(
        Some(id.clone()),
        ErrorCode(-32021),
        format!("missing required client capability: declare the {EXTENSION} extension in clientCapabilities to use tasks"),
        Some(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})),
    )
}

/// Whether the server makes a modern `tools/call` a task (the client declared the extension):
/// every `opencode_run_task`, and a `sandbox_exec` that may outlast the usual 60 s client timeout.
pub fn modern_augments(params: Option<&Map<String, Value>>) -> bool {
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    match name {
        Some(name) if name == tools::EXEC_TASK_TOOL => params
            .and_then(|p| p.get("arguments"))
            .and_then(|a| a.get("timeoutMs"))
            .and_then(Value::as_u64)
            .is_some_and(|ms| ms > LONG_EXEC_MS),
        Some(name) => tools::supports_tasks(name),
        None => false,
    }
}

/// A `sandbox_exec` allowed longer than this becomes a task for modern clients with the
/// extension (clients commonly give up on a request after 60 s).
const LONG_EXEC_MS: u64 = 60_000;

/// Whether a modern request's client declared the tasks extension.
pub fn declared(params: Option<&Map<String, Value>>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some()
}

/// A task-augmented `tools/call` of `name`: `opencode_run_task` records its run as a task,
/// `sandbox_exec` starts its command in the background; either answers `CreateTaskResult`.
pub async fn create(
    ctx: &Ctx<'_>,
    era: Era,
    id: &RequestId,
    name: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<Value, Failure> {
    if !tools::supports_tasks(name) {
        return Err(Failure::Rpc(RpcError::new(
            Some(id.clone()),
            ErrorCode::METHOD_NOT_FOUND,
            format!("tool {name:?} does not take task-augmented calls; call it without `task`"),
        )));
    }
    let record = if name == tools::EXEC_TASK_TOOL {
        let exec = tools::start_exec(ctx, arguments)
            .await
            .map_err(|e| super::failure::of_call(id, e))?;
        let ttl_ms = ctx.task_ttl_ms.unwrap_or(DEFAULT_TTL_MS);
        ctx.ledger
            .call(CreateExecTask { exec, ttl_ms })
            .await
            .map_err(|e| failure(id, &e))?
    } else {
        let result = tools::call(ctx, name, arguments)
            .await
            .map_err(|e| super::failure::of_call(id, e))?;
        let run_id = result
            .structured_content
            .as_ref()
            .and_then(|s| s.get("runId"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(run_id) = run_id.filter(|_| result.is_error != Some(true)) else {
            let text = json!(result.content)[0]["text"]
                .as_str()
                .unwrap_or("the tool failed")
                .to_string();
            return Err(Failure::Rpc(RpcError::new(
                Some(id.clone()),
                ErrorCode::INTERNAL_ERROR,
                text,
            )));
        };
        get_record(ctx, id, &run_id).await?
    };
    let task = task(&record, era);
    let result = match era {
        Era::Legacy => json!({ "task": task }),
        Era::Modern => {
            let mut result = task;
            result.insert("resultType".into(), json!("task"));
            Value::Object(result)
        }
    };
    Ok(jsonrpc::result(id, result))
}

/// `tasks/get`.
pub async fn get(
    ctx: &Ctx<'_>,
    era: Era,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let record = get_record(ctx, id, &task_id(id, params)?).await?;
    let result = match era {
        Era::Legacy => task(&record, era),
        Era::Modern => detailed(ctx, record),
    };
    Ok(jsonrpc::result(id, Value::Object(result)))
}

/// `tasks/result` (2025-11-25): waits until the run ends, then answers its result. While it
/// waits, the status line (which progress notifications carry) says what the run is doing.
pub async fn result(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let task_id = task_id(id, params)?;
    loop {
        let record = get_record(ctx, id, &task_id).await?;
        let state = task_view::state(&record);
        if state.status.is_terminal() {
            let mut result = task_view::result(ctx, record).unwrap_or_else(|| {
                json!(tools::error_result(&format!(
                    "task {task_id} was {}",
                    state.message
                )))
            });
            result["_meta"] = json!({ RELATED_TASK: { "taskId": task_id } });
            return Ok(jsonrpc::result(id, result));
        }
        ctx.report(&state.message);
        match &record.work {
            TaskWork::Run(run) => {
                let wait = AwaitRun {
                    run_id: run.id.clone(),
                    after: run.updated_at,
                    wait_ms: RESULT_WAIT_MS,
                    until_terminal: true,
                };
                // What it finds is read again above, as a task.
                ctx.ledger.call(wait).await.map_err(|e| failure(id, &e))?;
            }
            TaskWork::Exec(_) => Delay::from(RESULT_POLL).await,
        }
    }
}

/// `tasks/list` (2025-11-25): live tasks, newest first, 50 a page.
pub async fn list(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let cursor = params.and_then(|p| p.get("cursor"));
    let before = match cursor {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_str().and_then(decode_cursor).ok_or_else(|| {
            invalid(
                id,
                "`cursor` is not one this server returned; omit it to start from the newest task",
            )
        })?),
    };
    let page = ctx
        .ledger
        .call(ListTasks { limit: 50, before })
        .await
        .map_err(|e| failure(id, &e))?;
    let tasks: Vec<Value> = page
        .items
        .iter()
        .map(|record| Value::Object(task(record, Era::Legacy)))
        .collect();
    let mut result = json!({ "tasks": tasks });
    if let Some(next) = page.next {
        result["nextCursor"] = json!(encode_cursor(next));
    }
    Ok(jsonrpc::result(id, result))
}

/// `tasks/cancel`: cancels the run. The old era answers the task, the new one an empty ack; a
/// task that already ended cannot be cancelled (-32602).
pub async fn cancel(
    ctx: &Ctx<'_>,
    era: Era,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let task_id = task_id(id, params)?;
    let before = get_record(ctx, id, &task_id).await?;
    let state = task_view::state(&before);
    if state.status.is_terminal() {
        return Err(invalid(
            id,
            &format!(
                "task {task_id} already ended ({}); it cannot be cancelled",
                state.status.as_str()
            ),
        ));
    }
    let principal = ctx.principal.id.clone();
    let after = match before.work {
        TaskWork::Run(_) => {
            let cancel = CancelRun {
                run_id: task_id.clone(),
                principal,
            };
            ctx.ledger.call(cancel).await.map_err(|e| failure(id, &e))?;
            get_record(ctx, id, &task_id).await?
        }
        TaskWork::Exec(exec) => {
            tools::kill_exec(ctx, &exec)
                .await
                .map_err(|e| failure(id, &e))?;
            let message = format!("cancelled by {principal}");
            let end = ExecEnd {
                status: RunStatus::Cancelled,
                result: json!(tools::error_result(&message)),
                message,
                at: crate::time::now_ms(),
            };
            let op = EndExecTask {
                task_id: task_id.clone(),
                end,
            };
            ctx.ledger.call(op).await.map_err(|e| failure(id, &e))?
        }
    };
    Ok(jsonrpc::result(
        id,
        match era {
            Era::Legacy => Value::Object(task(&after, era)),
            Era::Modern => json!({}),
        },
    ))
}

/// `tasks/update` (2026-07-28): runs never ask for input, so there is nothing to update.
pub async fn update(
    ctx: &Ctx<'_>,
    id: &RequestId,
    params: Option<&Map<String, Value>>,
) -> Result<Value, Failure> {
    let task_id = task_id(id, params)?;
    get_record(ctx, id, &task_id).await?;
    Err(invalid(
        id,
        &format!("task {task_id} is not waiting for input; runs never ask for any"),
    ))
}

fn task_id(id: &RequestId, params: Option<&Map<String, Value>>) -> Result<String, Failure> {
    let task_id = params
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(id, "`taskId` (a string) is required"))?;
    let known = [crate::ids::RUN, crate::ids::EXEC_TASK];
    if !known
        .iter()
        .any(|prefix| crate::ids::is_valid(prefix, task_id))
    {
        return Err(invalid(
            id,
            &format!("task {} not found", crate::error::excerpt(task_id)),
        ));
    }
    Ok(task_id.to_string())
}

/// A live task, brought up to date: a command task whose process ended gets its end recorded.
async fn get_record(ctx: &Ctx<'_>, id: &RequestId, task_id: &str) -> Result<TaskRecord, Failure> {
    let get = GetTask {
        task_id: task_id.to_string(),
    };
    let record = ctx.ledger.call(get).await.map_err(|e| failure(id, &e))?;
    let TaskWork::Exec(exec) = &record.work else {
        return Ok(record);
    };
    if exec.end.is_some() {
        return Ok(record);
    }
    match tools::exec_end(ctx, exec)
        .await
        .map_err(|e| failure(id, &e))?
    {
        None => Ok(record),
        Some(end) => {
            let op = EndExecTask {
                task_id: task_id.to_string(),
                end,
            };
            ctx.ledger.call(op).await.map_err(|e| failure(id, &e))
        }
    }
}

fn invalid(id: &RequestId, message: &str) -> Failure {
    Failure::Rpc(jsonrpc::invalid_params(id.clone(), message))
}

/// A ledger error as the request's failure: unknown tasks are invalid params (-32602).
fn failure(id: &RequestId, e: &Error) -> Failure {
    super::failure::failure_of(id, e, ErrorCode::INVALID_PARAMS)
}

fn encode_cursor(seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{TASKS_CURSOR}:{seq}"))
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix(TASKS_CURSOR)?
        .strip_prefix(':')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn ttls_are_granted_within_bounds() {
        assert_eq!(requested_ttl(Some(&params(json!({})))), Ok(None));
        assert_eq!(
            requested_ttl(Some(&params(json!({"task": {}})))),
            Ok(Some(DEFAULT_TTL_MS))
        );
        assert_eq!(
            requested_ttl(Some(&params(json!({"task": {"ttl": 1000}})))),
            Ok(Some(MIN_TTL_MS))
        );
        assert_eq!(
            requested_ttl(Some(&params(json!({"task": {"ttl": i64::MAX}})))),
            Ok(Some(MAX_TTL_MS))
        );
        assert_eq!(
            requested_ttl(Some(&params(json!({"task": {"ttl": 2 * MIN_TTL_MS}})))),
            Ok(Some(2 * MIN_TTL_MS))
        );
        for bad in [
            json!({"task": 5}),
            json!({"task": {"ttl": -1}}),
            json!({"task": {"ttl": "1h"}}),
        ] {
            assert!(requested_ttl(Some(&params(bad.clone()))).is_err(), "{bad}");
        }
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        assert_eq!(decode_cursor("bm9wZQ"), None);
        assert_eq!(decode_cursor("!!"), None);
    }
}
