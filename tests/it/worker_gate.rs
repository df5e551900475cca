//! The approval gate against the real stack: a worker that needs approval stops before its side
//! effect (a request to a local server) with its proposal visible; nothing it does before then
//! reaches the server, nor can it approve itself; approving lets the side effect happen once,
//! deciding twice is refused, and rejecting leaves no side effect.

use handoff_tests::mcp::read;
use handoff_tests::oauth::{self, Jar};
use handoff_tests::stack;
use handoff_tests::workers::{name, Recorder};
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

fn notifier(worker: &str, port: u16) -> (String, String) {
    let manifest = format!(
        "schema_version: 1\nname: {worker}\nruntime: python3\nnetwork:\n  allow: [\"127.0.0.1:{port}\"]\n\
         approvals:\n  required: true\n  label: Send the notification\n"
    );
    let script = format!(
        r#"
import json, os, urllib.request
# The host's loopback is reached through the egress proxy (NO_PROXY would keep 127.0.0.1 local).
os.environ.pop("no_proxy", None)
os.environ.pop("NO_PROXY", None)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{"http": os.environ["HTTP_PROXY"]}}))
def send(text):
    request = urllib.request.Request("http://127.0.0.1:{port}/notify", data=text.encode(), method="POST")
    return opener.open(request, timeout=5).read()
if os.environ["HANDOFF_PHASE"] == "propose":
    open("proposal.md", "w").write("I will POST 'hello' to /notify.")
    try:
        send("too early")
        print("the early request went out")
    except Exception as e:
        print("the early request was blocked:", e)
    # Nothing the worker writes approves it.
    json.dump({{"decision": "approved", "decidedBy": "the worker"}}, open("approval.json", "w"))
    print(json.dumps({{"decision": "approved"}}))
else:
    stamp = json.load(open("approval.json"))
    send("hello, approved by " + stamp["decidedBy"])
    print("sent")
"#
    );
    (manifest, script)
}

async fn pending(mcp: &Mcp, run_id: &str) -> serde_json::Value {
    mcp.wait_worker(run_id, Duration::from_secs(60), |r| {
        r["status"] == "pending_approval" || r["status"] == "failed"
    })
    .await
}

#[tokio::test]
async fn the_gate_holds_the_side_effect_until_approved_and_drops_it_when_rejected() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let server = Recorder::start();
    let worker = name("notify");
    let (manifest, script) = notifier(&worker, server.port);
    mcp.deploy(&[("worker.yml", &manifest), ("run.py", &script)])
        .await;

    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = pending(&mcp, &run_id).await;
    assert_eq!(run["status"], json!("pending_approval"), "{run:#}");
    let approval = &run["approval"];
    assert_eq!(approval["decision"], json!("pending"));
    assert_eq!(approval["label"], json!("Send the notification"));
    assert_eq!(
        approval["proposal"],
        json!("I will POST 'hello' to /notify.")
    );
    assert!(
        run["liveLog"]
            .as_str()
            .unwrap_or_default()
            .contains("the early request was blocked"),
        "{run:#}"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    let listed = mcp.call_ok("workers_approvals", json!({})).await;
    assert!(listed.to_string().contains(&run_id));

    let approved = mcp
        .call_ok(
            "workers_approve",
            json!({"runId": run_id, "reason": "looks right"}),
        )
        .await;
    assert_eq!(approved["approval"]["decision"], json!("approved"));
    let twice = mcp
        .call_err("workers_approve", json!({"runId": run_id}))
        .await;
    assert!(twice.contains("already decided"), "{twice}");
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["approval"]["reason"], json!("looks right"));
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("POST /notify hello, approved by "),
        "{requests:?}"
    );
    assert!(
        !requests[0].contains("the worker"),
        "the worker forged its approval"
    );
    let reject_done = mcp
        .call_err("workers_reject", json!({"runId": run_id}))
        .await;
    assert!(reject_done.contains("already decided") || reject_done.contains("not waiting"));

    // Rejected: cancelled, and the side effect never happens.
    let second = mcp.run_worker(&worker, json!({})).await;
    pending(&mcp, &second).await;
    let rejected = mcp
        .call_ok(
            "workers_reject",
            json!({"runId": second, "reason": "not today"}),
        )
        .await;
    assert_eq!(rejected["status"], json!("cancelled"));
    assert_eq!(rejected["error"]["code"], json!("rejected"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(server.requests().len(), 1, "{:?}", server.requests());
    let after = mcp.worker_run(&second).await;
    assert_eq!(after["status"], json!("cancelled"));
}

async fn post_decision(
    base: &str,
    run_id: &str,
    jar: &Jar,
    origin: &str,
    form: &[(&str, &str)],
) -> u16 {
    read(
        oauth::http()
            .post(format!("{base}/runs/{run_id}/decide"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", origin)
            .header("cookie", jar.header())
            .body(oauth::url_encode(form))
            .send()
            .await
            .unwrap(),
    )
    .await
    .status
}

#[tokio::test]
async fn the_run_page_shows_the_proposal_and_lets_only_the_signed_in_owner_decide() {
    let stack = stack::shared();
    let base = stack.url().trim_end_matches('/').to_string();
    let mcp = Mcp::connect(&stack.url()).await;
    let server = Recorder::start();
    let worker = name("page");
    let (manifest, script) = notifier(&worker, server.port);
    mcp.deploy(&[("worker.yml", &manifest), ("run.py", &script)])
        .await;
    let run_id = mcp.run_worker(&worker, json!({})).await;
    let run = pending(&mcp, &run_id).await;
    // The signed link shows the run and the proposal, but no buttons.
    let link = run["webUiUrl"].as_str().unwrap();
    let page = reqwest::get(link).await.unwrap().text().await.unwrap();
    assert!(
        page.contains("I will POST &#39;hello&#39; to /notify.")
            || page.contains("I will POST 'hello' to /notify."),
        "{page}"
    );
    assert!(page.contains("Sign in to decide"), "{page}");
    assert!(!page.contains("name=\"decision\""), "{page}");
    // Without the owner's sign-in, a decision is refused.
    let stranger = Jar::default();
    let refused = post_decision(
        &base,
        &run_id,
        &stranger,
        &base,
        &[("decision", "approve"), ("token", "x")],
    )
    .await;
    assert_eq!(refused, 403);
    // Signed in, the owner gets the buttons and a form token bound to this run.
    let mut jar = oauth::owner_browser(&base).await;
    let page = oauth::browse(&format!("{base}/runs/{run_id}"), &mut jar).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("name=\"decision\""), "{}", page.body);
    let token = oauth::hidden(&page.body, "token").expect("form token");
    assert_eq!(
        post_decision(
            &base,
            &run_id,
            &jar,
            &base,
            &[("decision", "approve"), ("token", "forged")]
        )
        .await,
        403
    );
    assert_eq!(
        post_decision(
            &base,
            &run_id,
            &jar,
            "https://evil.example",
            &[("decision", "approve"), ("token", &token)]
        )
        .await,
        403,
        "a form posted from another site"
    );
    assert!(server.requests().is_empty());
    let approved = post_decision(
        &base,
        &run_id,
        &jar,
        &base,
        &[
            ("decision", "approve"),
            ("token", &token),
            ("reason", "ok from the page"),
        ],
    )
    .await;
    assert_eq!(approved, 303);
    let run = mcp.worker_ended(&run_id).await;
    assert_eq!(run["status"], json!("completed"), "{run:#}");
    assert_eq!(run["approval"]["reason"], json!("ok from the page"));
    assert_eq!(server.requests().len(), 1);
    // Deciding again from the page is refused too.
    let again = post_decision(
        &base,
        &run_id,
        &jar,
        &base,
        &[("decision", "reject"), ("token", &token)],
    )
    .await;
    assert_eq!(again, 409);
}
