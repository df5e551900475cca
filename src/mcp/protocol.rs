//! Protocol versions, version negotiation and the `initialize` result.

use rmcp::model::{Implementation, InitializeResult, ProtocolVersion, ServerCapabilities};

/// Versions this server speaks, newest first.
pub const SUPPORTED: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// What a request without an `MCP-Protocol-Version` header is assumed to speak (per the spec).
pub const ASSUMED_WITHOUT_HEADER: &str = "2025-03-26";

/// The one initialize-era version with tasks (experimental there).
pub const TASKS_VERSION: &str = "2025-11-25";

pub fn is_supported(version: &str) -> bool {
    SUPPORTED.contains(&version)
}

/// The client's version when supported, else the newest this server speaks.
pub fn negotiate(requested: &str) -> &'static str {
    SUPPORTED
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(SUPPORTED[0])
}

/// From 2025-11-25 on, invalid tool arguments are tool execution errors (`isError`) so the model
/// can correct itself; earlier versions get JSON-RPC -32602.
pub fn argument_errors_are_tool_errors(version: &str) -> bool {
    version >= "2025-11-25"
}

pub const INSTRUCTIONS: &str = "\
handoff runs long coding tasks for you in a cloud sandbox with the OpenCode agent: it clones the \
repository, edits, runs the tests, commits, pushes a branch and opens a pull request.

Workflow:
1. Call opencode_run_task with the task in plain words (and the https repository URL). It returns \
a runId at once; the work continues without you.
2. Poll opencode_get_result with the runId, or call opencode_wait, which returns as soon as the \
run moves on (at most 50 seconds per call). Runs take minutes to hours: poll every 30-60 seconds \
at first, then less often. status goes queued -> starting -> running -> completed | failed | \
cancelled; progress.phase and progress.message say what the agent is doing.
3. When completed, result.summary says what was done and result.pullRequestUrl links the pull \
request. When failed, result.error.code and result.error.message say why and what to do.

Runs survive disconnects: any device can poll them later. Use opencode_list_runs to find runs \
(newest first, paginated with nextCursor) and opencode_list_sessions for work sessions. Pass \
sessionId to continue in the same sandbox and agent conversation. Pass an idempotencyKey when \
retrying a call you are unsure went through: the same key never starts a second run. \
opencode_cancel_run stops a run. webUiUrl opens a page that shows the run live.";

/// What this server offers, in every era (tasks are added per era: see
/// [`legacy_tasks_capability`] and `modern::discover`).
pub fn capabilities() -> ServerCapabilities {
    let mut capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_resources()
        .enable_resources_subscribe()
        .enable_prompts()
        .enable_completions()
        .build();
    if let Some(resources) = capabilities.resources.as_mut() {
        resources.list_changed = Some(false);
    }
    capabilities
}

/// The 2025-11-25 `tasks` capability: listing, cancelling, and task-augmented `tools/call`.
pub fn legacy_tasks_capability() -> serde_json::Value {
    serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Who this server is, in every era.
pub fn server_info() -> Implementation {
    let mut info = Implementation::new("handoff", env!("CARGO_PKG_VERSION"));
    info.title = Some("handoff — long coding tasks in a sandbox".into());
    info
}

pub fn initialize_result(version: &'static str) -> InitializeResult {
    InitializeResult::new(capabilities())
        .with_protocol_version(rmcp_version(version))
        .with_server_info(server_info())
        .with_instructions(INSTRUCTIONS)
}

/// rmcp's constant for one of `SUPPORTED`.
fn rmcp_version(version: &str) -> ProtocolVersion {
    match version {
        "2025-03-26" => ProtocolVersion::V_2025_03_26,
        "2025-06-18" => ProtocolVersion::V_2025_06_18,
        _ => ProtocolVersion::V_2025_11_25,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_fits_in_a_signed_session_id() {
        let key = [7u8; 32];
        for version in SUPPORTED {
            let id = crate::mcp_session_ids::issue(&key, "p", version, 1);
            let signed = crate::mcp_session_ids::parse(&id).expect(version);
            assert_eq!(signed.version, version);
            assert!(signed.is_for(&key, "p"));
        }
    }

    #[test]
    fn negotiation_answers_supported_versions_and_falls_back_to_newest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2026-07-28"), "2025-11-25");
        assert_eq!(negotiate("1999-01-01"), "2025-11-25");
    }
}
