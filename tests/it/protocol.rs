//! Streamable HTTP and JSON-RPC edges: versions, sessions, headers, body cap, errors, SSE.

use crate::base;
use handoff_tests::mcp::{read, rmcp_client, send};
use handoff_tests::{Mcp, TOKEN};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use serde_json::{json, Value};

async fn initialize(version: &str) -> (u16, Value, Option<String>) {
    let body = json!({
        "jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    });
    let r = send(
        &reqwest::Client::new(),
        &format!("{}/mcp", base()),
        TOKEN,
        None,
        None,
        &body.to_string(),
        &[],
    )
    .await;
    let session = r.header("mcp-session-id");
    (r.status, r.json(), session)
}

#[tokio::test]
async fn initialize_negotiates_the_version() {
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let (status, body, session) = initialize(asked).await;
        assert_eq!(status, 200, "{body}");
        let result = &body["result"];
        assert_eq!(result["protocolVersion"], answered, "asked {asked}");
        assert_eq!(body["id"], "init");
        assert_eq!(result["serverInfo"]["name"], "handoff");
        assert!(result["capabilities"]["tools"].is_object());
        let instructions = result["instructions"].as_str().unwrap_or_default();
        assert!(
            instructions.contains("opencode_get_result"),
            "{instructions}"
        );
        let session = session.expect("session id");
        assert!(session.starts_with("mcp_") && session.bytes().all(|b| b.is_ascii_graphic()));
    }
}

#[tokio::test]
async fn initialize_with_bad_params_names_the_field() {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}});
    let r = send(
        &reqwest::Client::new(),
        &format!("{}/mcp", base()),
        TOKEN,
        None,
        None,
        &body.to_string(),
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.error_code(), -32602);
    assert!(r.body.contains("protocolVersion"), "{}", r.body);
}

/// `DELETE /mcp` for `session` with the owner's token.
async fn end_session(
    http: &reqwest::Client,
    endpoint: &str,
    session: String,
) -> handoff_tests::mcp::RawResponse {
    read(
        http.delete(endpoint)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("mcp-session-id", session)
            .send()
            .await
            .expect("DELETE"),
    )
    .await
}

#[tokio::test]
async fn sessions_are_required_checked_and_ended_by_delete() {
    let mcp = Mcp::connect(&base()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", base());

    let missing = send(
        &http,
        &endpoint,
        TOKEN,
        None,
        Some("2025-11-25"),
        &ping,
        &[],
    )
    .await;
    assert_eq!(missing.status, 400, "{}", missing.body);
    assert!(missing.body.contains("Mcp-Session-Id"));

    let unknown = send(
        &http,
        &endpoint,
        TOKEN,
        Some("mcp_00000000000000000000000000"),
        None,
        &ping,
        &[],
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let garbage = send(
        &http,
        &endpoint,
        TOKEN,
        Some("../../etc/passwd"),
        None,
        &ping,
        &[],
    )
    .await;
    assert_eq!(garbage.status, 404);

    assert_eq!(mcp.request("ping", json!({})).await["result"], json!({}));

    // Another caller cannot use this session.
    let foreign = send(
        &http,
        &endpoint,
        handoff_tests::OTHER_TOKEN,
        Some(&mcp.session),
        None,
        &ping,
        &[],
    )
    .await;
    assert_eq!(foreign.status, 404);

    let delete = |session: String| end_session(&http, &endpoint, session);
    let before = mcp
        .post(&json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"secret_list","arguments":{}}}).to_string(), &[])
        .await;
    assert_eq!(before.status, 200, "{}", before.body);
    // `tools/list` is answered from a cache of its encoded result: the request's own id goes in.
    let list = json!({"jsonrpc":"2.0","id":"list-1","method":"tools/list"}).to_string();
    let listed = mcp.post(&list, &[]).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["id"], "list-1");
    assert!(listed.json()["result"]["tools"].as_array().unwrap().len() > 40);
    assert_eq!(delete(mcp.session.clone()).await.status, 204);
    let list_after = mcp.post(&list, &[]).await;
    assert_eq!(
        list_after.status, 404,
        "tools/list in ended session: {}",
        list_after.body
    );
    let after = mcp.post(&ping, &[]).await;
    assert_eq!(after.status, 404, "ended session: {}", after.body);
    let tool_after = mcp
        .post(&json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"opencode_list_runs","arguments":{}}}).to_string(), &[])
        .await;
    assert_eq!(tool_after.status, 404, "tool call in ended session");
    // Tools that never reach the ledger trust a session the isolate saw live a moment ago
    // (src/ledger/api.rs, SESSION_TRUST_MS); ending it here ends that trust at once.
    let registry_after = mcp
        .post(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"secret_list","arguments":{}}}).to_string(), &[])
        .await;
    assert_eq!(registry_after.status, 404, "registry tool in ended session");
    assert_eq!(delete(mcp.session.clone()).await.status, 404);
}

/// Session ids are signed (`src/mcp_session_ids.rs`): `initialize` makes no round trip to the
/// ledger, which records a session at its first request. A forged or altered id is refused,
/// and a session ended before its first use stays ended.
#[tokio::test]
async fn signed_session_ids_cannot_be_forged_and_end_for_good() {
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", base());
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let ping_in = |session: String| {
        let (http, endpoint, ping) = (http.clone(), endpoint.clone(), ping.clone());
        async move { send(&http, &endpoint, TOKEN, Some(&session), None, &ping, &[]).await }
    };
    let delete = |session: String| end_session(&http, &endpoint, session);
    let (status, body, session) = initialize("2025-11-25").await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("session id");
    let parts: Vec<&str> = session.split('.').collect();
    assert_eq!(parts.len(), 4, "a signed id: {session}");

    // Altered: another issue time, another version, a tag off by one character.
    let last = parts[3].chars().last().unwrap();
    let flipped = if last == 'a' { 'b' } else { 'a' };
    for forged in [
        format!(
            "{}.{}.{}.{}",
            parts[0],
            parts[1].replacen('1', "2", 1),
            parts[2],
            parts[3]
        ),
        format!("{}.{}.2025-06-18.{}", parts[0], parts[1], parts[3]),
        format!("{}{flipped}", &session[..session.len() - 1]),
    ] {
        let r = ping_in(forged.clone()).await;
        assert_eq!(r.status, 404, "{forged}: {}", r.body);
        assert_eq!(delete(forged.clone()).await.status, 404, "{forged}");
    }

    // Ended before its first request: it stays ended (the ledger keeps the ended row).
    assert_eq!(delete(session.clone()).await.status, 204);
    let after = ping_in(session.clone()).await;
    assert_eq!(after.status, 404, "{}", after.body);
    assert_eq!(delete(session.clone()).await.status, 404);

    // A fresh one works from its first request on, for its caller only.
    let (_, _, fresh) = initialize("2025-06-18").await;
    let fresh = fresh.expect("session id");
    let foreign = send(
        &http,
        &endpoint,
        handoff_tests::OTHER_TOKEN,
        Some(&fresh),
        None,
        &ping,
        &[],
    )
    .await;
    assert_eq!(foreign.status, 404, "{}", foreign.body);
    let r = ping_in(fresh.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"], json!({}));
}

#[tokio::test]
async fn other_methods_are_refused() {
    let http = reqwest::Client::new();
    let put = read(
        http.put(format!("{}/mcp", base()))
            .header("authorization", format!("Bearer {TOKEN}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(put.status, 405);
    assert!(put
        .header("allow")
        .unwrap_or_default()
        .contains("GET, POST"));
}

#[tokio::test]
async fn protocol_version_header_is_checked() {
    let mcp = Mcp::connect(&base()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let http = reqwest::Client::new();
    let endpoint = format!("{}/mcp", base());
    let only_bad = send(
        &http,
        &endpoint,
        TOKEN,
        Some(&mcp.session),
        Some("2024-01-01"),
        &ping,
        &[],
    )
    .await;
    assert_eq!(only_bad.status, 400, "{}", only_bad.body);
    assert!(
        only_bad.body.contains("2025-11-25"),
        "lists supported versions: {}",
        only_bad.body
    );
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let ok = send(
            &http,
            &endpoint,
            TOKEN,
            Some(&mcp.session),
            Some(version),
            &ping,
            &[],
        )
        .await;
        assert_eq!(ok.status, 200, "{version}: {}", ok.body);
    }
    let none = send(
        &http,
        &endpoint,
        TOKEN,
        Some(&mcp.session),
        None,
        &ping,
        &[],
    )
    .await;
    assert_eq!(none.status, 200, "no header means 2025-03-26");
}

#[tokio::test]
async fn origin_is_checked() {
    let mcp = Mcp::connect(&base()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let foreign = mcp.post(&ping, &[("origin", "https://evil.example")]).await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    let own = mcp.post(&ping, &[("origin", &base())]).await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert_eq!(
        own.header("access-control-allow-origin").as_deref(),
        Some(base().as_str())
    );
    // A handoff on loopback takes pages on loopback origins (a local MCP Inspector), but not
    // names under localhost, where preview origins live.
    let inspector = mcp
        .post(&ping, &[("origin", "http://localhost:6274")])
        .await;
    assert_eq!(inspector.status, 200, "{}", inspector.body);
    let port = base().rsplit(':').next().unwrap_or_default().to_string();
    let preview = format!("http://p1.preview.localhost:{port}");
    let refused = mcp.post(&ping, &[("origin", preview.as_str())]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    // DNS rebinding: the attacker's name as both Host and Origin, over http. (The Host header
    // does reach the Worker: its resource metadata names whatever host it was asked as.)
    let named = mcp
        .http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            base()
        ))
        .header("host", "evil.example.com")
        .send()
        .await
        .expect("metadata");
    let named = named.text().await.unwrap_or_default();
    assert!(named.contains("http://evil.example.com/mcp"), "{named}");
    let rebound = mcp
        .post(
            &ping,
            &[
                ("host", "evil.example.com"),
                ("origin", "http://evil.example.com"),
            ],
        )
        .await;
    assert_eq!(rebound.status, 403, "{}", rebound.body);
}

#[tokio::test]
async fn bodies_over_the_cap_are_refused_with_413() {
    let mcp = Mcp::connect(&base()).await;
    let cap = 12 * 1024 * 1024;
    let make = |size: usize| {
        let prefix = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#;
        let suffix = r#""}}"#;
        let pad = "x".repeat(size - prefix.len() - suffix.len());
        format!("{prefix}{pad}{suffix}")
    };
    let at_cap = mcp.post(&make(cap), &[]).await;
    assert_eq!(
        at_cap.status,
        200,
        "exactly 4 MiB is accepted: {}",
        &at_cap.body[..at_cap.body.len().min(200)]
    );
    let over = mcp.post(&make(cap + 1), &[]).await;
    assert_eq!(over.status, 413);
    assert_eq!(over.error_code(), -32600);
    assert!(over.body.contains("12 MiB"), "{}", over.body);

    // Without Content-Length (chunked), the cap is enforced while reading.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = make(cap + 1024)
        .into_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok(c.to_vec()))
        .collect();
    let streamed = read(
        mcp.http
            .post(&mcp.endpoint)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("mcp-session-id", &mcp.session)
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(streamed.status, 413, "{}", streamed.body);
}

/// A body under the size cap made of small values (11 MiB of `{"a":0},`) would take about
/// 700 MB as a tree on wasm32: it is refused before it is parsed, and the next call is served.
#[tokio::test]
async fn a_body_of_too_many_values_is_refused_unparsed() {
    let mcp = Mcp::connect(&base()).await;
    let make = |unit: &str, times: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":[{}]}}}}"#,
            vec![unit; times].join(",")
        )
    };
    let dense = mcp.post(&make(r#"{"a":0}"#, 1_400_000), &[]).await;
    assert_eq!(dense.status, 413, "{}", dense.body);
    assert_eq!(dense.error_code(), -32600);
    assert!(
        dense.body.contains("more than the 64.0 MiB allowed")
            && dense.body.contains("send fewer values at once"),
        "{}",
        dense.body
    );
    // Many values that fit are served, and so is the next call.
    let fits = mcp.post(&make("0", 100_000), &[]).await;
    assert_eq!(
        fits.status,
        200,
        "{}",
        &fits.body[..fits.body.len().min(200)]
    );
    let after = mcp
        .post(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#, &[])
        .await;
    assert_eq!(after.status, 200, "{}", after.body);
}

#[tokio::test]
async fn malformed_messages_get_json_rpc_errors() {
    let mcp = Mcp::connect(&base()).await;
    let cases: [(&str, u16, i64); 7] = [
        ("{not json", 400, -32700),
        ("", 400, -32700),
        (r#"{"id":1,"method":"ping"}"#, 400, -32600),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
            400,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#,
            200,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            200,
            -32602,
        ),
    ];
    for (body, status, code) in cases {
        let r = mcp.post(body, &[]).await;
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert_eq!(r.error_code(), code, "{body}: {}", r.body);
        let message = r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.len() > 10, "helpful message for {body}: {message}");
    }
    let no_name = mcp
        .post(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            &[],
        )
        .await;
    assert!(
        no_name.body.contains("name"),
        "names the missing field: {}",
        no_name.body
    );
    let unknown_tool = mcp.call("no_such_tool", json!({})).await;
    assert_eq!(unknown_tool["error"]["code"], -32602);
    let message = unknown_tool["error"]["message"].as_str().unwrap();
    assert!(message.contains("tools/list"), "{message}");
    assert!(!message.contains("did you mean"), "{message}");
    // A name of the right words in the wrong order, or misspelt, is answered with the tool meant.
    for (guess, meant) in [
        ("sandbox_read_file", "\"sandbox_files_read\""),
        ("opencode_get_results", "\"opencode_get_result\""),
    ] {
        let reply = mcp.call(guess, json!({})).await;
        assert_eq!(reply["error"]["code"], -32602);
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("did you mean {meant}?")),
            "{message}"
        );
    }
    // A name far too long for any tool is neither compared nor echoed whole.
    let long = "sandbox_files_read_".repeat(10_000);
    let reply = mcp.call(&long, json!({})).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.len() < 300, "{message}");
    assert!(message.contains("(190000 bytes)"), "{message}");
    assert!(!message.contains("did you mean"), "{message}");
    // So is an argument of a misspelt name, or a value of a misspelt variant.
    for (tool, arguments, meant) in [
        (
            "opencode_list_runs",
            json!({"sessionID": "ses_x"}),
            "`sessionId`",
        ),
        (
            "opencode_list_runs",
            json!({"status": "complete"}),
            "`completed`",
        ),
    ] {
        let reply = mcp.call(tool, arguments).await;
        let text = reply.to_string();
        assert!(text.contains(&format!("did you mean {meant}?")), "{text}");
        assert!(
            reply.get("error").is_some() || reply["result"]["isError"] == true,
            "{text}"
        );
    }
}

#[tokio::test]
async fn notifications_and_responses_are_accepted_with_202() {
    let mcp = Mcp::connect(&base()).await;
    let note = mcp
        .post(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#,
            &[],
        )
        .await;
    assert_eq!(note.status, 202);
    assert!(note.body.is_empty());
    let response = mcp
        .post(r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#, &[])
        .await;
    assert_eq!(response.status, 202);
}

#[tokio::test]
async fn accept_chooses_json_or_sse() {
    let mcp = Mcp::connect(&base()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    let http = reqwest::Client::new();
    let post = |accept: &'static str, content_type: &'static str| {
        http.post(&mcp.endpoint)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("mcp-session-id", &mcp.session)
            .header("accept", accept)
            .header("content-type", content_type)
            .body(ping.clone())
            .send()
    };
    let sse = read(post("text/event-stream", "application/json").await.unwrap()).await;
    assert_eq!(sse.status, 200);
    assert!(sse
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/event-stream"));
    let data = sse
        .body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("an SSE data line");
    let message: Value = serde_json::from_str(data).unwrap();
    assert_eq!(message["id"], 7);
    assert_eq!(message["result"], json!({}));

    let json_reply = read(post("application/json", "application/json").await.unwrap()).await;
    assert!(json_reply
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    assert_eq!(json_reply.json()["id"], 7);

    let html = read(post("text/html", "application/json").await.unwrap()).await;
    assert_eq!(html.status, 406);
    let form = read(post("application/json", "text/plain").await.unwrap()).await;
    assert_eq!(form.status, 415);
}

#[tokio::test]
async fn invalid_arguments_follow_the_negotiated_version() {
    // 2025-11-25: a tool execution error the model can read and correct.
    let new = Mcp::connect_as(&base(), TOKEN, "2025-11-25").await;
    let text = new
        .call_err("opencode_list_runs", json!({"limit": "ten"}))
        .await;
    assert!(text.contains("limit"), "{text}");
    // Earlier versions: JSON-RPC invalid params naming the field and the rule.
    let old = Mcp::connect_as(&base(), TOKEN, "2025-06-18").await;
    let response = old.call("opencode_list_runs", json!({"limit": 500})).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limit") && message.contains("100"),
        "{message}"
    );
}

#[tokio::test]
async fn rmcp_client_speaks_to_the_server_in_every_version() {
    for (asked, expected) in [
        (ProtocolVersion::V_2025_03_26, "2025-03-26"),
        (ProtocolVersion::V_2025_06_18, "2025-06-18"),
        (ProtocolVersion::V_2025_11_25, "2025-11-25"),
        (ProtocolVersion::LATEST, "2025-11-25"),
    ] {
        let client = rmcp_client(&base(), asked).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(info.protocol_version.as_str(), expected);
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 45);
        let mut arguments = serde_json::Map::new();
        arguments.insert(
            "task".into(),
            json!(format!("rmcp client task ({expected})")),
        );
        let started = client
            .call_tool(CallToolRequestParams::new("opencode_run_task").with_arguments(arguments))
            .await
            .expect("run task");
        assert_eq!(started.is_error, Some(false));
        let run_id = started.structured_content.as_ref().unwrap()["runId"]
            .as_str()
            .unwrap()
            .to_string();
        let mut arguments = serde_json::Map::new();
        arguments.insert("runId".into(), json!(run_id));
        let got = client
            .call_tool(CallToolRequestParams::new("opencode_get_result").with_arguments(arguments))
            .await
            .expect("get result");
        assert_eq!(
            got.structured_content.as_ref().unwrap()["runId"],
            json!(run_id)
        );
        client.cancel().await.expect("close client");
    }
}
