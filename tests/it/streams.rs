//! Server-to-client streams: the initialize era's `GET /mcp` (task status, resource updates;
//! event ids are ledger positions and `Last-Event-ID` replays what a client missed) and
//! 2026-07-28's `subscriptions/listen`.

use crate::base;
use crate::durability::hung;
use handoff_tests::mcp::{read, read_events, RawResponse, SseEvent};
use handoff_tests::runs::terminal;
use handoff_tests::{stack, Mcp, TOKEN};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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

/// When the first event matching `is` arrived, after `since`.
fn arrived(events: &[SseEvent], since: Instant, is: impl Fn(&Value) -> bool) -> Option<Duration> {
    events
        .iter()
        .find(|e| is(&e.data))
        .map(|e| e.at.saturating_duration_since(since))
}

fn updated(uri: &str) -> impl Fn(&Value) -> bool + '_ {
    move |data| data["method"] == "notifications/resources/updated" && data["params"]["uri"] == uri
}

fn ended<'a>(method: &'static str, task_id: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |data| {
        data["method"] == method
            && data["params"]["taskId"] == task_id
            && data["params"]["status"] == "cancelled"
    }
}

/// Streams wait inside the ledger, woken by the writes they watch, so a change reaches them as
/// it happens rather than at their next look (each look waits up to 10 s). Both streams open
/// while two runs sit quiet (the scripted model takes minutes): a subscription made 2.5 s later,
/// a plain run cancelled at 5.5 s and a task cancelled at 8 s each reach them within 2 s — the
/// subscription's and the task's session wake-ups are what make the `GET /mcp` stream see them
/// before its wait ends.
#[tokio::test]
async fn streams_report_changes_as_they_are_written() {
    let stack = stack::shared();
    let base = stack.url();
    let mcp = Mcp::connect(&base).await;
    let (run_id, _) = mcp.start_run("Take your time. [scenario:slow]").await;
    let task = mcp
        .start_task(
            json!({"task": "Take your time too. [scenario:slow]"}),
            json!({}),
        )
        .await;
    let task_id = task["taskId"].as_str().unwrap().to_string();
    for id in [&run_id, &task_id] {
        let quiet = mcp
            .wait_run(id, Duration::from_secs(240), |r| {
                r["progress"]["message"] == "thinking" || terminal(r)
            })
            .await;
        assert_eq!(quiet["status"], "running", "{quiet:#}");
    }
    let uri = format!("handoff://runs/{run_id}");
    let listened = listen(
        &base,
        json!({"taskIds": [task_id], "resourceSubscriptions": [uri]}),
    )
    .await;
    assert_eq!(listened.status(), 200);
    let session_stream = mcp.open_stream(None).await;
    let opened = Instant::now();
    let (uri_s, task_s) = (uri.clone(), task_id.clone());
    let session_events = tokio::spawn(read_events(
        session_stream,
        Duration::from_secs(40),
        move |events| {
            arrived(events, opened, updated(&uri_s)).is_some()
                && arrived(events, opened, ended("notifications/tasks/status", &task_s)).is_some()
        },
    ));
    let (uri_l, task_l) = (uri.clone(), task_id.clone());
    let listen_events = tokio::spawn(read_events(
        listened,
        Duration::from_secs(40),
        move |events| {
            arrived(events, opened, updated(&uri_l)).is_some()
                && arrived(events, opened, ended("notifications/tasks", &task_l)).is_some()
        },
    ));

    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let subscribed = mcp
        .request("resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    tokio::time::sleep(Duration::from_millis(5_500).saturating_sub(opened.elapsed())).await;
    let run_cancelled = opened.elapsed();
    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancelled["cancelled"], true, "{cancelled:#}");
    tokio::time::sleep(Duration::from_millis(8_000).saturating_sub(opened.elapsed())).await;
    let task_cancelled = opened.elapsed();
    let cancelled = mcp
        .call_ok("opencode_cancel_run", json!({"runId": task_id}))
        .await;
    assert_eq!(cancelled["cancelled"], true, "{cancelled:#}");

    let session_events = session_events.await.unwrap();
    let listen_events = listen_events.await.unwrap();
    type Is<'a> = Box<dyn Fn(&Value) -> bool + 'a>;
    let checks: [(&str, &[SseEvent], Is, Duration); 4] = [
        (
            "GET /mcp: the subscribed run's update",
            &session_events,
            Box::new(updated(&uri)),
            run_cancelled,
        ),
        (
            "GET /mcp: the task's status",
            &session_events,
            Box::new(ended("notifications/tasks/status", &task_id)),
            task_cancelled,
        ),
        (
            "listen: the run's update",
            &listen_events,
            Box::new(updated(&uri)),
            run_cancelled,
        ),
        (
            "listen: the task's status",
            &listen_events,
            Box::new(ended("notifications/tasks", &task_id)),
            task_cancelled,
        ),
    ];
    for (what, events, is, after) in checks {
        let at = arrived(events, opened, is)
            .unwrap_or_else(|| panic!("{what}: never came: {events:#?}"));
        assert!(
            at >= after && at < after + Duration::from_secs(2),
            "{what}: came {at:?} after the streams opened, for a write asked at {after:?}: \
             {events:#?}"
        );
    }
}
