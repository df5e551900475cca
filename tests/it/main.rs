//! Integration tests: the real wasm Worker in workerd (`wrangler dev`), driven over HTTP by raw
//! requests and by rmcp's MCP client. One instance is shared by most tests (each test uses its
//! own ids); tests that restart or reconfigure the Worker start their own.

mod agent_reuse;
mod agent_runs;
mod auth;
mod batches;
mod budgets;
mod by_products;
mod callbacks;
mod conformance;
mod daemon_api;
mod daemon_delete;
mod daemon_limits;
mod daemon_requests;
mod daemon_snapshot;
mod deploy;
mod desktop;
mod durability;
mod eras;
mod exec_tasks;
mod heavy_turns;
mod leftovers;
mod load;
mod oauth;
mod prompts;
mod protocol;
mod resources;
mod resume;
mod run_page;
mod runs;
mod sandboxes;
mod secrets;
mod security;
mod soak;
mod spare_sessions;
mod stopped_turns;
mod storage_faults;
mod streams;
mod tasks;
mod templates;
mod tools_list;
mod turn_end;
mod wait;
mod worker_agent;
mod worker_examples;
mod worker_gate;
mod worker_triggers;
mod workers;

use handoff_tests::worker;

/// Base URL of the shared instance.
pub fn base() -> String {
    worker::shared().url("")
}
