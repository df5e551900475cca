//! Worker triggers against the real stack: a seconds-level schedule that fires on the
//! registry's alarm (and stops when the worker goes), and webhooks — good deliveries in GitHub's
//! and handoff's signature forms, and a refusal for each kind of bad one.

use handoff_tests::stack;
use handoff_tests::workers::{github_signature, handoff_signature, name, now_s};
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn runs_of(mcp: &Mcp, worker: &str) -> Vec<Value> {
    let out = mcp
        .call_ok("workers_runs", json!({"worker": worker, "limit": 100}))
        .await;
    out["runs"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_schedule_fires_on_time_and_stops_with_its_worker() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("tick");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\ninputs:\n  - {{name: label, type: string, required: true}}\n\
         triggers:\n  manual: false\n  schedule:\n    cron: \"*/3 * * * * *\"\n    timezone: Europe/Berlin\n    inputs: {{label: tick}}\n"
    );
    let deployed = mcp
        .deploy(&[
            ("worker.yml", &manifest),
            (
                "run.sh",
                "echo \"$HANDOFF_TRIGGER $(cat inputs.json | tr -d ' \\n')\"\n",
            ),
        ])
        .await;
    let fires = deployed["worker"]["nextFires"].as_array().unwrap().clone();
    assert_eq!(fires.len(), 3, "{deployed:#}");
    let shown = mcp.call_ok("workers_get", json!({"worker": worker})).await;
    assert_eq!(shown["schedule"]["timezone"], json!("Europe/Berlin"));
    assert!(shown["schedule"]["description"].as_str().unwrap().len() > 5);
    // A worker without a manual trigger does not run by hand.
    let refused = mcp.call_err("workers_run", json!({"worker": worker})).await;
    assert!(refused.contains("does not run by hand"), "{refused}");
    let deadline = Instant::now() + Duration::from_secs(40);
    let runs = loop {
        let runs = runs_of(&mcp, &worker).await;
        let ended = runs.iter().filter(|r| r["status"] == "completed").count();
        if ended >= 2 {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "the schedule did not fire twice: {runs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let done: Vec<&Value> = runs.iter().filter(|r| r["status"] == "completed").collect();
    for run in &done {
        assert_eq!(run["trigger"], json!("schedule"));
        assert_eq!(run["inputs"], json!({"label": "tick"}));
        assert_eq!(run["logTail"], json!("schedule {\"label\":\"tick\"}"));
        assert!(run["dueAt"].is_string());
    }
    assert_ne!(done[0]["dueAt"], done[1]["dueAt"], "one run per fire");
    // Deleted, it fires no more.
    mcp.call_ok("workers_delete", json!({"worker": worker}))
        .await;
    let count = runs_of(&mcp, &worker).await.len();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        runs_of(&mcp, &worker).await.len(),
        count,
        "fired after delete"
    );
}

async fn post(url: &str, body: &[u8], headers: &[(&str, String)]) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.post(url).body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("webhook answered");
    let status = response.status().as_u16();
    let json = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, json)
}

#[tokio::test]
async fn webhooks_take_signed_deliveries_and_refuse_every_other_kind() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let worker = name("hook");
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: sh\ntriggers:\n  webhook: true\n\
         inputs:\n  - {{name: action, type: string, default: none}}\n"
    );
    let script =
        "echo \"$HANDOFF_TRIGGER $(tr -d ' \\n' < inputs.json)\"; tr -d ' \\n' < webhook.json\n";
    let deployed = mcp
        .deploy(&[("worker.yml", &manifest), ("run.sh", script)])
        .await;
    let url = deployed["webhook"]["url"]
        .as_str()
        .expect("webhook url")
        .to_string();
    let secret = deployed["webhook"]["secret"]
        .as_str()
        .expect("secret")
        .to_string();
    assert!(url.contains(&format!("/hooks/{worker}/hk_")), "{url}");

    // GitHub's form: the payload's fields named like inputs are the inputs.
    let body = br#"{"action": "opened", "number": 7}"#;
    let github = vec![
        ("x-hub-signature-256", github_signature(&secret, body)),
        ("x-github-delivery", "delivery-1".to_string()),
        ("x-github-event", "issues".to_string()),
        ("content-type", "application/json".to_string()),
    ];
    let (status, reply) = post(&url, body, &github).await;
    assert_eq!(status, 202, "{reply}");
    let run_id = reply["runId"].as_str().unwrap().to_string();
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["trigger"], json!("webhook"));
    assert_eq!(run["inputs"], json!({"action": "opened"}));
    let stdout = run["logs"]["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("webhook {\"action\":\"opened\"}"),
        "{stdout}"
    );
    assert!(stdout.contains("\"event\":\"issues\""), "{stdout}");
    assert!(stdout.contains("\"number\":7"), "{stdout}");

    // The same delivery again: refused, nothing started.
    let (status, reply) = post(&url, body, &github).await;
    assert_eq!(status, 409, "{reply}");
    assert_eq!(reply["runId"], json!(run_id));

    // handoff's own form, with its timestamp.
    let now = now_s();
    let signed = |ts: i64, body: &[u8]| {
        vec![
            ("x-handoff-timestamp", ts.to_string()),
            ("x-handoff-signature", handoff_signature(&secret, ts, body)),
        ]
    };
    let body = br#"{"action": "ping"}"#;
    let (status, reply) = post(&url, body, &signed(now, body)).await;
    assert_eq!(status, 202, "{reply}");
    let (status, _) = post(&url, body, &signed(now, body)).await;
    assert_eq!(status, 409, "a replay of the same signed delivery");

    // Each refusal, with its status.
    let wrong = vec![
        ("x-handoff-timestamp", now.to_string()),
        (
            "x-handoff-signature",
            handoff_signature("whsec_wrong", now, body),
        ),
    ];
    assert_eq!(post(&url, body, &wrong).await.0, 401, "bad signature");
    assert_eq!(post(&url, body, &[]).await.0, 401, "unsigned");
    let stale = signed(now - 3600, body);
    let (status, reply) = post(&url, body, &stale).await;
    assert_eq!(status, 401, "stale");
    assert!(reply["message"]
        .as_str()
        .unwrap()
        .contains("X-Handoff-Timestamp"));
    let tampered = signed(now, body);
    assert_eq!(post(&url, br#"{"action": "pwn"}"#, &tampered).await.0, 401);
    let big = vec![b' '; 300 * 1024];
    assert_eq!(
        post(&url, &big, &signed(now, &big)).await.0,
        413,
        "oversized"
    );
    let text = b"not json";
    assert_eq!(
        post(&url, text, &signed(now, text)).await.0,
        415,
        "not JSON"
    );
    let other_hook = url.rsplit_once('/').unwrap().0.to_string() + "/hk_0000000000000000000000000a";
    assert_eq!(post(&other_hook, body, &signed(now, body)).await.0, 401);
    let malformed = url.rsplit_once('/').unwrap().0.to_string() + "/nope";
    assert_eq!(post(&malformed, body, &signed(now, body)).await.0, 404);
    let get = reqwest::get(&url).await.unwrap().status().as_u16();
    assert_eq!(get, 405);
    let bad_header = vec![("x-hub-signature-256", "md5=abc".to_string())];
    assert_eq!(post(&url, body, &bad_header).await.0, 400);
    // Only the two good deliveries started runs.
    let runs = runs_of(&mcp, &worker).await;
    assert_eq!(runs.len(), 2, "{runs:#?}");
}
