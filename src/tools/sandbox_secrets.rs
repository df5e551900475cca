//! Secrets for sandboxes: `secret_list` (names only), `sandbox_attach_secret` and
//! `sandbox_detach_secret`. Values are set by the owner on the secrets page — deliberately no
//! tool takes one, since a tool's arguments are written by the model.

use super::access::registry;
use super::access::{annotations, not_found_hint, sandbox};
use super::sandbox_views::SandboxView;
use super::{Ctx, ToolHandler};
use crate::error::{Error, Result};
use crate::registry::api::{
    check_sandbox_secret_name as check_name, ListSandboxSecrets, SandboxSecretInfo,
};
use crate::sandbox::api::Secret;
use crate::time::rfc3339;
use handoff_wire::rules;
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub struct List;
pub struct Attach;
pub struct Detach;

/// List the secrets sandboxes can have swapped into their HTTPS requests (names and when they
/// were set — never values), and the page where the owner sets them. Attach one with
/// sandbox_attach_secret.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

/// Give a sandbox a secret: its processes get a variable of the secret's name holding a
/// stand-in, and the egress proxy swaps the real value in — in the headers of HTTPS requests to
/// the hosts given here, and nowhere else (the sandbox never sees the value). From the next
/// command; attaching again replaces the hosts. The sandbox's own network rules still apply.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// A secret's name, as secret_list shows it.
    pub name: String,
    /// Where the value may go: `host`, `*.domain`, either with `:port` (443 when left out);
    /// 1 to 20, never `*`.
    pub hosts: Vec<String>,
}

/// Take a secret away from a sandbox: the proxy stops swapping it in at once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DetachParams {
    /// The sandboxId returned by sandbox_create.
    pub sandbox_id: String,
    /// The attached secret's name.
    pub name: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretView {
    pub name: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretListView {
    /// Secrets that can be attached to sandboxes (names only; values are never shown).
    pub secrets: Vec<SecretView>,
    /// Where the owner adds, replaces and deletes them (after signing in).
    pub manage_url: String,
}

impl ToolHandler for List {
    const NAME: &'static str = "secret_list";
    const TITLE: &'static str = "List secrets for sandboxes";
    type Params = ListParams;
    type Output = SecretListView;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, _: ListParams) -> Result<SecretListView> {
        let secrets = registry(ctx).await?.call(ListSandboxSecrets {}).await?;
        Ok(SecretListView {
            secrets: secrets
                .into_iter()
                .map(|s: SandboxSecretInfo| SecretView {
                    name: s.name,
                    updated_at: rfc3339(s.updated_at),
                })
                .collect(),
            manage_url: format!("{}/secrets", ctx.base_url),
        })
    }

    fn summary(out: &SecretListView) -> String {
        format!(
            "{} secret(s) for sandboxes (values are never shown; the owner sets them at {}).",
            out.secrets.len(),
            out.manage_url
        )
    }
}

impl ToolHandler for Attach {
    const NAME: &'static str = "sandbox_attach_secret";
    const TITLE: &'static str = "Attach a secret to a sandbox";
    type Params = AttachParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(false, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: AttachParams) -> Result<SandboxView> {
        check_name(&p.name)?;
        if p.hosts.is_empty() || p.hosts.len() > rules::SECRET_HOSTS_MAX {
            return Err(Error::invalid(format!(
                "`hosts` needs 1 to {} hosts the secret may go to",
                rules::SECRET_HOSTS_MAX
            )));
        }
        if let Some(bad) = p.hosts.iter().find(|h| !rules::is_secret_host(h)) {
            return Err(Error::invalid(format!(
                "`hosts`: {:?} is not a host the secret may go to; use host, *.domain, \
                 optionally with :port (not *)",
                crate::error::excerpt(bad)
            )));
        }
        let known = registry(ctx).await?.call(ListSandboxSecrets {}).await?;
        if !known.iter().any(|s| s.name == p.name) {
            return Err(Error::not_found(format!(
                "no secret {} is set; secret_list shows the secrets, and the owner adds them at \
                 {}/secrets",
                p.name, ctx.base_url
            )));
        }
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let op = Secret {
            name: p.name,
            hosts: Some(p.hosts),
        };
        Ok(client.call(op).await.map_err(not_found_hint)?.into())
    }

    fn summary(out: &SandboxView) -> String {
        format!(
            "Sandbox {} has {} secret(s) attached; each variable holds a stand-in the proxy \
             swaps for the value on HTTPS to its hosts.",
            out.sandbox_id,
            out.secrets.len()
        )
    }
}

impl ToolHandler for Detach {
    const NAME: &'static str = "sandbox_detach_secret";
    const TITLE: &'static str = "Detach a secret from a sandbox";
    type Params = DetachParams;
    type Output = SandboxView;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, false, false)
    }

    async fn run(ctx: &Ctx<'_>, p: DetachParams) -> Result<SandboxView> {
        check_name(&p.name)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let op = Secret {
            name: p.name,
            hosts: None,
        };
        Ok(client.call(op).await.map_err(not_found_hint)?.into())
    }

    fn summary(out: &SandboxView) -> String {
        format!(
            "Secret detached; sandbox {} has {} left.",
            out.sandbox_id,
            out.secrets.len()
        )
    }
}
