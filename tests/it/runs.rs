//! The run tools against the shared instance (no sandbox backend configured): runs fail
//! promptly with `sandbox_unavailable`, and everything around them — validation, idempotency,
//! pagination, sessions, cancel, the run page — works as specified.

use crate::base;
use handoff_tests::mcp::read;
use handoff_tests::{Mcp, OTHER_TOKEN};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

fn terminal(run: &Value) -> bool {
    matches!(
        run["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

#[tokio::test]
async fn a_run_without_a_sandbox_backend_fails_promptly_and_says_why() {
    let mcp = Mcp::connect(&base()).await;
    let started = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Fix the flaky test in tests/net.rs", "repository": "https://github.com/acme/widgets.git", "branch": "main"}),
        )
        .await;
    assert_eq!(started["status"], "queued");
    assert_eq!(started["deduplicated"], false);
    let run_id = started["runId"].as_str().unwrap();
    assert!(started["webUiUrl"].as_str().unwrap().contains(run_id));

    let run = mcp
        .wait_run(run_id, Duration::from_secs(20), terminal)
        .await;
    assert_eq!(run["status"], "failed", "{run:#}");
    // Polling hands out the same page link (signed once, reused for an hour), not a new one
    // per call.
    assert_eq!(run["webUiUrl"], started["webUiUrl"], "{run:#}");
    assert_eq!(run["result"]["error"]["code"], "sandbox_unavailable");
    let message = run["result"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("SANDBOX_DAEMON_URL"),
        "says how to configure one: {message}"
    );
    assert_eq!(
        run["repository"], "https://github.com/acme/widgets",
        "normalized"
    );
    assert_eq!(run["branch"], "main");
    assert_eq!(run["title"], "Fix the flaky test in tests/net.rs");
    // It ended failed, and its phases say where: preparing the sandbox.
    assert_eq!(run["progress"]["phase"], "failed");
    let phases = handoff_tests::runs::phases(&run);
    assert_eq!(phases, ["queued", "preparing_sandbox", "failed"]);
    let statuses: Vec<&str> = run["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["queued", "starting", "failed"]);
    let times: Vec<&str> = run["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["at"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(run["startedAt"].is_string() && run["completedAt"].is_string());
    assert!(run["createdAt"].as_str().unwrap().ends_with('Z'));

    // Terminal states are final: cancelling now changes nothing.
    let cancel = mcp
        .call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
    assert_eq!(cancel["cancelled"], false);
    assert_eq!(cancel["status"], "failed");
    assert_eq!(mcp.get_run(run_id).await["status"], "failed");
}

#[tokio::test]
async fn run_task_rejects_bad_input_naming_the_field_and_rule() {
    let mcp = Mcp::connect(&base()).await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "task"),
        (json!({"task": ""}), "task"),
        (json!({"task": 5}), "task"),
        (json!({"task": "x".repeat(50_001)}), "50000"),
        (
            json!({"task": "x", "repo": "https://github.com/a/b"}),
            "repo",
        ),
        (
            json!({"task": "x", "repository": "http://github.com/a/b"}),
            "https",
        ),
        (
            json!({"task": "x", "repository": "https://gitlab.com/a/b"}),
            "github.com",
        ),
        (
            json!({"task": "x", "repository": "https://user:pw@github.com/a/b"}),
            "credentials",
        ),
        (
            json!({"task": "x", "repository": "file:///etc/passwd"}),
            "repository",
        ),
        (json!({"task": "x", "branch": "--upload-pack=x"}), "branch"),
        (json!({"task": "x", "branch": "$(id)"}), "branch"),
        (json!({"task": "x", "branch": "a..b"}), "branch"),
        (json!({"task": "x", "title": "t".repeat(101)}), "title"),
        (json!({"task": "x", "model": "claude"}), "model"),
        (json!({"task": "x", "sessionId": "../../etc"}), "sessionId"),
        (
            json!({"task": "x", "idempotencyKey": "has space"}),
            "idempotencyKey",
        ),
    ];
    for (arguments, needle) in cases {
        let text = mcp.call_err("opencode_run_task", arguments.clone()).await;
        assert!(text.contains(needle), "{arguments}: {text}");
    }
    let exactly = mcp
        .call_ok("opencode_run_task", json!({"task": "é".repeat(50_000)}))
        .await;
    assert_eq!(exactly["status"], "queued");
    let unknown_session = mcp
        .call_err(
            "opencode_run_task",
            json!({"task": "x", "sessionId": "ses_00000000000000000000000000"}),
        )
        .await;
    assert!(
        unknown_session.contains("not found") && unknown_session.contains("opencode_list_sessions"),
        "{unknown_session}"
    );
}

#[tokio::test]
async fn get_result_and_cancel_of_unknown_runs_say_what_to_do() {
    let mcp = Mcp::connect(&base()).await;
    let missing = mcp
        .call_err(
            "opencode_get_result",
            json!({"runId": "run_00000000000000000000000000"}),
        )
        .await;
    assert!(
        missing.contains("not found") && missing.contains("opencode_list_runs"),
        "{missing}"
    );
    let malformed = mcp
        .call_err("opencode_get_result", json!({"runId": "42"}))
        .await;
    assert!(malformed.contains("runId"), "{malformed}");
    let cancel = mcp
        .call_err(
            "opencode_cancel_run",
            json!({"runId": "run_00000000000000000000000000"}),
        )
        .await;
    assert!(cancel.contains("not found"), "{cancel}");
    let cursor = mcp
        .call_err("opencode_list_runs", json!({"cursor": "bm9wZQ"}))
        .await;
    assert!(cursor.contains("cursor"), "{cursor}");
    let status = mcp
        .call_err("opencode_list_runs", json!({"status": "done"}))
        .await;
    assert!(status.contains("status"), "{status}");
    let session = mcp
        .call_err("opencode_list_runs", json!({"sessionId": "x"}))
        .await;
    assert!(session.contains("sessionId"), "{session}");
    let cancel_malformed = mcp
        .call_err("opencode_cancel_run", json!({"runId": "run_../x"}))
        .await;
    assert!(cancel_malformed.contains("runId"), "{cancel_malformed}");
    let zero = mcp
        .call_err("opencode_list_sessions", json!({"limit": 0}))
        .await;
    assert!(zero.contains("limit") && zero.contains("100"), "{zero}");
    mcp.start_run("cursor run one").await;
    mcp.start_run("cursor run two").await;
    let runs_page = mcp.call_ok("opencode_list_runs", json!({"limit": 1})).await;
    let cursor = runs_page["nextCursor"]
        .as_str()
        .expect("more than one run exists");
    let foreign = mcp
        .call_err("opencode_list_sessions", json!({"cursor": cursor}))
        .await;
    assert!(
        foreign.contains("cursor"),
        "a runs cursor is not a sessions cursor: {foreign}"
    );
    let extra = mcp
        .call_err(
            "opencode_get_result",
            json!({"runId": "run_00000000000000000000000000", "verbose": true}),
        )
        .await;
    assert!(extra.contains("verbose"), "{extra}");
}

#[tokio::test]
async fn twenty_concurrent_calls_with_one_idempotency_key_make_one_run() {
    let mcp = Arc::new(Mcp::connect(&base()).await);
    let key =
        format!("key-{}", std::process::id()) + &format!("-{:?}", std::time::SystemTime::now());
    let key = key.replace([' ', '{', '}', ':', ','], "");
    let arguments = json!({"task": "idempotent task", "idempotencyKey": key});
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let mcp = mcp.clone();
        let arguments = arguments.clone();
        calls.spawn(async move { mcp.call_ok("opencode_run_task", arguments).await });
    }
    let mut run_ids = HashSet::new();
    let mut deduplicated = 0;
    while let Some(result) = calls.join_next().await {
        let out = result.expect("call");
        run_ids.insert(out["runId"].as_str().unwrap().to_string());
        deduplicated += usize::from(out["deduplicated"] == true);
    }
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    assert_eq!(deduplicated, 19);
    let run_id = run_ids.into_iter().next().unwrap();
    let session = mcp.get_run(&run_id).await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = mcp
        .call_ok("opencode_list_runs", json!({"sessionId": session}))
        .await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);

    let conflict = mcp
        .call_err(
            "opencode_run_task",
            json!({"task": "a different task", "idempotencyKey": key}),
        )
        .await;
    assert!(
        conflict.contains("idempotencyKey") && conflict.contains(&run_id),
        "{conflict}"
    );

    // Keys belong to the caller: another token's key is its own.
    let other = Mcp::connect_as(&base(), OTHER_TOKEN, "2025-11-25").await;
    let theirs = other.call_ok("opencode_run_task", arguments).await;
    assert_ne!(theirs["runId"].as_str().unwrap(), run_id);
}

#[tokio::test]
async fn pagination_over_a_thousand_runs_has_no_duplicates_and_no_gaps() {
    let mcp = Arc::new(Mcp::connect(&base()).await);
    let (first, session) = mcp.start_run("paging run 0").await;
    let mut created = vec![first];
    let mut handles = Vec::new();
    for worker in 0..8 {
        let mcp = mcp.clone();
        let session = session.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in (1 + worker..1000).step_by(8) {
                let out = mcp
                    .call_ok(
                        "opencode_run_task",
                        json!({"task": format!("paging run {i}"), "sessionId": session}),
                    )
                    .await;
                assert_eq!(out["sessionId"], json!(session));
                ids.push(out["runId"].as_str().unwrap().to_string());
            }
            ids
        }));
    }
    for handle in handles {
        created.extend(handle.await.unwrap());
    }
    assert_eq!(created.len(), 1000);
    let expected: HashSet<String> = created.iter().cloned().collect();

    for limit in [100, 37] {
        let seen = collect_pages(&mcp, json!({"sessionId": session, "limit": limit})).await;
        assert_eq!(seen.len(), 1000, "limit {limit}: no duplicates or extras");
        let unique: HashSet<String> = seen.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(unique, expected, "limit {limit}: no gaps");
        assert!(seen.windows(2).all(|w| w[0].1 >= w[1].1), "newest first");
    }
    // The unfiltered list holds them all too, while other tests keep adding runs at its head.
    let all = collect_pages(&mcp, json!({"limit": 100})).await;
    let mut ours = 0;
    let mut ids = HashSet::new();
    for (id, _) in &all {
        assert!(ids.insert(id.clone()), "duplicate {id}");
        ours += usize::from(expected.contains(id));
    }
    assert_eq!(ours, 1000);

    let default_page = mcp
        .call_ok("opencode_list_runs", json!({"sessionId": session}))
        .await;
    assert_eq!(default_page["runs"].as_array().unwrap().len(), 10);
    let sessions = mcp
        .call_ok("opencode_list_sessions", json!({"limit": 100}))
        .await;
    let entry = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == json!(session))
        .cloned()
        .expect("the session is listed");
    assert_eq!(entry["runCount"], 1000);
}

/// Every (runId, createdAt) of a listing, following nextCursor to the end.
async fn collect_pages(mcp: &Mcp, mut arguments: Value) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    loop {
        let page = mcp.call_ok("opencode_list_runs", arguments.clone()).await;
        for run in page["runs"].as_array().unwrap() {
            seen.push((
                run["runId"].as_str().unwrap().to_string(),
                run["createdAt"].as_str().unwrap().to_string(),
            ));
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => arguments["cursor"] = json!(cursor),
            None => return seen,
        }
    }
}

#[tokio::test]
async fn status_filter_and_sessions_listing() {
    let mcp = Mcp::connect(&base()).await;
    let (first, session) = mcp.start_run("session run one").await;
    let second = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "session run two", "sessionId": session, "title": "Second"}),
        )
        .await;
    assert_eq!(second["sessionId"], json!(session));
    for id in [&first, &second["runId"].as_str().unwrap().to_string()] {
        mcp.wait_run(id, Duration::from_secs(20), terminal).await;
    }
    let failed = mcp
        .call_ok(
            "opencode_list_runs",
            json!({"sessionId": session, "status": "failed"}),
        )
        .await;
    assert_eq!(failed["runs"].as_array().unwrap().len(), 2);
    assert_eq!(failed["runs"][0]["title"], "Second", "newest first");
    assert_eq!(failed["runs"][0]["errorCode"], "sandbox_unavailable");
    let queued = mcp
        .call_ok(
            "opencode_list_runs",
            json!({"sessionId": session, "status": "queued"}),
        )
        .await;
    assert!(queued["runs"].as_array().unwrap().is_empty());

    // Sessions page with a cursor, newest first, and report their last run.
    let page1 = mcp
        .call_ok("opencode_list_sessions", json!({"limit": 1}))
        .await;
    assert_eq!(page1["sessions"].as_array().unwrap().len(), 1);
    let cursor = page1["nextCursor"]
        .as_str()
        .expect("more sessions")
        .to_string();
    let page2 = mcp
        .call_ok(
            "opencode_list_sessions",
            json!({"limit": 1, "cursor": cursor}),
        )
        .await;
    assert_ne!(
        page1["sessions"][0]["sessionId"],
        page2["sessions"][0]["sessionId"]
    );
    let all = mcp
        .call_ok("opencode_list_sessions", json!({"limit": 100}))
        .await;
    let ours = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == json!(session))
        .cloned();
    let ours = ours.expect("session listed");
    assert_eq!(ours["runCount"], 2);
    assert_eq!(ours["lastRunTitle"], "Second");
    assert_eq!(ours["lastRunStatus"], "failed");
}

#[tokio::test]
async fn the_run_page_link_is_signed_and_bound_to_its_run() {
    let mcp = Mcp::connect(&base()).await;
    let started = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Page <script>alert(1)</script> task"}),
        )
        .await;
    let url = started["webUiUrl"].as_str().unwrap().to_string();
    let run_id = started["runId"].as_str().unwrap();
    mcp.wait_run(run_id, Duration::from_secs(20), terminal)
        .await;
    let page = read(reqwest::get(&url).await.unwrap()).await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page.body.contains(run_id) && page.body.contains("failed"));
    assert!(
        page.body.contains("&lt;script&gt;") && !page.body.contains("<script>alert"),
        "escaped"
    );
    assert!(
        !page.body.contains(handoff_tests::TOKEN)
            && !page.body.contains(handoff_tests::SIGNING_KEY)
    );
    assert!(page.header("content-security-policy").is_some());

    let tampered = url.replace("token=ey", "token=eY");
    assert_eq!(
        read(reqwest::get(&tampered).await.unwrap()).await.status,
        404
    );
    let (other_run, _) = mcp.start_run("another page").await;
    let wrong_run = url.replace(run_id, &other_run);
    assert_eq!(
        read(reqwest::get(&wrong_run).await.unwrap()).await.status,
        404
    );
    // Without a token the page is for the signed-in owner: a browser is sent to sign in.
    let no_token = url.split('?').next().unwrap().to_string();
    let anonymous = read(
        handoff_tests::oauth::http()
            .get(&no_token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(anonymous.status, 302);
    assert!(anonymous
        .header("location")
        .unwrap()
        .starts_with("/oauth/signin?next="));
}
