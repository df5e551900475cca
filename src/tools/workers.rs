//! The `workers_*` tools that manage workers: list, get, deploy (inline or from a repository),
//! versions, rollback, delete, and secrets. Runs are in `worker_runs.rs`.

use super::access::annotations;
use super::access::registry;
use super::params::check_limit;
use super::runs::{decode_cursor, encode_cursor};
use super::worker_params::*;
use super::worker_views::*;
use super::{Ctx, ToolHandler};
use crate::config;
use crate::error::{Error, Result};
use crate::links;
use crate::registry::api::{self as registry_api, *};
use crate::rpc::Ack;
use crate::time::rfc3339;
use crate::workers::files::{check_path, FileSet, MAX_FILES, MAX_TOTAL_BYTES};
use crate::workers::manifest;
use crate::workers::read::{problems_message, Rules};
use crate::workers::schedule;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rmcp::model::ToolAnnotations;
use serde_json::{Map, Value};

pub struct List;
pub struct Get;
pub struct Deploy;
pub struct Versions;
pub struct Rollback;
pub struct Delete;
pub struct SecretsList;
pub struct SecretSet;
pub struct SecretDelete;

const VERSIONS_CURSOR: &str = "versions";

pub(super) fn check_worker(name: &str) -> Result<()> {
    if manifest::is_worker_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "`worker` {:?} is not a worker name (lower-case letters, digits and '-'); \
             workers_list shows them",
            crate::error::excerpt(name)
        )))
    }
}

fn webhook_view(
    ctx: &Ctx<'_>,
    name: &str,
    hook: Option<&registry_api::Webhook>,
) -> Option<WebhookView> {
    let hook = hook?;
    Some(WebhookView {
        url: format!("{}{}", ctx.base_url, hook.path),
        secret: links::webhook_secret(ctx.env, name, &hook.hook_id)?,
    })
}

impl ToolHandler for List {
    const NAME: &'static str = "workers_list";
    const TITLE: &'static str = "List background workers";
    type Params = WorkersListParams;
    type Output = WorkersListOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersListParams) -> Result<WorkersListOutput> {
        let limit = check_limit(p.limit)?;
        let after = match p.cursor {
            Some(c) => Some(
                String::from_utf8(
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(&c)
                        .map_err(|_| {
                            Error::invalid("`cursor` is not a nextCursor of workers_list")
                        })?,
                )
                .map_err(|_| Error::invalid("`cursor` is not a nextCursor of workers_list"))?,
            ),
            None => None,
        };
        let listed = registry(ctx)
            .await?
            .call(ListWorkers { limit, after })
            .await?;
        Ok(WorkersListOutput {
            workers: listed.items.into_iter().map(Into::into).collect(),
            next_cursor: listed
                .next
                .map(|n| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(n)),
        })
    }

    fn summary(out: &WorkersListOutput) -> String {
        format!("{} worker(s).", out.workers.len())
    }
}

impl ToolHandler for Get {
    const NAME: &'static str = "workers_get";
    const TITLE: &'static str = "Show a worker";
    type Params = WorkerNameParams;
    type Output = WorkerView;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkerNameParams) -> Result<WorkerView> {
        check_worker(&p.worker)?;
        let detail = registry(ctx)
            .await?
            .call(GetWorker { name: p.worker })
            .await?;
        let name = detail.worker.name.clone();
        let manifest = &detail.version.manifest;
        let schedule = manifest.triggers.schedule.as_ref().map(|s| ScheduleView {
            cron: s.cron.clone(),
            timezone: s.timezone.clone(),
            description: schedule::describe(&s.cron),
        });
        let manifest = match serde_json::to_value(manifest)? {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Ok(WorkerView {
            webhook: webhook_view(ctx, &name, detail.webhook.as_ref()),
            summary: detail.worker.into(),
            schedule,
            manifest,
        })
    }

    fn summary(out: &WorkerView) -> String {
        format!(
            "Worker {} v{} ({}).",
            out.summary.name, out.summary.current_version, out.summary.runtime
        )
    }
}

impl ToolHandler for Deploy {
    const NAME: &'static str = "workers_deploy";
    const TITLE: &'static str = "Deploy a worker";
    type Params = WorkersDeployParams;
    type Output = DeployOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersDeployParams) -> Result<DeployOutput> {
        let (files, source) = folder(ctx, p).await?;
        // Checked here too, so a bad folder costs no round trip and lists every problem.
        let rules = Rules {
            now_ms: crate::time::now_ms(),
            min_schedule_s: config::workers::min_schedule_secs(ctx.env),
        };
        crate::workers::read::read(&files, &rules)
            .map_err(|p| Error::invalid(problems_message(&p)))?;
        let client = registry(ctx).await?;
        let deployed = client
            .call(registry_api::Deploy {
                principal: ctx.principal.id.clone(),
                files,
                source,
                origin: Some(ctx.base_url.clone()),
            })
            .await?;
        let name = deployed.worker.name.clone();
        let webhook = match &deployed.worker.webhook_path {
            Some(_) => client.call(GetWorker { name: name.clone() }).await?.webhook,
            None => None,
        };
        Ok(DeployOutput {
            version: VersionView::of(&deployed.version, deployed.worker.current_version),
            webhook: webhook_view(ctx, &name, webhook.as_ref()),
            worker: deployed.worker.into(),
            created: deployed.created,
        })
    }

    fn summary(out: &DeployOutput) -> String {
        if out.created {
            format!(
                "Deployed {} v{}. Run it with workers_run.",
                out.worker.name, out.version.version
            )
        } else {
            format!(
                "{} v{} already has exactly these files; nothing changed.",
                out.worker.name, out.version.version
            )
        }
    }
}

/// The folder to deploy, from inline files or a repository, and where it came from.
async fn folder(ctx: &Ctx<'_>, p: WorkersDeployParams) -> Result<(FileSet, String)> {
    let inline = p.files.is_some() || p.base64_files.is_some();
    match (inline, &p.repository) {
        (true, Some(_)) => Err(Error::invalid(
            "give either `files` (and `base64Files`) or `repository`, not both",
        )),
        (false, None) => Err(Error::invalid(
            "give the worker folder as `files` ({\"worker.yml\": …, \"run.py\": …}) or name it with \
             `repository` and `path`",
        )),
        (true, None) => {
            let mut set = FileSet::default();
            for (path, text) in p.files.unwrap_or_default() {
                set.0.insert(path, text.into_bytes());
            }
            for (path, encoded) in p.base64_files.unwrap_or_default() {
                let bytes = B64.decode(encoded.trim()).map_err(|_| {
                    Error::invalid(format!("`base64Files[{path:?}]` is not valid base64"))
                })?;
                set.0.insert(path, bytes);
            }
            Ok((set, "inline".into()))
        }
        (false, Some(repository)) => from_repository(ctx, repository, p.path, p.r#ref).await,
    }
}

async fn from_repository(
    ctx: &Ctx<'_>,
    repository: &str,
    path: Option<String>,
    git_ref: Option<String>,
) -> Result<(FileSet, String)> {
    let (owner, repo) = crate::repository::split(repository, &config::forge_git_url(ctx.env))?;
    let path = path.unwrap_or_default();
    let trimmed = path.trim_matches('/');
    if !trimmed.is_empty() {
        check_path(trimmed).map_err(|why| Error::invalid(format!("`path`: {why}")))?;
    }
    if let Some(r) = &git_ref {
        if !handoff_wire::rules::is_safe_branch(r) {
            return Err(Error::invalid(
                "`ref` must be a branch, tag or commit: letters, digits and ._/- only",
            ));
        }
    }
    let token = config::get(ctx.env, config::GITHUB_TOKEN).ok_or_else(|| {
        Error::not_configured(format!(
            "{} is not set: handoff cannot read repositories; give the files inline instead",
            config::GITHUB_TOKEN
        ))
    })?;
    ctx.ledger.check_mcp_session().await?;
    let files = crate::forge::read_folder(
        &token,
        &config::forge_api_url(ctx.env),
        &owner,
        &repo,
        trimmed,
        git_ref.as_deref(),
        (MAX_FILES, MAX_TOTAL_BYTES),
    )
    .await?;
    let set = FileSet(files.into_iter().collect());
    let source = format!(
        "repository {repository}@{}:{}",
        git_ref.as_deref().unwrap_or("default"),
        if trimmed.is_empty() { "/" } else { trimmed }
    );
    Ok((set, source))
}

impl ToolHandler for Versions {
    const NAME: &'static str = "workers_versions";
    const TITLE: &'static str = "List a worker's versions";
    type Params = WorkersVersionsParams;
    type Output = VersionsOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersVersionsParams) -> Result<VersionsOutput> {
        check_worker(&p.worker)?;
        let limit = check_limit(p.limit)?;
        let before = decode_cursor(VERSIONS_CURSOR, p.cursor.as_deref())?;
        let client = registry(ctx).await?;
        let current = client
            .call(GetWorker {
                name: p.worker.clone(),
            })
            .await?
            .worker
            .current_version;
        let page = client
            .call(ListVersions {
                name: p.worker,
                limit,
                before,
            })
            .await?;
        Ok(VersionsOutput {
            versions: page
                .items
                .iter()
                .map(|v| VersionView::of(v, current))
                .collect(),
            next_cursor: page.next.map(|n| encode_cursor(VERSIONS_CURSOR, n)),
        })
    }

    fn summary(out: &VersionsOutput) -> String {
        format!("{} version(s), newest first.", out.versions.len())
    }
}

impl ToolHandler for Rollback {
    const NAME: &'static str = "workers_rollback";
    const TITLE: &'static str = "Roll a worker back";
    type Params = WorkersRollbackParams;
    type Output = DeployOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkersRollbackParams) -> Result<DeployOutput> {
        check_worker(&p.worker)?;
        let deployed = registry(ctx)
            .await?
            .call(registry_api::Rollback {
                name: p.worker,
                to: p.version,
                principal: ctx.principal.id.clone(),
            })
            .await?;
        Ok(DeployOutput {
            version: VersionView::of(&deployed.version, deployed.worker.current_version),
            webhook: None,
            worker: deployed.worker.into(),
            created: deployed.created,
        })
    }

    fn summary(out: &DeployOutput) -> String {
        format!(
            "{} is now at v{} ({}).",
            out.worker.name, out.version.version, out.version.source
        )
    }
}

impl ToolHandler for Delete {
    const NAME: &'static str = "workers_delete";
    const DESCRIPTION: Option<&'static str> = Some(
        "Delete a worker: its versions, folders and schedule are removed and its webhook stops; its runs stay readable. Deploying the name again starts after the last version number.",
    );
    const TITLE: &'static str = "Delete a worker";
    type Params = WorkerNameParams;
    type Output = DoneOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WorkerNameParams) -> Result<DoneOutput> {
        check_worker(&p.worker)?;
        let _: Ack = registry(ctx)
            .await?
            .call(DeleteWorker {
                name: p.worker.clone(),
            })
            .await?;
        Ok(DoneOutput {
            message: format!(
                "worker {} deleted with its versions and schedule; its runs stay readable",
                p.worker
            ),
        })
    }

    fn summary(out: &DoneOutput) -> String {
        format!("Done: {}.", out.message)
    }
}

fn secret_view(s: SecretInfo) -> SecretView {
    SecretView {
        name: s.name,
        worker: s.worker,
        updated_at: rfc3339(s.updated_at),
        updated_by: s.updated_by,
        used_by: s.used_by,
    }
}

impl ToolHandler for SecretsList {
    const NAME: &'static str = "workers_secrets_list";
    const TITLE: &'static str = "List worker secrets";
    type Params = NoParams;
    type Output = SecretsOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, _: NoParams) -> Result<SecretsOutput> {
        let secrets = registry(ctx).await?.call(ListSecrets {}).await?;
        Ok(SecretsOutput {
            secrets: secrets.into_iter().map(secret_view).collect(),
        })
    }

    fn summary(out: &SecretsOutput) -> String {
        format!(
            "{} secret(s) set (values are never shown).",
            out.secrets.len()
        )
    }
}

impl ToolHandler for SecretSet {
    const NAME: &'static str = "workers_secret_set";
    const TITLE: &'static str = "Set a worker secret";
    type Params = SecretSetParams;
    type Output = SecretView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SecretSetParams) -> Result<SecretView> {
        let info = registry(ctx)
            .await?
            .call(registry_api::SetSecret {
                name: p.name,
                value: p.value,
                worker: p.worker,
                principal: ctx.principal.id.clone(),
            })
            .await?;
        Ok(secret_view(info))
    }

    fn summary(out: &SecretView) -> String {
        format!("Secret {} set (write-only).", out.name)
    }
}

impl ToolHandler for SecretDelete {
    const NAME: &'static str = "workers_secret_delete";
    const TITLE: &'static str = "Delete a worker secret";
    type Params = SecretDeleteParams;
    type Output = DoneOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: SecretDeleteParams) -> Result<DoneOutput> {
        let _: Ack = registry(ctx)
            .await?
            .call(registry_api::DeleteSecret {
                name: p.name.clone(),
                worker: p.worker,
            })
            .await?;
        Ok(DoneOutput {
            message: format!("secret {} deleted", p.name),
        })
    }

    fn summary(out: &DoneOutput) -> String {
        format!("Done: {}.", out.message)
    }
}
