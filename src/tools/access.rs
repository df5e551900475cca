//! What the tools share to reach objects: a sandbox's object and the registry (each after the
//! caller's MCP session is checked), "not found" made actionable, and annotations.

use super::sandbox_params::check_sandbox_id;
use super::Ctx;
use crate::error::{Error, ErrorKind, Result};
use crate::registry::api::{self as registry, RegistryClient};
use crate::sandbox::api::{self as sandbox_api, SandboxClient};
use rmcp::model::ToolAnnotations;

/// Checks the caller's MCP session and returns the client of a sandbox object.
pub(super) async fn sandbox(ctx: &Ctx<'_>, id: &str) -> Result<SandboxClient> {
    check_sandbox_id(id)?;
    ctx.ledger.check_mcp_session().await?;
    sandbox_api::client(ctx.env, id)
}

/// Adds what to do next to a "not found".
pub(super) fn not_found_hint(e: Error) -> Error {
    if e.kind == ErrorKind::NotFound && e.message.starts_with("sandbox") {
        Error::not_found(format!(
            "{}; call sandbox_list to see your sandboxes",
            e.message
        ))
    } else {
        e
    }
}

/// The registry, after the caller's MCP session is checked.
pub(super) async fn registry(ctx: &Ctx<'_>) -> Result<RegistryClient> {
    ctx.ledger.check_mcp_session().await?;
    registry::client(ctx.env)
}

#[cfg_attr(target_arch = "wasm32", allow(dead_code))] // listed from catalog.json there
pub(super) fn annotations(
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}
