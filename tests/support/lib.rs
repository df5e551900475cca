//! Test support for handoff: starts the real Worker bundle in workerd through `wrangler dev`
//! (one shared instance per test process, plus dedicated ones for restarts and special
//! configuration), talks MCP to it over raw HTTP and through rmcp's client, and provides the
//! local stand-ins for what cannot exist offline.

pub mod blackhole;
pub mod daemon;
pub mod links;
pub mod mcp;
pub mod worker;

pub use mcp::{Mcp, RawResponse};
pub use worker::{Worker, WorkerOptions};

/// The API token every test instance accepts (principal `tests`).
pub const TOKEN: &str = "test-token-0123456789abcdef";
/// A second token (principal `other`) for checks that depend on the caller.
pub const OTHER_TOKEN: &str = "other-token-0123456789abcdef";
/// The secret shared by test Workers and test sandbox daemons.
pub const DAEMON_SECRET: &str = "test-daemon-secret-0123456789abcdef-0123";
/// The signing key of test instances (links).
pub const SIGNING_KEY: &str = "test-signing-key-0123456789abcdef-0123456789";

/// The repository root.
pub fn root() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Into::into).unwrap_or(manifest)
}
