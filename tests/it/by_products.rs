//! What builds and tests leave behind (`__pycache__/`, `*.pyc`, `node_modules/`, `.DS_Store`)
//! never reaches a pull request — neither through the agent's own commits nor through handoff's
//! — and the result says what was left out.

use handoff_tests::runs::{repo_name, status, terminal};
use handoff_tests::{stack, Mcp};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn by_products_stay_out_of_the_pull_request_and_the_result_lists_them() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let name = repo_name("byproducts");
    let repository = stack.broken_repo(&name);
    let started = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Fix test.sh. [scenario:by-products]", "repository": repository}),
        )
        .await;
    let run_id = started["runId"].as_str().unwrap().to_string();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(180), terminal)
        .await;
    assert_eq!(status(&run), "completed", "{run:#}");
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
