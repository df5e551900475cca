//! `tools/list`: every tool has a description, schemas generated from its Rust types, and
//! annotations.

use crate::base;
use handoff_tests::Mcp;
use serde_json::{json, Value};

#[tokio::test]
async fn tools_have_descriptions_schemas_and_annotations() {
    let mcp = Mcp::connect(&base()).await;
    let listed = mcp.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "opencode_run_task",
            "opencode_get_result",
            "opencode_list_runs",
            "opencode_cancel_run",
            "opencode_list_sessions",
            "opencode_wait",
            "sandbox_create",
            "sandbox_list",
            "sandbox_info",
            "sandbox_update",
            "sandbox_fork",
            "sandbox_template_create",
            "sandbox_template_list",
            "sandbox_template_delete",
            "sandbox_exec",
            "sandbox_files_read",
            "sandbox_files_write",
            "sandbox_files_list",
            "sandbox_files_download_dir",
            "sandbox_pause",
            "sandbox_resume",
            "sandbox_delete",
            "sandbox_preview_url",
            "sandbox_network_log",
            "sandbox_computer",
            "secret_list",
            "sandbox_attach_secret",
            "sandbox_detach_secret",
            "workers_list",
            "workers_get",
            "workers_deploy",
            "workers_versions",
            "workers_rollback",
            "workers_delete",
            "workers_run",
            "workers_runs",
            "workers_run_get",
            "workers_run_cancel",
            "workers_run_replay",
            "workers_approvals",
            "workers_approve",
            "workers_reject",
            "workers_secrets_list",
            "workers_secret_set",
            "workers_secret_delete"
        ]
    );
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let description = tool["description"].as_str().unwrap_or_default();
        assert!(description.len() > 40, "{name} description: {description}");
        assert!(tool["title"].is_string(), "{name} title");
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        let annotations = &tool["annotations"];
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint"] {
            assert!(annotations[hint].is_boolean(), "{name} {hint}");
        }
        for (field, schema) in tool["inputSchema"]["properties"].as_object().unwrap() {
            assert!(
                schema["description"].is_string(),
                "{name}.{field} has a description from its doc comment"
            );
        }
    }
    // Every tool says what it does itself (tools sharing a parameter type included).
    let mut descriptions: Vec<&str> = tools
        .iter()
        .map(|t| t["description"].as_str().unwrap_or_default())
        .collect();
    descriptions.sort();
    descriptions.dedup();
    assert_eq!(
        descriptions.len(),
        tools.len(),
        "two tools share a description"
    );
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    // A tool without parameters lists empty properties.
    let no_params = by_name("workers_secrets_list");
    assert_eq!(no_params["inputSchema"]["properties"], json!({}));
    let run_task = by_name("opencode_run_task");
    let task: &Value = &run_task["inputSchema"]["properties"]["task"];
    assert_eq!(task["maxLength"], 50000);
    assert_eq!(task["minLength"], 1);
    assert_eq!(run_task["inputSchema"]["required"], json!(["task"]));
    assert_eq!(run_task["annotations"]["readOnlyHint"], false);
    let get = by_name("opencode_get_result");
    assert_eq!(get["annotations"]["readOnlyHint"], true);
    for field in [
        "runId",
        "status",
        "progress",
        "result",
        "createdAt",
        "completedAt",
    ] {
        assert!(
            get["outputSchema"]["properties"][field].is_object(),
            "get_result output has {field}"
        );
    }
    let list = by_name("opencode_list_runs");
    let limit = &list["inputSchema"]["properties"]["limit"];
    assert_eq!(
        (limit["minimum"].clone(), limit["maximum"].clone()),
        (json!(1), json!(100))
    );
    assert_eq!(
        by_name("opencode_cancel_run")["annotations"]["destructiveHint"],
        true
    );
}

/// Every string under `description` and every `format` in a schema, at any depth, with where.
fn texts(value: &Value, at: &str, out: &mut Vec<(String, String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let here = format!("{at}.{key}");
                if let (Some(text), "description" | "format") = (v.as_str(), key.as_str()) {
                    out.push((here.clone(), key.clone(), text.to_string()));
                }
                texts(v, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                texts(v, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn schemas_carry_no_wrapped_lines_or_rust_number_formats() {
    let mcp = Mcp::connect(&base()).await;
    let listed = mcp.request("tools/list", json!({})).await;
    let mut found = Vec::new();
    texts(&listed["result"]["tools"], "tools", &mut found);
    assert!(found.iter().any(|(_, key, _)| key == "description"));
    for (at, key, text) in &found {
        if key == "format" {
            // JSON Schema's own formats only: the TypeScript SDK warns about any other.
            assert!(
                [
                    "date-time",
                    "date",
                    "time",
                    "uri",
                    "email",
                    "uuid",
                    "hostname",
                    "ipv4",
                    "ipv6"
                ]
                .contains(&text.as_str()),
                "{at}: format {text:?}"
            );
        } else {
            let lone_breaks = text.replace("\n\n", "").contains('\n');
            assert!(!lone_breaks, "{at}: a wrapped line in {text:?}");
        }
    }
    // Unsigned fields say so with a minimum instead.
    let tools = listed["result"]["tools"].as_array().unwrap();
    let exec = tools.iter().find(|t| t["name"] == "sandbox_exec").unwrap();
    let exit = &exec["outputSchema"]["properties"]["durationMs"];
    assert_eq!(exit["minimum"], 0, "{exit}");
    assert!(exit.get("format").is_none(), "{exit}");
}
