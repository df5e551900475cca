//! The `sandbox_*` tools: sandboxes as direct tools (create, run commands, pause and resume,
//! previews, network log); the file tools are in `sandbox_files.rs`.

use super::access::{annotations, not_found_hint, sandbox};
use super::params::check_limit;
use super::runs::{decode_cursor, encode_cursor};
use super::sandbox_params::*;
use super::sandbox_views::*;
use super::{Ctx, ToolHandler};
use crate::error::Result;
use crate::ids;
use crate::ledger::api::ListSandboxes;
use crate::links;
use crate::sandbox::api as sandbox_api;
use crate::sandbox::api::exec_stream;
use crate::sandboxes::Status;
use crate::time::{now_ms, rfc3339};
use handoff_wire::{ExecRequest, SandboxSpec};
use rmcp::model::ToolAnnotations;

const SANDBOXES_CURSOR: &str = "sandboxes";

pub struct Create;
pub struct List;
pub struct Info;
pub struct Exec;
pub struct Pause;
pub struct Resume;
pub struct Delete;
pub struct PreviewUrl;
pub struct NetworkLog;

impl ToolHandler for Create {
    const NAME: &'static str = "sandbox_create";
    const TITLE: &'static str = "Create a sandbox";
    type Params = CreateParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: CreateParams) -> Result<SandboxView> {
        let name = p.name.unwrap_or_default();
        check_name(&name)?;
        let template = match &p.template {
            Some(t) => Some(super::sandbox_templates::ready(ctx, t).await?),
            None => None,
        };
        let base = template
            .as_ref()
            .map(|t| t.spec.clone())
            .unwrap_or_default();
        let mut env = base.env;
        env.extend(p.env.unwrap_or_default());
        check_env("env", &env)?;
        let allow_out = p.allow_out.unwrap_or(base.allow_out);
        let deny_out = p.deny_out.unwrap_or(base.deny_out);
        check_rules("allowOut", &allow_out)?;
        check_rules("denyOut", &deny_out)?;
        let mut metadata = p.metadata.unwrap_or_default();
        if let Some(t) = &template {
            metadata.insert("template".into(), t.name.clone().into());
        }
        check_metadata(&metadata)?;
        let idle = match (p.idle_timeout_seconds, &template) {
            (None, Some(t)) => t.idle_timeout_s,
            (asked, _) => i64::from(idle_timeout(asked)?),
        };
        let lifetime = p.lifetime_seconds.map(lifetime).transpose()?;
        ctx.ledger.check_mcp_session().await?;
        let id = ids::new_id(ids::SANDBOX);
        let op = sandbox_api::Create {
            name: if name.is_empty() { id.clone() } else { name },
            id: id.clone(),
            created_by: ctx.principal.id.clone(),
            spec: SandboxSpec {
                env,
                allow_out,
                deny_out,
                hosts: Default::default(),
                limits: p.size.map(crate::sandboxes::Size::limits).or(base.limits),
                secrets: Vec::new(),
            },
            idle_timeout_s: idle,
            metadata,
            snapshot: None,
            template: template.and_then(|t| t.snapshot_key),
            expires_at: lifetime.map(|s| now_ms() + i64::from(s) * 1000),
        };
        Ok(sandbox_api::client(ctx.env, &id)?.call(op).await?.into())
    }

    fn summary(out: &SandboxView) -> String {
        format!(
            "Sandbox {} created ({}). Run commands with sandbox_exec.",
            out.sandbox_id,
            out.isolation
                .as_ref()
                .map(|i| format!("isolation {}, network {}", i.level, i.network))
                .unwrap_or_default()
        )
    }
}

impl ToolHandler for List {
    const NAME: &'static str = "sandbox_list";
    const TITLE: &'static str = "List sandboxes";
    type Params = ListSandboxesParams;
    type Output = ListSandboxesOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: ListSandboxesParams) -> Result<ListSandboxesOutput> {
        let limit = check_limit(p.limit)?;
        let before = decode_cursor(SANDBOXES_CURSOR, p.cursor.as_deref())?;
        let page = ctx.ledger.call(ListSandboxes { limit, before }).await?;
        Ok(ListSandboxesOutput {
            sandboxes: page.items.into_iter().map(Into::into).collect(),
            next_cursor: page.next.map(|seq| encode_cursor(SANDBOXES_CURSOR, seq)),
        })
    }

    fn summary(out: &ListSandboxesOutput) -> String {
        format!("{} sandbox(es), newest first.", out.sandboxes.len())
    }
}

impl ToolHandler for Info {
    const NAME: &'static str = "sandbox_info";
    const TITLE: &'static str = "Sandbox details";
    type Params = SandboxIdParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SandboxIdParams) -> Result<SandboxView> {
        let client = sandbox(ctx, &p.sandbox_id).await?;
        Ok(client
            .call(sandbox_api::Info {})
            .await
            .map_err(not_found_hint)?
            .into())
    }

    fn summary(out: &SandboxView) -> String {
        format!("Sandbox {} is {}.", out.sandbox_id, out.status)
    }
}

impl ToolHandler for Exec {
    const NAME: &'static str = "sandbox_exec";
    const TITLE: &'static str = "Run a command in a sandbox";
    const TASKS: bool = true;
    type Params = ExecParams;
    type Output = ExecOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, false, true)
    }

    async fn run(ctx: &Ctx<'_>, mut p: ExecParams) -> Result<ExecOutput> {
        let (env, timeout_ms) = check_exec(&mut p)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let request = ExecRequest {
            command: p.command,
            argv: None,
            cwd: p.cwd,
            env,
            timeout_ms,
            credentials: Vec::new(),
        };
        if !ctx.wants_progress() {
            return Ok(client
                .call(sandbox_api::Exec { request })
                .await
                .map_err(not_found_hint)?
                .into());
        }
        // The client listens for progress: stream the output and report its latest line.
        let response = sandbox_api::exec_stream(&client, request)
            .await
            .map_err(not_found_hint)?;
        let result = exec_stream::collect(response, |line| ctx.report(line)).await?;
        Ok(result.into())
    }

    fn summary(out: &ExecOutput) -> String {
        match (out.timed_out, out.exit_code) {
            (true, _) => format!(
                "Timed out after {} ms; the process group was killed.",
                out.duration_ms
            ),
            (false, Some(code)) => format!("Exit code {code} after {} ms.", out.duration_ms),
            (false, None) => "Killed by a signal.".to_string(),
        }
    }
}

impl ToolHandler for Pause {
    const NAME: &'static str = "sandbox_pause";
    const DESCRIPTION: Option<&'static str> = Some(
        "Pause a sandbox: its processes stop and its workspace is saved to R2; the call returns once it is paused (a pause that fails leaves it running, never half-paused). Any later command, file operation or preview request (or sandbox_resume) brings it back with its files.",
    );
    const TITLE: &'static str = "Pause a sandbox";
    type Params = SandboxIdParams;
    type Output = StatusOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SandboxIdParams) -> Result<StatusOutput> {
        let client = sandbox(ctx, &p.sandbox_id).await?;
        ctx.report("Saving the workspace and stopping the processes…");
        let info = client
            .call(sandbox_api::Pause {})
            .await
            .map_err(not_found_hint)?;
        Ok(StatusOutput::new(
            info.record.id,
            info.record.status,
            info.record.snapshot_bytes,
        ))
    }

    fn summary(out: &StatusOutput) -> String {
        format!(
            "Sandbox {} is paused: workspace saved, processes stopped. Any command resumes it.",
            out.sandbox_id
        )
    }
}

impl ToolHandler for Resume {
    const NAME: &'static str = "sandbox_resume";
    const DESCRIPTION: Option<&'static str> = Some(
        "Resume a paused sandbox: its workspace is restored from its snapshot and commands run again. Returns its details.",
    );
    const TITLE: &'static str = "Resume a sandbox";
    type Params = SandboxIdParams;
    type Output = StatusOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SandboxIdParams) -> Result<StatusOutput> {
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let info = client
            .call(sandbox_api::Resume {})
            .await
            .map_err(not_found_hint)?;
        Ok(StatusOutput::new(
            info.record.id,
            info.record.status,
            info.record.snapshot_bytes,
        ))
    }

    fn summary(out: &StatusOutput) -> String {
        format!("Sandbox {} is {}.", out.sandbox_id, out.status)
    }
}

impl ToolHandler for Delete {
    const NAME: &'static str = "sandbox_delete";
    const DESCRIPTION: Option<&'static str> = Some(
        "Delete a sandbox for good: its processes, files and snapshots are removed. Runs that used it keep their results.",
    );
    const TITLE: &'static str = "Delete a sandbox";
    type Params = SandboxIdParams;
    type Output = StatusOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SandboxIdParams) -> Result<StatusOutput> {
        let client = sandbox(ctx, &p.sandbox_id).await?;
        client
            .call(sandbox_api::Delete {})
            .await
            .map_err(not_found_hint)?;
        Ok(StatusOutput::new(p.sandbox_id, Status::Deleted, None))
    }

    fn summary(out: &StatusOutput) -> String {
        format!("Sandbox {} and its files are deleted.", out.sandbox_id)
    }
}

impl ToolHandler for PreviewUrl {
    const NAME: &'static str = "sandbox_preview_url";
    const TITLE: &'static str = "Publish a sandbox port";
    type Params = PreviewParams;
    type Output = PreviewOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, false, false)
    }

    async fn run(ctx: &Ctx<'_>, p: PreviewParams) -> Result<PreviewOutput> {
        let port = preview_port(p.port)?;
        let ttl = preview_ttl(p.expires_in_seconds)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        client
            .call(sandbox_api::Info {})
            .await
            .map_err(not_found_hint)?;
        let expires_at = now_ms() / 1000 + i64::from(ttl);
        let url = links::preview_url(ctx.env, &p.sandbox_id, port, expires_at)?;
        Ok(PreviewOutput {
            url,
            port,
            expires_at: rfc3339(expires_at * 1000),
        })
    }

    fn summary(out: &PreviewOutput) -> String {
        format!(
            "Port {} is published at {} until {}. Links inside the app should be relative.",
            out.port, out.url, out.expires_at
        )
    }
}

impl ToolHandler for NetworkLog {
    const NAME: &'static str = "sandbox_network_log";
    const TITLE: &'static str = "Sandbox network log";
    type Params = NetworkLogParams;
    type Output = NetworkLogOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: NetworkLogParams) -> Result<NetworkLogOutput> {
        let limit = log_limit(p.limit)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let log = client
            .call(sandbox_api::Egress {
                limit,
                verdict: p.verdict.map(Into::into),
            })
            .await
            .map_err(not_found_hint)?;
        Ok(NetworkLogOutput {
            entries: log.entries.into_iter().map(Into::into).collect(),
        })
    }

    fn summary(out: &NetworkLogOutput) -> String {
        let blocked = out
            .entries
            .iter()
            .filter(|e| e.verdict == "blocked")
            .count();
        format!(
            "{} outbound connection(s), {blocked} blocked, newest first.",
            out.entries.len()
        )
    }
}
