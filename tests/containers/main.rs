//! The production path, for real: every sandbox in a container of its own, built from
//! `container/Dockerfile` and started by workerd's container runtime (`[dev] enable_containers`),
//! with the project's egress sidecar beside it. One Worker serves every test (its first start
//! builds the image); tests isolate themselves with their own sandboxes, runs and repositories.
//! Run by the container lane of `cargo xtask test`.

mod desktop;
mod lifecycle;
mod runs;
mod sandboxes;
mod secrets;
mod sizes;
mod workers;

use handoff_tests::stack::RunStack;
use handoff_tests::worker::stop_group_at_exit;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The stack shared by the container tests.
pub fn stack() -> &'static RunStack {
    static STACK: OnceLock<RunStack> = OnceLock::new();
    STACK.get_or_init(|| {
        // The daemons in the containers trust the test CA for upstream HTTPS (secrets are
        // swapped in on connections they open themselves), as a deployment trusts a private
        // forge's; one line in `.dev.vars`.
        let upstream_ca = format!(
            "\"{}\"",
            handoff_tests::tls::ca()
                .pem()
                .trim_end()
                .replace('\n', "\\n")
        );
        let stack = RunStack::in_containers(&[
            ("RUN_STALL_TIMEOUT_SECONDS", "60"),
            ("HANDOFF_CONTAINER_UPSTREAM_CA", &upstream_ca),
        ]);
        stop_group_at_exit(&stack.worker);
        stack
    })
}

pub async fn mcp() -> Mcp {
    Mcp::connect(&stack().url()).await
}

pub async fn create(mcp: &Mcp, arguments: Value) -> String {
    let out = mcp.call_ok("sandbox_create", arguments).await;
    out["sandboxId"].as_str().expect("sandboxId").to_string()
}

pub async fn exec(mcp: &Mcp, id: &str, command: &str) -> Value {
    mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": command}))
        .await
}

/// `sandbox_exec` right after the test killed the sandbox's container, as a client runs it: a
/// command that reaches the dead container before workerd has seen it die fails with a
/// temporary error (its text says to retry), and is sent again after a pause, a few times at
/// most; any other error fails the test. What finally answers must be a new container holding
/// the last snapshot.
pub async fn exec_after_loss(mcp: &Mcp, id: &str, command: &str) -> Value {
    let args = json!({"sandboxId": id, "command": command});
    for pause_s in [1, 2, 4, 8] {
        let response = mcp.call("sandbox_exec", args.clone()).await;
        let result = &response["result"];
        if result["isError"] != json!(true) {
            return result["structuredContent"].clone();
        }
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("retry"), "not a temporary error: {response}");
        tokio::time::sleep(std::time::Duration::from_secs(pause_s)).await;
    }
    mcp.call_ok("sandbox_exec", args).await
}

pub fn stdout(out: &Value) -> String {
    out["stdout"].as_str().unwrap_or_default().to_string()
}
