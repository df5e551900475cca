//! Sandbox templates as tools: `sandbox_template_create` (from setup commands, built in a
//! sandbox of its own in the background; or from a sandbox's workspace as it is),
//! `sandbox_template_list`, `sandbox_template_delete`, and what `sandbox_create {template}`
//! needs (`ready`). A build's outcome is collected whenever a template is looked at: the setup
//! runs as a background process the daemon keeps, and its end is read from there.

use super::access::registry;
use super::access::{annotations, not_found_hint, sandbox};
use super::sandbox_params::*;
use super::{Ctx, ToolHandler};
use crate::error::{Error, ErrorKind, Result};
use crate::ids;
use crate::registry::api::{
    DeleteTemplate, FinishTemplate, GetTemplate, ListTemplates, PutTemplate,
};
use crate::sandbox::api::{self as sandbox_api, Delete, Logs, Process, SnapshotFor, Spawn};
use crate::templates::{self, TemplateRecord, TemplateStatus};
use crate::time::{now_ms, rfc3339};
use handoff_wire::{SandboxSpec, StartProcess, WORKSPACE};
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Map;
use std::collections::BTreeMap;

pub struct CreateTemplate;
pub struct ListTemplatesTool;
pub struct DeleteTemplateTool;

/// Make a sandbox template, so new sandboxes start with files and tools ready: either run
/// `setup` commands (in order, stopping at the first that fails; at most 10 minutes) in a fresh
/// build sandbox — in the background: the template is `building` until they finish, and
/// sandbox_template_list shows when it is `ready` — or copy `fromSandboxId`'s workspace as it is
/// now (ready at once). Start sandboxes from it with sandbox_create {template}. Only the
/// workspace (/home/sandbox) is kept, so install tools there (e.g. a virtualenv, node_modules,
/// ~/.local).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateTemplateParams {
    /// 1 to 64 of a-z, 0-9 and -, starting with a letter.
    pub name: String,
    /// What the template holds (at most 500 characters).
    #[schemars(length(max = 500))]
    pub description: Option<String>,
    /// Shell commands run one after another in the workspace (1 to 50, each at most 4096
    /// characters). Give this or fromSandboxId.
    pub setup: Option<Vec<String>>,
    /// A sandbox whose workspace and settings become the template. Give this or setup.
    pub from_sandbox_id: Option<String>,
    /// For setup: variables during the build and in sandboxes made from the template.
    pub env: Option<BTreeMap<String, String>>,
    /// For setup: the build's allow list (as sandbox_create), kept for sandboxes made from it.
    pub allow_out: Option<Vec<String>>,
    /// For setup: destinations never reachable, kept for sandboxes made from it.
    pub deny_out: Option<Vec<String>>,
    /// For setup: small, medium or large, for the build and sandboxes made from it.
    pub size: Option<crate::sandboxes::Size>,
}

/// List sandbox templates: status (building, ready, failed — with the error and the end of the
/// setup's output), size of the workspace, settings, and how long the build took.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTemplatesParams {}

/// Delete a sandbox template (a build still running is stopped). Sandboxes made from it keep
/// their files.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteTemplateParams {
    /// The template's name.
    pub name: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateView {
    pub name: String,
    pub description: String,
    /// `building`, `ready` or `failed`.
    pub status: String,
    pub from_sandbox_id: Option<String>,
    pub setup: Vec<String>,
    /// The sandbox running the setup, while it is building.
    pub build_sandbox_id: Option<String>,
    pub size: Option<String>,
    pub env_names: Vec<String>,
    pub allow_out: Vec<String>,
    pub deny_out: Vec<String>,
    /// Size of the workspace snapshot (compressed).
    pub bytes: Option<i64>,
    pub created_at: String,
    pub ready_at: Option<String>,
    /// From creation to ready.
    pub build_seconds: Option<f64>,
    pub error: Option<String>,
}

impl From<TemplateRecord> for TemplateView {
    fn from(t: TemplateRecord) -> Self {
        TemplateView {
            status: t.status.as_str().to_string(),
            size: crate::sandboxes::Size::of(&t.spec).map(|s| s.as_str().to_string()),
            env_names: t.spec.env.keys().cloned().collect(),
            allow_out: t.spec.allow_out,
            deny_out: t.spec.deny_out,
            created_at: rfc3339(t.created_at),
            ready_at: t.ready_at.map(rfc3339),
            build_seconds: t.ready_at.map(|at| (at - t.created_at) as f64 / 1000.0),
            name: t.name,
            description: t.description,
            from_sandbox_id: t.from_sandbox,
            setup: t.setup,
            build_sandbox_id: t
                .build_sandbox
                .filter(|_| t.status == TemplateStatus::Building),
            bytes: t.bytes,
            error: t.error,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateList {
    pub templates: Vec<TemplateView>,
}

fn check_template_name(name: &str) -> Result<()> {
    if templates::is_template_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`name` {:?} is not a template name: 1 to {} of a-z, 0-9 and -, starting with a letter",
            crate::error::excerpt(name),
            templates::NAME_MAX
        )))
    }
}

fn check_setup(setup: &[String]) -> Result<()> {
    let bad = setup.is_empty()
        || setup.len() > templates::SETUP_MAX
        || setup
            .iter()
            .any(|c| c.trim().is_empty() || c.len() > templates::COMMAND_MAX || c.contains('\0'));
    if bad {
        return Err(Error::invalid(format!(
            "`setup` needs 1 to {} commands, each 1 to {} characters",
            templates::SETUP_MAX,
            templates::COMMAND_MAX
        )));
    }
    Ok(())
}

/// The template with its build's outcome collected if the build has ended.
async fn settle(ctx: &Ctx<'_>, template: TemplateRecord) -> Result<TemplateRecord> {
    let (TemplateStatus::Building, Some(build), Some(process)) = (
        template.status,
        template.build_sandbox.clone(),
        template.build_process,
    ) else {
        return Ok(template);
    };
    let client = sandbox_api::client(ctx.env, &build)?;
    let outcome = match client.call(Process { id: process }).await {
        Ok(info) if info.running => return Ok(template),
        Ok(info) if info.exit_code == Some(0) && !info.timed_out => {
            let key = templates::snapshot_key(&template.name, now_ms());
            let copied = client.call(SnapshotFor { key }).await?;
            match copied.snapshot {
                Some(key) => Ok((key, copied.bytes)),
                None => Err("the build sandbox had no workspace to keep".to_string()),
            }
        }
        Ok(info) => {
            let logs = client.call(Logs { id: process }).await.ok();
            let tail = logs
                .map(|l| format!("{}{}", l.stdout, l.stderr))
                .map(|text| {
                    let start = text.len().saturating_sub(2000);
                    let start = (start..=text.len())
                        .find(|i| text.is_char_boundary(*i))
                        .unwrap_or(text.len());
                    text[start..].to_string()
                })
                .unwrap_or_default();
            let how = match (info.timed_out, info.exit_code) {
                (true, _) => "ran out of its 10 minutes".to_string(),
                (false, Some(code)) => format!("exited with code {code}"),
                (false, None) => "was killed".to_string(),
            };
            Err(format!("the setup {how}; the end of its output:\n{tail}"))
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            Err("the build sandbox is gone (deleted, or lost before the setup ended)".into())
        }
        Err(e) => return Err(e),
    };
    let finished = registry(ctx)
        .await?
        .call(FinishTemplate {
            name: template.name.clone(),
            build_sandbox: build.clone(),
            outcome,
        })
        .await?;
    // The build sandbox has done its work either way.
    let _ = client.call(Delete {}).await;
    Ok(finished)
}

/// A ready template by name (its build collected first), or why a sandbox cannot start from it.
pub(super) async fn ready(ctx: &Ctx<'_>, name: &str) -> Result<TemplateRecord> {
    check_template_name(name)?;
    let found = registry(ctx)
        .await?
        .call(GetTemplate {
            name: name.to_string(),
        })
        .await?;
    let template = settle(ctx, found).await?;
    match template.status {
        TemplateStatus::Ready => Ok(template),
        TemplateStatus::Building => Err(Error::conflict(format!(
            "template {name} is still building ({} s so far); sandbox_template_list shows when \
             it is ready",
            (now_ms() - template.created_at) / 1000
        ))),
        TemplateStatus::Failed => Err(Error::invalid(format!(
            "template {name} failed: {}",
            template.error.unwrap_or_default()
        ))),
    }
}

impl ToolHandler for CreateTemplate {
    const NAME: &'static str = "sandbox_template_create";
    const TITLE: &'static str = "Make a sandbox template";
    type Params = CreateTemplateParams;
    type Output = TemplateView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: CreateTemplateParams) -> Result<TemplateView> {
        check_template_name(&p.name)?;
        let description = p.description.unwrap_or_default();
        if description.chars().count() > 500 {
            return Err(Error::invalid(
                "`description` is longer than 500 characters",
            ));
        }
        let now = now_ms();
        let mut record = TemplateRecord {
            name: p.name.clone(),
            description,
            status: TemplateStatus::Ready,
            from_sandbox: None,
            setup: Vec::new(),
            spec: SandboxSpec::default(),
            idle_timeout_s: i64::from(IDLE_DEFAULT_SECS),
            snapshot_key: None,
            bytes: None,
            build_sandbox: None,
            build_process: None,
            error: None,
            created_by: ctx.principal.id.clone(),
            created_at: now,
            ready_at: Some(now),
        };
        let registry = registry(ctx).await?;
        // Refuse a name in use before copying or starting anything.
        let name = p.name.clone();
        if let Ok(existing) = registry.call(GetTemplate { name }).await {
            if existing.status != TemplateStatus::Failed {
                return Err(Error::conflict(format!(
                    "template {} already exists; delete it first to make it again",
                    p.name
                )));
            }
        }
        match (p.setup, p.from_sandbox_id) {
            (None, Some(source)) => {
                let settings = p.env.is_some()
                    || p.allow_out.is_some()
                    || p.deny_out.is_some()
                    || p.size.is_some();
                if settings {
                    return Err(Error::invalid(
                        "a template from a sandbox takes that sandbox's settings: leave out env, \
                         allowOut, denyOut and size (change them with sandbox_update first)",
                    ));
                }
                let copied = sandbox(ctx, &source)
                    .await?
                    .call(SnapshotFor {
                        key: templates::snapshot_key(&p.name, now),
                    })
                    .await
                    .map_err(not_found_hint)?;
                record.spec = SandboxSpec {
                    secrets: Vec::new(),
                    ..copied.spec
                };
                record.idle_timeout_s = copied.idle_timeout_s;
                record.snapshot_key = copied.snapshot;
                record.bytes = copied.bytes;
                record.from_sandbox = Some(source);
            }
            (Some(setup), None) => {
                check_setup(&setup)?;
                let env = p.env.unwrap_or_default();
                check_env("env", &env)?;
                let allow_out = p.allow_out.unwrap_or_default();
                let deny_out = p.deny_out.unwrap_or_default();
                check_rules("allowOut", &allow_out)?;
                check_rules("denyOut", &deny_out)?;
                record.spec = SandboxSpec {
                    env,
                    allow_out,
                    deny_out,
                    limits: p.size.map(crate::sandboxes::Size::limits),
                    ..SandboxSpec::default()
                };
                let build = ids::new_id(ids::SANDBOX);
                let mut metadata = Map::new();
                metadata.insert("templateBuild".into(), p.name.clone().into());
                let client = sandbox_api::client(ctx.env, &build)?;
                client
                    .call(sandbox_api::Create {
                        id: build.clone(),
                        name: format!("template build: {}", p.name),
                        created_by: ctx.principal.id.clone(),
                        spec: record.spec.clone(),
                        idle_timeout_s: i64::from(IDLE_MAX_SECS),
                        metadata,
                        snapshot: None,
                        template: None,
                        // A build nobody collects is removed all the same.
                        expires_at: Some(now + 2 * 3600 * 1000),
                    })
                    .await?;
                let request = StartProcess {
                    command: templates::setup_script(&setup),
                    argv: None,
                    cwd: Some(WORKSPACE.to_string()),
                    env: BTreeMap::new(),
                    timeout_ms: Some(templates::BUILD_TIMEOUT_MS),
                    key: None,
                };
                let process = match client.call(Spawn { request }).await {
                    Ok(process) => process,
                    Err(e) => {
                        let _ = client.call(Delete {}).await;
                        return Err(e);
                    }
                };
                record.status = TemplateStatus::Building;
                record.ready_at = None;
                record.setup = setup;
                record.build_sandbox = Some(build);
                record.build_process = Some(process.id);
            }
            _ => {
                return Err(Error::invalid(
                    "give either `setup` (commands to run) or `fromSandboxId` (a sandbox to copy)",
                ))
            }
        }
        let record = Box::new(record);
        let stored = registry.call(PutTemplate { record }).await?;
        Ok(stored.into())
    }

    fn summary(out: &TemplateView) -> String {
        match out.status.as_str() {
            "building" => format!(
                "Template {} is building; sandbox_template_list shows when it is ready.",
                out.name
            ),
            _ => format!(
                "Template {} is ready; start sandboxes from it with sandbox_create {{template}}.",
                out.name
            ),
        }
    }
}

impl ToolHandler for ListTemplatesTool {
    const NAME: &'static str = "sandbox_template_list";
    const TITLE: &'static str = "List sandbox templates";
    type Params = ListTemplatesParams;
    type Output = TemplateList;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, _: ListTemplatesParams) -> Result<TemplateList> {
        let listed = registry(ctx).await?.call(ListTemplates {}).await?;
        let mut templates = Vec::with_capacity(listed.len());
        for template in listed {
            templates.push(settle(ctx, template).await?.into());
        }
        Ok(TemplateList { templates })
    }

    fn summary(out: &TemplateList) -> String {
        let ready = out.templates.iter().filter(|t| t.status == "ready").count();
        format!("{} template(s), {ready} ready.", out.templates.len())
    }
}

impl ToolHandler for DeleteTemplateTool {
    const NAME: &'static str = "sandbox_template_delete";
    const TITLE: &'static str = "Delete a sandbox template";
    type Params = DeleteTemplateParams;
    type Output = TemplateView;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: DeleteTemplateParams) -> Result<TemplateView> {
        check_template_name(&p.name)?;
        let deleted = registry(ctx)
            .await?
            .call(DeleteTemplate { name: p.name })
            .await?;
        if let (TemplateStatus::Building, Some(build)) = (deleted.status, &deleted.build_sandbox) {
            let _ = sandbox_api::client(ctx.env, build)?.call(Delete {}).await;
        }
        if let Some(key) = &deleted.snapshot_key {
            let _ = ctx
                .env
                .bucket(crate::artifacts::BUCKET)?
                .delete(key.as_str())
                .await;
        }
        Ok(deleted.into())
    }

    fn summary(out: &TemplateView) -> String {
        format!("Template {} deleted.", out.name)
    }
}
