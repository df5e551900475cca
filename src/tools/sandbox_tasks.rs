//! `sandbox_exec` as an MCP task: the command runs as a background process of the sandbox (so
//! it outlives the request and any restart of the Worker) whose time limit the daemon keeps;
//! the task reads the process's state and output, or kills it.

use super::access::{not_found_hint, sandbox};
use super::sandbox_params::{check_exec, ExecParams};
use super::sandbox_views::ExecOutput;
use super::{argument_error, parse_arguments, success, CallError, Ctx, ToolHandler};
use crate::error::{ErrorKind, Result};
use crate::ledger::api::{ExecEnd, ExecTask};
use crate::runs::RunStatus;
use crate::sandbox::api::{Kill, Logs, Process, Spawn};
use crate::time::now_ms;
use handoff_wire::StartProcess;
use serde_json::{json, Map, Value};

/// The tool whose calls may become command tasks.
pub const EXEC_TASK_TOOL: &str = <super::sandbox::Exec as ToolHandler>::NAME;

/// Checks `sandbox_exec`'s arguments and starts its command in the background.
pub async fn start_exec(
    ctx: &Ctx<'_>,
    arguments: Option<Map<String, Value>>,
) -> std::result::Result<ExecTask, CallError> {
    let mut p: ExecParams = parse_arguments(EXEC_TASK_TOOL, arguments)?;
    let started = async {
        let (env, timeout_ms) = check_exec(&mut p)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let request = StartProcess {
            command: p.command.clone(),
            argv: None,
            cwd: p.cwd,
            env,
            timeout_ms: Some(timeout_ms),
            key: None,
        };
        let info = client
            .call(Spawn { request })
            .await
            .map_err(not_found_hint)?;
        Ok(ExecTask {
            sandbox_id: p.sandbox_id.clone(),
            process_id: info.id,
            process_started_at: info.started_at,
            command: p.command.clone(),
            timeout_ms,
            end: None,
        })
    };
    let started: Result<ExecTask> = started.await;
    started.map_err(|e| argument_error(EXEC_TASK_TOOL, e))
}

/// How a command task's process ended, or `None` while it runs. A process the sandbox no
/// longer knows (the sandbox was paused, deleted or restarted) ended without a result.
pub async fn exec_end(ctx: &Ctx<'_>, exec: &ExecTask) -> Result<Option<ExecEnd>> {
    let client = sandbox(ctx, &exec.sandbox_id).await?;
    let id = exec.process_id;
    let info = match client.call(Process { id }).await {
        Ok(info) if info.started_at == exec.process_started_at => info,
        Ok(_) => return Ok(Some(lost(exec))),
        Err(e) if e.kind == ErrorKind::NotFound => return Ok(Some(lost(exec))),
        Err(e) => return Err(e),
    };
    if info.running {
        return Ok(None);
    }
    let logs = client.call(Logs { id }).await?;
    let ended_at = info.ended_at.unwrap_or_else(now_ms);
    let duration_ms = (ended_at - info.started_at).max(0) as u64;
    let output = ExecOutput {
        stdout: logs.stdout,
        stderr: logs.stderr,
        exit_code: info.exit_code,
        duration_ms,
        truncated: logs.truncated,
        timed_out: info.timed_out,
    };
    let summary = <super::sandbox::Exec as ToolHandler>::summary(&output);
    let result = success(summary.clone(), &output);
    Ok(Some(ExecEnd {
        status: RunStatus::Completed,
        message: summary,
        result: json!(result),
        at: ended_at,
    }))
}

fn lost(exec: &ExecTask) -> ExecEnd {
    let message = format!(
        "sandbox {} stopped (paused, deleted or restarted) before the command ended; its output is lost",
        exec.sandbox_id
    );
    ExecEnd {
        status: RunStatus::Failed,
        result: json!(super::error_result(&message)),
        message,
        at: now_ms(),
    }
}

/// Stops a command task's process (its process group).
pub async fn kill_exec(ctx: &Ctx<'_>, exec: &ExecTask) -> Result<()> {
    let client = sandbox(ctx, &exec.sandbox_id).await?;
    match client
        .call(Kill {
            id: exec.process_id,
        })
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
