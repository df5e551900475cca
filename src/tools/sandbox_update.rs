//! `sandbox_update`: a sandbox's environment, network rules, idle timeout and metadata changed
//! while it lives, each checked as `sandbox_create` checks it; and `sandbox_fork`: a new sandbox
//! from another's workspace.

use super::access::{annotations, not_found_hint, sandbox};
use super::sandbox_params::*;
use super::sandbox_views::SandboxView;
use super::{Ctx, ToolHandler};
use crate::error::{Error, Result};
use crate::ids;
use crate::sandbox::api as sandbox_api;
use rmcp::model::ToolAnnotations;
use std::collections::BTreeMap;

pub struct Update;
pub struct Fork;

impl ToolHandler for Update {
    const NAME: &'static str = "sandbox_update";
    const TITLE: &'static str = "Change a sandbox's settings";
    type Params = UpdateParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, true)
    }

    async fn run(ctx: &Ctx<'_>, p: UpdateParams) -> Result<SandboxView> {
        let (mut env_set, mut env_unset) = (BTreeMap::new(), Vec::new());
        for (name, value) in p.env.unwrap_or_default() {
            match value {
                Some(value) => {
                    env_set.insert(name, value);
                }
                None => env_unset.push(name),
            }
        }
        check_env("env", &env_set)?;
        let unset: BTreeMap<String, String> = env_unset
            .iter()
            .map(|name| (name.clone(), String::new()))
            .collect();
        check_env("env", &unset)?;
        if let Some(rules) = &p.allow_out {
            check_rules("allowOut", rules)?;
        }
        if let Some(rules) = &p.deny_out {
            check_rules("denyOut", rules)?;
        }
        if let Some(metadata) = &p.metadata {
            check_metadata(metadata)?;
        }
        let idle_timeout_s = match p.idle_timeout_seconds {
            Some(seconds) => Some(i64::from(idle_timeout(Some(seconds))?)),
            None => None,
        };
        let nothing = env_set.is_empty()
            && env_unset.is_empty()
            && p.allow_out.is_none()
            && p.deny_out.is_none()
            && idle_timeout_s.is_none()
            && p.metadata.is_none();
        if nothing {
            return Err(Error::invalid(
                "nothing to change: give env, allowOut, denyOut, idleTimeoutSeconds or metadata",
            ));
        }
        let op = sandbox_api::Update {
            env_set,
            env_unset,
            allow_out: p.allow_out,
            deny_out: p.deny_out,
            idle_timeout_s,
            metadata: p.metadata,
        };
        let client = sandbox(ctx, &p.sandbox_id).await?;
        Ok(client.call(op).await.map_err(not_found_hint)?.into())
    }

    fn summary(out: &SandboxView) -> String {
        format!("Sandbox {} updated; it is {}.", out.sandbox_id, out.status)
    }
}

impl ToolHandler for Fork {
    const NAME: &'static str = "sandbox_fork";
    const TITLE: &'static str = "Fork a sandbox";
    type Params = ForkParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, false, true)
    }

    async fn run(ctx: &Ctx<'_>, p: ForkParams) -> Result<SandboxView> {
        let name = p.name.unwrap_or_default();
        check_name(&name)?;
        let mut metadata = p.metadata.unwrap_or_default();
        metadata.insert("forkedFrom".into(), p.sandbox_id.clone().into());
        check_metadata(&metadata)?;
        let source = sandbox(ctx, &p.sandbox_id).await?;
        let id = ids::new_id(ids::SANDBOX);
        let copied = source
            .call(sandbox_api::SnapshotFor {
                key: crate::artifacts::snapshot_key(&id, crate::time::now_ms()),
            })
            .await
            .map_err(not_found_hint)?;
        let op = sandbox_api::Create {
            name: if name.is_empty() { id.clone() } else { name },
            id: id.clone(),
            created_by: ctx.principal.id.clone(),
            spec: copied.spec,
            idle_timeout_s: copied.idle_timeout_s,
            metadata,
            snapshot: copied.snapshot,
            template: None,
            expires_at: None,
        };
        Ok(sandbox_api::client(ctx.env, &id)?.call(op).await?.into())
    }

    fn summary(out: &SandboxView) -> String {
        format!(
            "Sandbox {} forked; it has the workspace of {}.",
            out.sandbox_id,
            out.metadata
                .get("forkedFrom")
                .and_then(|v| v.as_str())
                .unwrap_or("its source")
        )
    }
}
