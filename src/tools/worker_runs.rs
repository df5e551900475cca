//! The `workers_*` tools that run workers: run (by hand, as an MCP task if asked), list runs,
//! one run in full (logs, outputs with download links, tool calls, approval), cancel, replay,
//! and the approval gate (pending approvals, approve, reject).

use super::access::annotations;
use super::access::registry;
use super::params::{check_id, check_idempotency_key, check_limit};
use super::run_controls::Controls;
use super::runs::{decode_cursor, encode_cursor};
use super::worker_params::*;
use super::worker_views::*;
use super::workers::check_worker;
use super::{Ctx, ToolHandler};
use crate::artifacts;
use crate::error::{Error, Result};
use crate::ids;
use crate::ledger::api::{CancelRun, CreateRun, Decide, GetRun, ListWorkerRuns};
use crate::links;
use crate::registry::api::PrepareRun;
use crate::runs::{RunRecord, RunStatus};
use crate::time::now_ms;
use crate::workers::{Decision, InputFile, Trigger};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rmcp::model::ToolAnnotations;

pub struct Run;
pub struct Runs;
pub struct RunGet;
pub struct RunCancel;
pub struct Replay;
pub struct Approvals;
pub struct Approve;
pub struct Reject;

const RUNS_CURSOR: &str = "worker-runs";
const APPROVALS_CURSOR: &str = "approvals";
const NOT_A_WORKER_RUN: &str =
    "is not a worker run (opencode_get_result shows coding runs); workers_runs lists worker runs";

/// A worker run from the ledger, or an error saying what to do.
async fn worker_run(ctx: &Ctx<'_>, run_id: &str) -> Result<RunRecord> {
    check_id("runId", ids::RUN, run_id)?;
    let run = ctx
        .ledger
        .call(GetRun {
            run_id: run_id.to_string(),
        })
        .await?;
    if run.worker.is_none() {
        return Err(Error::invalid(format!("{run_id} {NOT_A_WORKER_RUN}")));
    }
    Ok(run)
}

/// A run's view with its page link, download links and (when asked) its stored logs.
pub async fn view(ctx: &Ctx<'_>, run: RunRecord, with_logs: bool) -> Result<WorkerRunView> {
    let now = now_ms();
    let id = run.id.clone();
    let logs_stored = run
        .worker
        .as_ref()
        .and_then(|w| w.outcome.as_ref())
        .is_some_and(|o| o.logs_stored);
    let mut view = run_view(run, now_ms())
        .ok_or_else(|| Error::invalid(format!("{id} {NOT_A_WORKER_RUN}")))?;
    view.web_ui_url = links::run_page_url(ctx.env, &ctx.base_url, &id, now);
    for output in &mut view.outputs {
        output.download_url = links::output_url(ctx.env, &ctx.base_url, &id, &output.path, now);
    }
    if with_logs && logs_stored {
        let bucket = ctx.env.bucket(artifacts::BUCKET)?;
        if let Some(object) = bucket.get(artifacts::logs_key(&id)).execute().await? {
            if let Some(body) = object.body() {
                let text = body.text().await?;
                let logs: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                view.logs = Some(LogsView {
                    stdout: logs["stdout"].as_str().unwrap_or_default().to_string(),
                    stderr: logs["stderr"].as_str().unwrap_or_default().to_string(),
                    truncated: logs["truncated"].as_bool().unwrap_or(false),
                });
            }
        }
    }
    Ok(view)
}

/// Starts a prepared worker run in the ledger (a task when the call is task-augmented).
async fn start(
    ctx: &Ctx<'_>,
    op: PrepareRun,
    idempotency_key: Option<String>,
    controls: Controls,
) -> Result<StartedOutput> {
    let prepared = registry(ctx).await?.call(op).await?;
    let mut spec = crate::runs::RunSpec::for_worker(
        prepared.spec,
        &prepared.manifest.title,
        prepared.manifest.model.clone().or_else(|| {
            (prepared.manifest.runtime == crate::workers::Runtime::Skill)
                .then(|| crate::config::default_model(ctx.env))
        }),
        idempotency_key,
        Some(ctx.base_url.clone()),
    );
    controls.apply(&mut spec);
    let created = ctx
        .ledger
        .call(CreateRun {
            principal: ctx.principal.id.clone(),
            spec,
            task_ttl_ms: ctx.task_ttl_ms,
        })
        .await?;
    let run = created.run;
    let worker = run.worker.as_ref().map(|w| w.spec.clone());
    Ok(StartedOutput {
        web_ui_url: links::run_page_url(ctx.env, &ctx.base_url, &run.id, now_ms()),
        run_id: run.id,
        worker: worker
            .as_ref()
            .map(|w| w.worker.clone())
            .unwrap_or_default(),
        version: worker.map_or(0, |w| w.version),
        status: run.status,
        deduplicated: created.deduplicated,
    })
}

impl ToolHandler for Run {
    const NAME: &'static str = "workers_run";
    const TITLE: &'static str = "Run a worker";
    const TASKS: bool = true;
    type Params = WorkersRunParams;
    type Output = StartedOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersRunParams) -> Result<StartedOutput> {
        check_worker(&p.worker)?;
        if let Some(key) = &p.idempotency_key {
            check_idempotency_key(key)?;
        }
        let controls = Controls::check(
            ctx.env,
            p.max_cost_usd,
            p.max_tokens,
            p.max_duration_seconds,
            p.callback_url,
        )?;
        let mut files = Vec::new();
        for (name, file) in p.files.unwrap_or_default() {
            files.push(upload(ctx, name, file).await?);
        }
        let op = PrepareRun {
            name: p.worker,
            version: p.version,
            trigger: Trigger::Manual,
            inputs: p.inputs.unwrap_or_default(),
            files,
            replay_of: None,
            hook_id: None,
            webhook_key: None,
        };
        start(ctx, op, p.idempotency_key, controls).await
    }

    fn summary(out: &StartedOutput) -> String {
        format!(
            "Run {} of {} v{} is {}. Follow it with workers_run_get.",
            out.run_id,
            out.worker,
            out.version,
            out.status.as_str()
        )
    }
}

/// Stores a file given for an input (by content, so a retry or a replay stores nothing twice).
async fn upload(ctx: &Ctx<'_>, name: String, file: FileParam) -> Result<InputFile> {
    let bytes = B64
        .decode(file.content_base64.trim())
        .map_err(|_| Error::invalid(format!("`files.{name}.contentBase64` is not valid base64")))?;
    if bytes.len() as u64 > crate::workers::inputs::FILE_MAX_BYTES {
        return Err(Error::invalid(format!(
            "`files.{name}` is {} bytes; files are limited to 8 MiB",
            bytes.len()
        )));
    }
    let media_type = file
        .media_type
        .unwrap_or_else(|| crate::workers::files::media_type_of(&file.filename).to_string());
    let sha256 = crate::mac::sha256_hex(&bytes);
    let size = bytes.len() as u64;
    let bucket = ctx.env.bucket(artifacts::BUCKET)?;
    bucket
        .put(
            artifacts::input_file_key(&sha256),
            worker::Data::Bytes(bytes),
        )
        .execute()
        .await?;
    Ok(InputFile {
        name,
        filename: file.filename,
        media_type,
        size,
        sha256,
    })
}

impl ToolHandler for Runs {
    const NAME: &'static str = "workers_runs";
    const TITLE: &'static str = "List worker runs";
    type Params = WorkersRunsParams;
    type Output = WorkerRunsOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersRunsParams) -> Result<WorkerRunsOutput> {
        if let Some(w) = &p.worker {
            check_worker(w)?;
        }
        list(ctx, p.worker, p.status, p.limit, p.cursor, RUNS_CURSOR).await
    }

    fn summary(out: &WorkerRunsOutput) -> String {
        format!("{} worker run(s), newest first.", out.runs.len())
    }
}

async fn list(
    ctx: &Ctx<'_>,
    worker: Option<String>,
    status: Option<RunStatus>,
    limit: Option<u32>,
    cursor: Option<String>,
    kind: &str,
) -> Result<WorkerRunsOutput> {
    let limit = check_limit(limit)?;
    let before = decode_cursor(kind, cursor.as_deref())?;
    let page = ctx
        .ledger
        .call(ListWorkerRuns {
            worker,
            status,
            limit,
            before,
        })
        .await?;
    let mut runs = Vec::new();
    for run in page.items {
        runs.push(view(ctx, run, false).await?);
    }
    Ok(WorkerRunsOutput {
        runs,
        next_cursor: page.next.map(|n| encode_cursor(kind, n)),
    })
}

impl ToolHandler for RunGet {
    const NAME: &'static str = "workers_run_get";
    const TITLE: &'static str = "Get a worker run";
    type Params = WorkerRunIdParams;
    type Output = WorkerRunView;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkerRunIdParams) -> Result<WorkerRunView> {
        let run = worker_run(ctx, &p.run_id).await?;
        view(ctx, run, true).await
    }

    fn summary(out: &WorkerRunView) -> String {
        run_line(out)
    }
}

/// One line on a worker run.
pub fn run_line(out: &WorkerRunView) -> String {
    let head = format!(
        "Run {} of {} v{} is {}",
        out.run_id,
        out.worker,
        out.version,
        out.status.as_str()
    );
    match (&out.error, &out.approval, &out.message) {
        (Some(e), _, _) => format!("{head}: {} ({}).", e.message, e.code),
        (None, Some(a), _) if a.decision == "pending" => format!(
            "{head}: waiting for approval to {}. Approve with workers_approve or reject with workers_reject.",
            a.label
        ),
        (None, _, Some(m)) if !out.status.is_terminal() => {
            format!("{head} ({m}). Poll again shortly.")
        }
        _ => format!("{head}."),
    }
}

impl ToolHandler for RunCancel {
    const NAME: &'static str = "workers_run_cancel";
    const DESCRIPTION: Option<&'static str> = Some(
        "Cancel a worker run: a queued run never starts; a running script or agent is stopped and its sandbox removed; a run waiting for approval is dropped. Runs that already ended are left as they are.",
    );
    const TITLE: &'static str = "Cancel a worker run";
    type Params = WorkerRunIdParams;
    type Output = WorkerRunView;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkerRunIdParams) -> Result<WorkerRunView> {
        worker_run(ctx, &p.run_id).await?;
        let cancelled = ctx
            .ledger
            .call(CancelRun {
                run_id: p.run_id,
                principal: ctx.principal.id.clone(),
            })
            .await?;
        view(ctx, cancelled.run, false).await
    }

    fn summary(out: &WorkerRunView) -> String {
        run_line(out)
    }
}

impl ToolHandler for Replay {
    const NAME: &'static str = "workers_run_replay";
    const TITLE: &'static str = "Replay a worker run";
    const TASKS: bool = true;
    type Params = WorkersReplayParams;
    type Output = StartedOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersReplayParams) -> Result<StartedOutput> {
        let original = worker_run(ctx, &p.run_id).await?;
        // The replay keeps the original's budget; a callback is for the run that named it.
        let controls = Controls {
            budget: original.budget.clone(),
            callback_url: None,
        };
        let spec = original
            .worker
            .map(|w| w.spec)
            .ok_or_else(|| Error::invalid(format!("{} {NOT_A_WORKER_RUN}", p.run_id)))?;
        let op = PrepareRun {
            name: spec.worker,
            version: Some(p.version.unwrap_or(spec.version)),
            trigger: Trigger::Replay,
            inputs: spec.inputs,
            files: spec.files,
            replay_of: Some(original.id),
            hook_id: None,
            webhook_key: spec.webhook_key,
        };
        start(ctx, op, None, controls).await
    }

    fn summary(out: &StartedOutput) -> String {
        format!(
            "Replay {} of {} v{} is {}. Follow it with workers_run_get.",
            out.run_id,
            out.worker,
            out.version,
            out.status.as_str()
        )
    }
}

impl ToolHandler for Approvals {
    const NAME: &'static str = "workers_approvals";
    const TITLE: &'static str = "Worker runs waiting for approval";
    type Params = WorkersApprovalsParams;
    type Output = WorkerRunsOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersApprovalsParams) -> Result<WorkerRunsOutput> {
        let status = Some(RunStatus::PendingApproval);
        list(ctx, None, status, p.limit, p.cursor, APPROVALS_CURSOR).await
    }

    fn summary(out: &WorkerRunsOutput) -> String {
        format!("{} run(s) waiting for approval.", out.runs.len())
    }
}

async fn decide(ctx: &Ctx<'_>, p: DecideParams, decision: Decision) -> Result<WorkerRunView> {
    worker_run(ctx, &p.run_id).await?;
    if p.reason.as_ref().is_some_and(|r| r.chars().count() > 500) {
        return Err(Error::invalid("`reason` is longer than 500 characters"));
    }
    let run = ctx
        .ledger
        .call(Decide {
            run_id: p.run_id,
            decision,
            principal: ctx.principal.id.clone(),
            reason: p.reason,
        })
        .await?;
    view(ctx, run, false).await
}

impl ToolHandler for Approve {
    const NAME: &'static str = "workers_approve";
    const DESCRIPTION: Option<&'static str> = Some(
        "Approve a worker run waiting in pending_approval: its second pass runs with its full network and carries out the proposal. The decision is final; approving twice is refused.",
    );
    const TITLE: &'static str = "Approve a worker run";
    type Params = DecideParams;
    type Output = WorkerRunView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: DecideParams) -> Result<WorkerRunView> {
        decide(ctx, p, Decision::Approved).await
    }

    fn summary(out: &WorkerRunView) -> String {
        format!("Approved: {}", run_line(out))
    }
}

impl ToolHandler for Reject {
    const NAME: &'static str = "workers_reject";
    const DESCRIPTION: Option<&'static str> = Some(
        "Reject a worker run waiting in pending_approval: it is cancelled and its side effect never happens. The decision is final.",
    );
    const TITLE: &'static str = "Reject a worker run";
    type Params = DecideParams;
    type Output = WorkerRunView;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, false, false)
    }

    async fn run(ctx: &Ctx<'_>, p: DecideParams) -> Result<WorkerRunView> {
        decide(ctx, p, Decision::Rejected).await
    }

    fn summary(out: &WorkerRunView) -> String {
        format!("Rejected: {}", run_line(out))
    }
}
