//! Real third-party MCP tooling against handoff: the official conformance suite
//! (`@modelcontextprotocol/conformance`) and the MCP Inspector's CLI. The suite sends no
//! Authorization header, so it talks to handoff through a proxy that adds the test token.

use crate::base;
use handoff_tests::mcp::run_node;
use handoff_tests::{auth_proxy, TOKEN};
use std::time::Duration;

/// Runs one server scenario of the conformance suite; returns whether it passed and its output.
async fn scenario(url: &str, name: &str) -> (bool, String) {
    let cli = "node_modules/@modelcontextprotocol/conformance/dist/index.js";
    let args = ["server", "--url", url, "--scenario", name];
    let (ok, stdout, stderr) = run_node(cli, &args, &[], Duration::from_secs(120)).await;
    (ok, format!("{stdout}\n{stderr}"))
}

#[tokio::test]
async fn the_conformance_suite_passes_the_scenarios_that_apply() {
    let proxy = auth_proxy::start(&base(), TOKEN);
    let url = format!("{proxy}/mcp");
    let mut failed = Vec::new();
    // The generic scenarios. The others exercise the reference server's own fixtures (tools,
    // prompts and test:// resources handoff does not have) or features handoff does not use
    // (logging, sampling, elicitation); README.md lists them with the reason for each.
    for name in [
        "server-initialize",
        "ping",
        "tools-list",
        "completion-complete",
        "resources-list",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        let (ok, output) = scenario(&url, name).await;
        println!(
            "== {name}: {}\n{output}",
            if ok { "passed" } else { "FAILED" }
        );
        if !ok {
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "conformance scenarios failed: {failed:?}"
    );
}

/// One call through the MCP Inspector's CLI; returns its JSON output.
async fn inspector(args: &[&str]) -> serde_json::Value {
    let cli = "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js";
    let url = format!("{}/mcp", base());
    let auth = format!("Authorization: Bearer {TOKEN}");
    let mut all = vec!["--cli", &url, "--transport", "http", "--header", &auth];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = run_node(cli, &all, &[], Duration::from_secs(60)).await;
    assert!(ok, "inspector {args:?}: {stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("inspector {args:?} ({e}): {stdout}"))
}

#[tokio::test]
async fn the_mcp_inspector_cli_lists_calls_reads_and_fills_prompts() {
    let tools = inspector(&["--method", "tools/list"]).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names.len(), 45, "{tools}");
    assert!(names.contains(&"opencode_run_task"));
    let started = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "opencode_run_task",
        "--tool-arg",
        "task=A task from the MCP Inspector",
    ])
    .await;
    let run_id = started["structuredContent"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let uri = format!("handoff://runs/{run_id}");
    let read = inspector(&["--method", "resources/read", "--uri", &uri]).await;
    let run: serde_json::Value =
        serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(run["task"], "A task from the MCP Inspector");
    let templates = inspector(&["--method", "resources/templates/list"]).await;
    assert_eq!(templates["resourceTemplates"].as_array().unwrap().len(), 4);
    let prompt = inspector(&[
        "--method",
        "prompts/get",
        "--prompt-name",
        "delegate",
        "--prompt-args",
        "task=fix the flaky test",
    ])
    .await;
    assert!(prompt["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("fix the flaky test"));
}
