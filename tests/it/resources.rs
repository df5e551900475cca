//! MCP resources: runs (`handoff://runs/{id}`, `/transcript`, `/diff`) and sandbox files
//! (`handoff://sandboxes/{id}/files/{path}`), their templates, and what bad URIs get.

use crate::base;
use handoff_tests::Mcp;
use serde_json::{json, Value};

async fn read(mcp: &Mcp, uri: &str) -> Value {
    mcp.request("resources/read", json!({"uri": uri})).await
}

#[tokio::test]
async fn runs_are_resources_listed_newest_first_and_read_as_json() {
    let mcp = Mcp::connect(&base()).await;
    let init_caps = mcp.request("resources/templates/list", json!({})).await;
    let templates = init_caps["result"]["resourceTemplates"].as_array().unwrap();
    assert_eq!(templates.len(), 4, "{init_caps}");
    let (run_id, _) = mcp.start_run("Be a resource").await;
    let listed = mcp.request("resources/list", json!({})).await;
    let resources = listed["result"]["resources"].as_array().unwrap();
    let uri = format!("handoff://runs/{run_id}");
    let mine = resources
        .iter()
        .find(|r| r["uri"] == uri.as_str())
        .unwrap_or_else(|| panic!("the new run is listed: {listed}"));
    assert_eq!(mine["title"], "Be a resource");
    assert_eq!(mine["mimeType"], "application/json");
    let content = &read(&mcp, &uri).await["result"]["contents"][0];
    assert_eq!(content["uri"], uri.as_str());
    let run: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(run["runId"], run_id.as_str());
    assert_eq!(run["task"], "Be a resource");
}

#[tokio::test]
async fn missing_and_malformed_resources_get_clear_errors() {
    let mcp = Mcp::connect(&base()).await;
    let (run_id, _) = mcp.start_run("No transcript here").await;
    let nothing_yet = read(&mcp, &format!("handoff://runs/{run_id}/diff")).await;
    assert_eq!(nothing_yet["error"]["code"], -32002, "{nothing_yet}");
    assert!(nothing_yet["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no diff"));
    let unknown = read(&mcp, "handoff://runs/run_0123456789abcdefghjkmnpqrs").await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    for bad in [
        "handoff://runs/../../etc/passwd",
        "handoff://runs/run_x",
        &format!("handoff://runs/{run_id}/secrets"),
        "file:///etc/passwd",
        "handoff://sandboxes/sbx_nope/files/a",
    ] {
        let refused = read(&mcp, bad).await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
    }
    let no_uri = mcp.request("resources/read", json!({})).await;
    assert_eq!(no_uri["error"]["code"], -32602);
    let bad_cursor = mcp
        .request("resources/list", json!({"cursor": "garbage"}))
        .await;
    assert_eq!(bad_cursor["error"]["code"], -32602);
}

#[tokio::test]
async fn sandbox_files_are_resources_and_cannot_escape_the_workspace() {
    let mcp = Mcp::connect(&handoff_tests::worker::with_sandboxes().1.url("")).await;
    let created = mcp.call_ok("sandbox_create", json!({})).await;
    let sandbox = created["sandboxId"].as_str().unwrap();
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": sandbox, "command": "mkdir -p notes && printf 'hello resource' > 'notes/a b.txt' && printf '\\377\\376' > blob.bin"}),
    )
    .await;
    let text = read(
        &mcp,
        &format!("handoff://sandboxes/{sandbox}/files/notes/a%20b.txt"),
    )
    .await;
    let content = &text["result"]["contents"][0];
    assert_eq!(content["text"], "hello resource", "{text}");
    assert_eq!(content["mimeType"], "text/plain");
    let blob = read(
        &mcp,
        &format!("handoff://sandboxes/{sandbox}/files/blob.bin"),
    )
    .await;
    assert_eq!(blob["result"]["contents"][0]["blob"], "//4=", "{blob}");
    for escape in [
        "../../etc/passwd",
        "%2E%2E/%2E%2E/etc/passwd",
        "/etc/passwd",
    ] {
        let refused = read(
            &mcp,
            &format!("handoff://sandboxes/{sandbox}/files/{escape}"),
        )
        .await;
        assert_eq!(refused["error"]["code"], -32602, "{escape}: {refused}");
    }
    mcp.call_ok("sandbox_delete", json!({"sandboxId": sandbox}))
        .await;
}

/// tools/list, prompts/list and resources/templates/list fit in one page and never hand out a
/// cursor, so a cursor sent for them is invalid (-32602, as the spec asks), in both initialize
/// era versions; `null` is no cursor. An unknown method's error names the methods there are.
#[tokio::test]
async fn single_page_lists_refuse_a_cursor_and_unknown_methods_name_those_there_are() {
    for version in ["2025-06-18", "2025-11-25"] {
        let mcp = Mcp::connect_as(&base(), handoff_tests::TOKEN, version).await;
        for (method, key) in [
            ("tools/list", "tools"),
            ("prompts/list", "prompts"),
            ("resources/templates/list", "resourceTemplates"),
        ] {
            let refused = mcp
                .request(method, json!({"cursor": "eyJwYWdlIjogMn0"}))
                .await;
            assert_eq!(
                refused["error"]["code"], -32602,
                "{version} {method}: {refused}"
            );
            let message = refused["error"]["message"].as_str().unwrap();
            assert!(message.contains("omit the cursor"), "{message}");
            for params in [json!({}), json!({"cursor": null})] {
                let listed = mcp.request(method, params).await;
                assert!(
                    listed["result"][key]
                        .as_array()
                        .is_some_and(|a| !a.is_empty()),
                    "{version} {method}: {listed}"
                );
                assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
            }
        }
        let unknown = mcp.request("no/such/method", json!({})).await;
        assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
        let message = unknown["error"]["message"].as_str().unwrap();
        for method in ["resources/read", "prompts/get", "completion/complete"] {
            assert!(message.contains(method), "{version}: {message}");
        }
        assert_eq!(
            message.contains("tasks/list"),
            version == "2025-11-25",
            "tasks only from 2025-11-25: {message}"
        );
    }
}
