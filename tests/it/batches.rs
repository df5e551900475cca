//! JSON-RPC batches: a 2025-03-26 session must take them (that version's spec says a server
//! MUST support receiving them); later versions removed them, and every other shape of a batch
//! that cannot be answered is refused whole, with a message saying what to send instead.

use crate::base;
use handoff_tests::mcp::{read, send};
use handoff_tests::{Mcp, TOKEN};
use serde_json::{json, Value};

const OLD: &str = "2025-03-26";

fn batch(items: &[Value]) -> String {
    Value::Array(items.to_vec()).to_string()
}

/// The responses of a batch answered with 200, as a JSON array.
fn answers(r: &handoff_tests::mcp::RawResponse) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    match r.json() {
        Value::Array(items) => items,
        other => panic!("a batch is answered with an array: {other}"),
    }
}

#[tokio::test]
async fn a_2025_03_26_session_answers_each_message_of_a_batch_in_order() {
    let mcp = Mcp::connect_as(&base(), TOKEN, OLD).await;
    assert_eq!(mcp.version, OLD);
    let items = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}),
        json!({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "opencode_list_runs", "arguments": {"limit": 1}}}),
        json!({"id": 4, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "opencode_get_results", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": "s", "result": {}}),
        json!([{"jsonrpc": "2.0", "id": 6, "method": "ping"}]),
    ];
    let reply = mcp.post(&batch(&items), &[]).await;
    assert!(reply
        .header("content-type")
        .unwrap_or_default()
        .starts_with("application/json"));
    let got = answers(&reply);
    let ids: Vec<&Value> = got.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!(1),
            &json!("tools"),
            &json!(3),
            &json!(4),
            &json!(5),
            &Value::Null
        ],
        "one response per request, in order, none for the notification or the response: {got:#?}"
    );
    assert_eq!(got[0]["result"], json!({}));
    let tools = got[1]["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "opencode_run_task"));
    assert!(
        got[2]["result"]["structuredContent"]["runs"].is_array(),
        "{}",
        got[2]
    );
    assert_eq!(got[3]["error"]["code"], -32600, "{}", got[3]);
    assert_eq!(got[4]["error"]["code"], -32602, "{}", got[4]);
    let hint = got[4]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        hint.contains("did you mean \"opencode_get_result\"?"),
        "{hint}"
    );
    assert_eq!(got[5]["error"]["code"], -32600, "{}", got[5]);

    // Without the version header the request is taken to speak 2025-03-26, as the spec says.
    let unmarked = send(
        &mcp.http,
        &mcp.endpoint,
        TOKEN,
        Some(&mcp.session),
        None,
        &batch(&items[..1]),
        &[],
    )
    .await;
    assert_eq!(answers(&unmarked)[0]["id"], 1);

    // A client that takes only SSE gets the array as one event.
    let sse = read(
        mcp.http
            .post(&mcp.endpoint)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("mcp-session-id", &mcp.session)
            .header("mcp-protocol-version", OLD)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(batch(&items[..3]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(sse.status, 200, "{}", sse.body);
    let data = sse
        .body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("an SSE data line");
    let events: Vec<Value> = serde_json::from_str(data).unwrap();
    assert_eq!(events.len(), 2, "{data}");

    // Notifications and responses alone: 202, nothing to say.
    let quiet = mcp
        .post(&batch(&[items[1].clone(), items[6].clone()]), &[])
        .await;
    assert_eq!(quiet.status, 202, "{}", quiet.body);
    assert!(quiet.body.is_empty());
}

#[tokio::test]
async fn batches_that_cannot_be_answered_are_refused_whole() {
    let old = Mcp::connect_as(&base(), TOKEN, OLD).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let initialize = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let too_many = vec![ping.clone(); 33];
    for (items, says) in [
        (vec![], "empty"),
        (vec![ping.clone(), initialize], "initialize"),
        (too_many, "at most 32"),
    ] {
        let r = old.post(&batch(&items), &[]).await;
        assert_eq!(r.status, 400, "{says}: {}", r.body);
        assert_eq!(r.error_code(), -32600, "{}", r.body);
        assert!(r.body.contains(says), "{says}: {}", r.body);
    }
    // Later versions have no batches.
    let new = Mcp::connect(&base()).await;
    assert_ne!(new.version, OLD);
    let r = new.post(&batch(std::slice::from_ref(&ping)), &[]).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.error_code(), -32600);
    assert!(r.body.contains("2025-03-26 only"), "{}", r.body);
    let r = send(
        &old.http,
        &old.endpoint,
        TOKEN,
        Some(&old.session),
        Some("1999-01-01"),
        &batch(std::slice::from_ref(&ping)),
        &[],
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("unsupported MCP-Protocol-Version"),
        "{}",
        r.body
    );
    // A batch is answered within a session like any message: none, or an ended one, is refused.
    let r = send(
        &old.http,
        &old.endpoint,
        TOKEN,
        None,
        Some(OLD),
        &batch(std::slice::from_ref(&ping)),
        &[],
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let ended = old
        .http
        .delete(&old.endpoint)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-session-id", &old.session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status().as_u16(), 204);
    for items in [
        vec![ping.clone()],
        vec![json!({"jsonrpc": "2.0", "method": "notifications/initialized"})],
    ] {
        let r = old.post(&batch(&items), &[]).await;
        assert_eq!(r.status, 404, "{}", r.body);
    }
}
