//! What builds and tests leave behind (`__pycache__/`, `*.pyc`, `node_modules/`, `.DS_Store`)
//! never reaches a pull request — neither through the agent's own commits nor through handoff's
//! — and the result says what was left out. Nor does a git lock the agent's killed git left
//! behind keep its work from being committed.

use handoff_tests::runs::{repo_name, status, terminal};
use handoff_tests::stack::{self, RunStack};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

/// Runs the fix-test.sh task on a new broken repository with the model's `scenario`, to its
/// end, which must be `completed`; returns (repository name, runId, run).
async fn fixed_with(stack: &RunStack, scenario: &str) -> (String, String, Value) {
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name(scenario);
    let repository = stack.broken_repo(&name);
    let task = format!("Fix test.sh. [scenario:{scenario}]");
    let started = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": task, "repository": repository}),
        )
        .await;
    let run_id = started["runId"].as_str().unwrap().to_string();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(180), terminal)
        .await;
    assert_eq!(status(&run), "completed", "{run:#}");
    (name, run_id, run)
}

#[tokio::test]
async fn by_products_stay_out_of_the_pull_request_and_the_result_lists_them() {
    let stack = stack::shared();
    let (name, run_id, run) = fixed_with(stack, "by-products").await;
    let result = &run["result"];
    assert_eq!(
        result["changedFiles"],
        json!(["NOTES.md", "add.sh"]),
        "{result:#}"
    );
    assert_eq!(
        result["leftOut"],
        json!([".DS_Store", "__pycache__/", "helper.pyc", "node_modules/"]),
        "{result:#}"
    );
    let branch = format!("handoff/{run_id}");
    for path in [
        "__pycache__/add.cpython-311.pyc",
        "node_modules/left-pad/index.js",
        ".DS_Store",
        "helper.pyc",
    ] {
        assert!(
            stack
                .forge
                .file_on_branch("acme", &name, &branch, path)
                .is_none(),
            "{path} was pushed"
        );
    }
    assert!(stack
        .forge
        .file_on_branch("acme", &name, &branch, "NOTES.md")
        .is_some());
}

#[tokio::test]
async fn a_git_lock_the_agent_left_behind_does_not_keep_its_work_from_the_pull_request() {
    let stack = stack::shared();
    let (name, run_id, run) = fixed_with(stack, "stale-lock").await;
    assert_eq!(run["result"]["changedFiles"], json!(["add.sh"]), "{run:#}");
    assert!(run["result"]["pullRequestUrl"].is_string(), "{run:#}");
    let branch = format!("handoff/{run_id}");
    let fixed = stack.forge.file_on_branch("acme", &name, &branch, "add.sh");
    assert_eq!(fixed.as_deref(), Some("#!/bin/sh\necho $(( $1 + $2 ))\n"));
}
