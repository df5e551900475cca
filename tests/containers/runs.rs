//! Delegated runs in real containers: clone → OpenCode → push → pull request, with the scripted
//! model and the local forge reached the way a Cloudflare container reaches the internet (the
//! daemon's egress proxy, the sidecar, workerd's egress service), and a run whose container dies
//! ending with a clear reason instead of hanging.

use crate::{mcp, stack};
use handoff_tests::containers::{container_of, containers_of};
use handoff_tests::runs::{repo_name, status, terminal};
use handoff_tests::stack::{CANARY_ANTHROPIC_KEY, CANARY_GITHUB_TOKEN, PROXY_SECRET};
use serde_json::{json, Value};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(300);

fn sandbox_of(session: &str) -> String {
    format!("sbx_{}", session.trim_start_matches("ses_"))
}

async fn start(mcp: &handoff_tests::Mcp, arguments: Value) -> (String, String) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    (
        out["runId"].as_str().unwrap().to_string(),
        out["sessionId"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn a_run_in_a_container_opens_a_pull_request() {
    let stack = stack();
    let mcp = mcp().await;
    let name = repo_name("box");
    let repository = stack.broken_repo(&name);
    let (run_id, session) = start(
        &mcp,
        json!({"task": "The test in test.sh fails. Fix it. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    let run = mcp.wait_run(&run_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(status(&run), "completed", "{run:#}");
    let result = &run["result"];
    assert_eq!(result["changedFiles"], json!(["add.sh"]), "{result:#}");
    let branch = format!("handoff/{run_id}");
    let pulls: Vec<_> = stack
        .forge
        .pulls()
        .into_iter()
        .filter(|p| p.repo == name)
        .collect();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].head, branch);
    assert_eq!(result["pullRequestUrl"], json!(pulls[0].html_url));
    let pushed = stack
        .forge
        .file_on_branch("acme", &name, &branch, "add.sh")
        .expect("the branch was pushed");
    assert!(pushed.contains("$1 + $2"), "{pushed}");

    // It ran in the session's container, which never saw a real credential.
    let container = container_of(&sandbox_of(&session));
    for secret in [CANARY_ANTHROPIC_KEY, CANARY_GITHUB_TOKEN, PROXY_SECRET] {
        assert!(
            !container.env().iter().any(|e| e.contains(secret)),
            "{secret} in the container's environment"
        );
        let (_, found) = container.exec(
            "0",
            &format!("grep -rls '{secret}' /sandboxes /tmp || true"),
        );
        assert!(found.trim().is_empty(), "{secret} in {found}");
    }
}

#[tokio::test]
async fn a_run_whose_container_dies_fails_with_a_clear_reason() {
    let mcp = mcp().await;
    let (run_id, session) = start(&mcp, json!({"task": "Wait. [scenario:slow]"})).await;
    let run = mcp
        .wait_run(&run_id, RUN_TIMEOUT, |r| {
            r["progress"]["phase"] == "working" || terminal(r)
        })
        .await;
    assert_eq!(status(&run), "running", "{run:#}");
    for container in containers_of(&sandbox_of(&session)) {
        container.kill();
    }
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(120), terminal)
        .await;
    assert_eq!(status(&run), "failed", "{run:#}");
    let error = &run["result"]["error"];
    assert_eq!(error["code"], "sandbox_lost", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("container"), "{error}");
}
