//! Both MCP eras on one `/mcp`, chosen per request: 2026-07-28 requests (protocol version in
//! `params._meta`, mirrored headers, no session) beside the initialize era's sessions.

use crate::base;
use handoff_tests::mcp::{send, RawResponse};
use handoff_tests::{Mcp, TOKEN};
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";

fn envelope(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "handoff-tests", "version": "1"}
    })
}

/// A modern request: `params` gets the envelope; the headers mirror the body unless `headers`
/// says otherwise (an empty value leaves a header out).
async fn modern(method: &str, mut params: Value, headers: &[(&str, &str)]) -> RawResponse {
    params["_meta"] = envelope(MODERN);
    let name = params["name"].as_str().map(str::to_string);
    let body = json!({"jsonrpc": "2.0", "id": "m-1", "method": method, "params": params});
    let mut extra: Vec<(&str, &str)> = vec![("mcp-method", method)];
    if let Some(name) = &name {
        extra.push(("mcp-name", name));
    }
    extra.retain(|(k, _)| !headers.iter().any(|(h, _)| h == k));
    extra.extend(headers.iter().filter(|(_, v)| !v.is_empty()));
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", base());
    send(
        &http,
        &endpoint,
        TOKEN,
        None,
        Some(MODERN),
        &body.to_string(),
        &extra,
    )
    .await
}

#[tokio::test]
async fn a_discover_probe_is_answered_and_modern_requests_need_no_session() {
    let discovered = modern("server/discover", json!({}), &[]).await;
    assert_eq!(discovered.status, 200, "{}", discovered.body);
    let result = &discovered.json()["result"];
    assert_eq!(result["resultType"], "complete", "{result}");
    let versions = result["supportedVersions"].as_array().unwrap();
    assert_eq!(versions[0], MODERN);
    assert!(versions.contains(&json!("2025-11-25")), "{result}");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "handoff"
    );
    assert!(result["instructions"]
        .as_str()
        .unwrap()
        .contains("opencode_run_task"));
    assert!(result["ttlMs"].as_u64().unwrap() > 0 && result["cacheScope"] == "public");
    assert!(
        discovered.header("mcp-session-id").is_none(),
        "no sessions in this era"
    );

    let listed = modern("tools/list", json!({}), &[]).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let result = &listed.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["tools"].as_array().unwrap().len(), 45);
    assert_eq!(result["cacheScope"], "public");
    assert!(result["ttlMs"].as_u64().unwrap() > 0);

    let started = modern(
        "tools/call",
        json!({"name": "opencode_run_task", "arguments": {"task": "A modern client's task"}}),
        &[],
    )
    .await;
    assert_eq!(started.status, 200, "{}", started.body);
    let result = &started.json()["result"];
    assert_eq!(result["resultType"], "complete", "{result}");
    let run_id = result["structuredContent"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let got = modern(
        "tools/call",
        json!({"name": "opencode_get_result", "arguments": {"runId": run_id}}),
        &[],
    )
    .await;
    assert_eq!(
        got.json()["result"]["structuredContent"]["runId"],
        json!(run_id)
    );

    // The run is the same run in the other era.
    let legacy = Mcp::connect(&base()).await;
    assert_eq!(legacy.get_run(&run_id).await["runId"], json!(run_id));

    // Methods the era dropped are unknown in it.
    let ping = modern("ping", json!({}), &[]).await;
    assert_eq!(ping.status, 404, "{}", ping.body);
    assert_eq!(ping.error_code(), -32601);
}

#[tokio::test]
async fn the_modern_ladder_refuses_with_the_eras_codes_and_statuses() {
    let call = json!({"name": "opencode_list_runs", "arguments": {}});
    // The envelope first: both required keys.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}
    }});
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", base());
    let no_caps = send(
        &http,
        &endpoint,
        TOKEN,
        None,
        Some(MODERN),
        &body.to_string(),
        &[("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!(no_caps.status, 400, "{}", no_caps.body);
    assert_eq!(no_caps.error_code(), -32602);
    assert!(
        no_caps.body.contains("clientCapabilities"),
        "{}",
        no_caps.body
    );

    // Then the mirrored headers.
    for (headers, says) in [
        (vec![("mcp-method", "")], "Mcp-Method"),
        (vec![("mcp-method", "tools/list")], "Mcp-Method"),
        (vec![("mcp-name", "sandbox_exec")], "Mcp-Name"),
        (vec![("mcp-name", "")], "Mcp-Name"),
        (
            vec![("mcp-protocol-version", "2025-11-25")],
            "MCP-Protocol-Version",
        ),
    ] {
        let refused = modern("tools/call", call.clone(), &headers).await;
        assert_eq!(refused.status, 400, "{headers:?}: {}", refused.body);
        assert_eq!(
            refused.error_code(),
            -32020,
            "{headers:?}: {}",
            refused.body
        );
        assert!(refused.body.contains(says), "{headers:?}: {}", refused.body);
    }

    // Then the version: one this server does not speak names the ones it does.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {
        "_meta": envelope("2099-01-01")
    }});
    let future = send(
        &http,
        &endpoint,
        TOKEN,
        None,
        Some("2099-01-01"),
        &body.to_string(),
        &[("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!(future.status, 400, "{}", future.body);
    assert_eq!(future.error_code(), -32022);
    let data = &future.json()["error"]["data"];
    assert_eq!(data["requested"], "2099-01-01");
    let supported = data["supported"].as_array().unwrap();
    assert!(
        supported.contains(&json!(MODERN)) && supported.contains(&json!("2025-11-25")),
        "{data}"
    );

    // Credentials are still required.
    let anonymous = send(
        &http,
        &endpoint,
        "not-a-token",
        None,
        Some(MODERN),
        &body.to_string(),
        &[],
    )
    .await;
    assert_eq!(anonymous.status, 401);
}

/// The interpreter of the Python MCP SDK environment `cargo xtask test` makes.
fn python() -> std::path::PathBuf {
    match std::env::var_os("HANDOFF_PYTHON") {
        Some(path) => path.into(),
        None => {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/py-mcp/bin/python")
        }
    }
}

#[tokio::test]
async fn the_python_sdk_settles_on_2026_07_28_by_itself_and_still_speaks_the_old_era() {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run the tests with `cargo xtask test`, which installs the Python MCP SDK",
        python.display()
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("py/eras_client.py");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("{}/mcp", base()))
        .arg(TOKEN)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(runs.len(), 2, "{stdout}");
    let (auto, legacy) = (&runs[0], &runs[1]);
    assert_eq!(
        auto["version"], MODERN,
        "auto mode must negotiate the new era: {auto}"
    );
    assert_eq!(legacy["version"], "2025-11-25", "{legacy}");
    for run in &runs {
        assert_eq!(run["tools"], 45, "{run}");
        assert_eq!(run["isError"], false, "{run}");
        assert_eq!(run["runId"], run["readBack"], "{run}");
        assert_eq!(run["readRunId"], run["runId"], "the run resource: {run}");
        assert_eq!(
            run["templates"],
            json!([
                "handoff://runs/{runId}",
                "handoff://runs/{runId}/diff",
                "handoff://runs/{runId}/transcript",
                "handoff://sandboxes/{sandboxId}/files/{+path}"
            ]),
            "{run}"
        );
        assert_eq!(
            run["prompts"],
            json!(["continue_session", "delegate", "review_run"]),
            "{run}"
        );
        assert!(
            run["promptText"]
                .as_str()
                .unwrap()
                .contains("fix the flaky test"),
            "{run}"
        );
        assert_eq!(run["completes"], true, "{run}");
    }
    let uri = format!("handoff://runs/{}", auto["runId"].as_str().unwrap());
    assert_eq!(auto["listenHonored"], json!([uri]), "{auto}");
}

#[tokio::test]
async fn a_modern_single_page_list_refuses_a_cursor() {
    for method in ["tools/list", "prompts/list", "resources/templates/list"] {
        let refused = modern(method, json!({"cursor": "eyJwYWdlIjogMn0"}), &[]).await;
        assert_eq!(refused.error_code(), -32602, "{method}: {}", refused.body);
        let listed = modern(method, json!({}), &[]).await;
        assert_eq!(listed.status, 200, "{method}: {}", listed.body);
        assert!(
            listed.json()["result"].is_object(),
            "{method}: {}",
            listed.body
        );
    }
}
