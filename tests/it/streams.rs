//! Server-to-client streams: the initialize era's `GET /mcp` (task status, resource updates;
//! event ids are ledger positions and `Last-Event-ID` replays what a client missed) and
//! 2026-07-28's `subscriptions/listen`.

use crate::base;
use crate::durability::hung;
use handoff_tests::mcp::{read, read_events, RawResponse, SseEvent};
use handoff_tests::{Mcp, TOKEN};
use serde_json::{json, Value};
use std::time::Duration;

fn task_statuses<'a>(events: &'a [SseEvent], task_id: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e.data["method"] == "notifications/tasks/status")
        .filter(|e| e.data["params"]["taskId"] == task_id)
        .filter_map(|e| e.data["params"]["status"].as_str())
        .collect()
}

/// `GET /mcp` with the given token, Accept and session headers (`None` leaves one out).
async fn get_stream(token: Option<&str>, accept: &str, session: Option<&str>) -> RawResponse {
    let mut request = reqwest::Client::new()
        .get(format!("{}/mcp", base()))
        .header("accept", accept);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    read(request.send().await.unwrap()).await
}

#[tokio::test]
async fn the_get_stream_needs_a_session_and_an_sse_accept() {
    let sse = "text/event-stream";
    let no_session = get_stream(Some(TOKEN), sse, None).await;
    assert_eq!(no_session.status, 400, "{}", no_session.body);
    let mcp = Mcp::connect(&base()).await;
    let session = Some(mcp.session.as_str());
    let json_only = get_stream(Some(TOKEN), "application/json", session).await;
    assert_eq!(json_only.status, 406, "{}", json_only.body);
    let unknown = get_stream(Some(TOKEN), sse, Some("mcp_0123456789abcdefghjkmnpqrs")).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let anonymous = get_stream(None, sse, session).await;
    assert_eq!(anonymous.status, 401);
    let foreign = get_stream(Some(handoff_tests::OTHER_TOKEN), sse, session).await;
    assert_eq!(
        foreign.status, 404,
        "another caller's session: {}",
        foreign.body
    );
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_replays_what_was_missed() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let stream = mcp.open_stream(None).await;
    let task = mcp
        .start_task(json!({"task": "A task to watch"}), json!({}))
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    // queued → starting → (the watchdog, after 3 s without progress) failed.
    let seen = read_events(stream, Duration::from_secs(30), |events| {
        task_statuses(events, &task_id).contains(&"failed")
    })
    .await;
    let statuses = task_statuses(&seen, &task_id);
    assert_eq!(statuses.last(), Some(&"failed"), "{seen:#?}");
    assert!(seen.len() >= 2, "a change before the end: {seen:#?}");
    let first_id = seen[0].id.clone().expect("an event id");

    // The connection dropped after the first event: the reconnect gets the rest.
    let replayed = read_events(
        mcp.open_stream(Some(&first_id)).await,
        Duration::from_secs(5),
        |events| task_statuses(events, &task_id).contains(&"failed"),
    )
    .await;
    assert_eq!(
        task_statuses(&replayed, &task_id).last(),
        Some(&"failed"),
        "{replayed:#?}"
    );
    assert!(
        replayed.iter().all(|e| e.id != Some(first_id.clone())),
        "what the client had is not sent again: {replayed:#?}"
    );
    // From the start: every status change of the session's tasks.
    let all = read_events(
        mcp.open_stream(Some("0.0")).await,
        Duration::from_secs(5),
        |events| task_statuses(events, &task_id).contains(&"failed"),
    )
    .await;
    assert_eq!(task_statuses(&all, &task_id).last(), Some(&"failed"));
    // An id this server did not make starts from now: nothing old comes back.
    let fresh = read_events(
        mcp.open_stream(Some("p-nonsense")).await,
        Duration::from_secs(3),
        |_| false,
    )
    .await;
    assert!(task_statuses(&fresh, &task_id).is_empty(), "{fresh:#?}");
}

#[tokio::test]
async fn subscribed_runs_report_their_changes_on_the_stream() {
    let mcp = Mcp::connect(&hung().url("")).await;
    let (run_id, _) = mcp.start_run("A run to follow").await;
    let uri = format!("handoff://runs/{run_id}");
    let subscribed = mcp
        .request("resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let stream = mcp.open_stream(None).await;
    let events = read_events(stream, Duration::from_secs(30), |events| {
        events
            .iter()
            .any(|e| e.data["method"] == "notifications/resources/updated")
    })
    .await;
    let update = events
        .iter()
        .find(|e| e.data["method"] == "notifications/resources/updated")
        .unwrap_or_else(|| panic!("an update: {events:#?}"));
    assert_eq!(update.data["params"]["uri"], uri.as_str());
    assert!(update.id.is_some());

    let unsubscribed = mcp
        .request("resources/unsubscribe", json!({"uri": uri}))
        .await;
    assert_eq!(unsubscribed["result"], json!({}));
    for bad in [
        json!({"uri": "handoff://sandboxes/sbx_0123456789abcdefghjkmnpqrs/files/a.txt"}),
        json!({"uri": "https://example.com/"}),
        json!({}),
    ] {
        let refused = mcp.request("resources/subscribe", bad.clone()).await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
    }
    let unknown = mcp
        .request(
            "resources/subscribe",
            json!({"uri": "handoff://runs/run_0123456789abcdefghjkmnpqrs"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
}

/// A modern `subscriptions/listen` on `base`.
async fn listen(base: &str, notifications: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "handoff-tests", "version": "1"}}}});
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn subscriptions_listen_reports_the_named_tasks_and_runs() {
    let base = hung().url("");
    let mcp = Mcp::connect(&base).await;
    let task = mcp
        .start_task(json!({"task": "A task to listen to"}), json!({}))
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    let uri = format!("handoff://runs/{task_id}");
    let response = listen(
        &base,
        json!({"taskIds": [task_id], "resourceSubscriptions": [uri, "file:///etc/passwd"],
               "toolsListChanged": true, "resourcesListChanged": true}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let events = read_events(response, Duration::from_secs(30), |events| {
        let ended = events.iter().any(|e| {
            e.data["method"] == "notifications/tasks" && e.data["params"]["status"] != "working"
        });
        let updated = events
            .iter()
            .any(|e| e.data["method"] == "notifications/resources/updated");
        ended && updated
    })
    .await;
    let ack = &events[0].data;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let honoured = &ack["params"]["notifications"];
    assert_eq!(honoured["taskIds"], json!([task_id]));
    assert_eq!(honoured["resourceSubscriptions"], json!([uri]));
    assert_eq!(honoured["toolsListChanged"], true);
    assert!(honoured.get("resourcesListChanged").is_none(), "{ack}");
    for event in &events {
        assert_eq!(
            event.data["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen-1",
            "{event:?}"
        );
    }
    let ended = events
        .iter()
        .find(|e| {
            e.data["method"] == "notifications/tasks" && e.data["params"]["status"] != "working"
        })
        .unwrap();
    assert_eq!(ended.data["params"]["taskId"], task_id.as_str());
    assert_eq!(ended.data["params"]["status"], "completed");
    assert_eq!(
        ended.data["params"]["result"]["structuredContent"]["status"],
        "failed"
    );
    assert!(
        events
            .iter()
            .any(|e| e.data["method"] == "notifications/resources/updated"
                && e.data["params"]["uri"] == uri.as_str()),
        "{events:#?}"
    );
    let refused = read(
        reqwest::Client::new()
            .post(format!("{base}/mcp"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(
                json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {"notifications": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        refused.status, 406,
        "a listen needs an SSE answer: {}",
        refused.body
    );
}
