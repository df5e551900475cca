//! The run page as people see it on a phone, in headless Chromium (390 × 844): a finished run's
//! answer and diff, a working run's timeline updating live, and the owner's cancel and
//! follow-up behind sign-in (a stranger gets neither).

use handoff_tests::browser::Browser;
use handoff_tests::mcp::node_script;
use handoff_tests::runs::{repo_name, terminal, view_saying};
use handoff_tests::stack;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(240);

async fn start(mcp: &Mcp, arguments: Value) -> (String, Value) {
    let out = mcp.call_ok("opencode_run_task", arguments).await;
    (out["runId"].as_str().unwrap().to_string(), out)
}

async fn working(mcp: &Mcp, run_id: &str) -> Value {
    mcp.wait_run(run_id, RUN_TIMEOUT, |r| {
        r["progress"]["phase"] == "working" || terminal(r)
    })
    .await
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_run_page_works_on_a_phone() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let base = stack.url().trim_end_matches('/').to_string();

    let repository = stack.broken_repo(&repo_name("page-done"));
    let (done_id, done_out) = start(
        &mcp,
        json!({"task": "Fix the test. [scenario:fix-add]", "repository": repository}),
    )
    .await;
    let done = mcp.wait_run(&done_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    let live_repo = stack.broken_repo(&repo_name("page-live"));
    let (live_id, live_out) = start(
        &mcp,
        json!({"task": "Run the test. [scenario:page-live]", "repository": live_repo}),
    )
    .await;
    let (cancel_id, cancel_out) = start(&mcp, json!({"task": "Wait. [scenario:slow]"})).await;
    let (hostile_id, hostile_out) =
        start(&mcp, json!({"task": "Answer. [scenario:hostile-answer]"})).await;
    mcp.wait_run(&hostile_id, RUN_TIMEOUT, terminal).await;
    working(&mcp, &live_id).await;
    working(&mcp, &cancel_id).await;

    let browser = Browser::start();
    let link = |out: &Value| out["webUiUrl"].as_str().unwrap().to_string();
    let out = node_script(
        "tests/js/run_page.mjs",
        &[
            ("WS", &browser.ws),
            ("BASE", &base),
            ("DONE_LINK", &link(&done_out)),
            ("LIVE_LINK", &link(&live_out)),
            ("CANCEL_LINK", &link(&cancel_out)),
            ("CANCEL_ID", &cancel_id),
            ("DONE_ID", &done_id),
            ("HOSTILE_LINK", &link(&hostile_out)),
            ("PASSPHRASE", handoff_tests::oauth::PASSPHRASE),
        ],
    )
    .await;
    drop(browser);

    // The finished run: status, pull request, the answer rendered, the diff file by file.
    let page = &out["done"];
    assert!(
        page["badge"].as_str().unwrap().contains("Completed"),
        "{out:#}"
    );
    assert_eq!(page["pr"], done["result"]["pullRequestUrl"], "{out:#}");
    assert!(
        page["answer"].as_str().unwrap().contains("Fixed add.sh"),
        "{out:#}"
    );
    assert_eq!(strings(&page["files"]), ["add.sh"], "{out:#}");
    assert!(
        strings(&page["added"]).contains(&"+echo $(( $1 + $2 ))".to_string()),
        "{out:#}"
    );
    assert!(
        strings(&page["removed"]).contains(&"-echo $(( $1 - $2 ))".to_string()),
        "{out:#}"
    );
    assert_eq!(strings(&page["landmarks"]), ["header", "main", "nav"]);
    assert!(
        page["overflow"].as_i64().unwrap() <= 0,
        "wider than the phone: {out:#}"
    );
    assert_eq!(page["cancel"], json!(false), "{out:#}");
    assert_eq!(page["signIn"], json!(true), "{out:#}");
    // Every step of the run, from its transcript, with what it ran.
    let steps = strings(&page["steps"]);
    assert!(
        steps.len() >= 3 && steps.iter().any(|s| s.contains("sh test.sh")),
        "{out:#}"
    );

    // The hostile answer is shown as text; none of it ran or loaded anything.
    let hostile = &out["hostile"];
    assert!(hostile["pwned"].is_null(), "{out:#}");
    assert_eq!(hostile["scripts"], json!(0), "{out:#}");
    assert!(
        hostile["text"].as_str().unwrap().contains("<script>"),
        "{out:#}"
    );
    let hrefs = strings(&hostile["hrefs"]);
    assert!(hrefs.contains(&"#".to_string()), "{out:#}");
    assert!(
        !hrefs
            .iter()
            .any(|h| h.to_ascii_lowercase().contains("javascript")),
        "{out:#}"
    );
    assert_eq!(hostile["elsewhere"], json!([]), "{out:#}");
    // Its conversation page shows the same answer as text too.
    let hostile_run = mcp.get_run(&hostile_id).await;
    let page = view_saying(&hostile_run, "conversation", "&lt;script&gt;window.__pwned").await;
    for live in [
        "<script>window",
        "<img",
        "src=\"https://tracker",
        "href=\"javascript",
    ] {
        assert!(!page.contains(live), "{live} on the page: {page}");
    }

    // The working run's timeline changed in place.
    let live = &out["live"];
    assert!(
        !live["before"].as_str().unwrap().contains("sh test.sh"),
        "{out:#}"
    );
    assert!(
        live["after"].as_str().unwrap().contains("sh test.sh"),
        "{out:#}"
    );
    assert_eq!(live["sameDocument"], json!(true));
    assert!(live["updates"].as_u64().unwrap() >= 1, "{out:#}");

    // Only the signed-in owner could cancel.
    assert_eq!(out["strangerSeesCancel"], json!(false), "{out:#}");
    assert_eq!(out["strangerPost"], json!(403), "{out:#}");
    assert!(
        out["afterCancel"].as_str().unwrap().contains("Cancelled"),
        "{out:#}"
    );
    let cancelled = mcp.get_run(&cancel_id).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled:#}");

    // The follow-up is a new run in the finished run's session.
    let url = out["followUpUrl"].as_str().unwrap();
    let follow_id = url.rsplit('/').next().unwrap().to_string();
    assert!(follow_id.starts_with("run_"), "{url}");
    let follow = mcp.wait_run(&follow_id, RUN_TIMEOUT, terminal).await;
    assert_eq!(follow["sessionId"], done["sessionId"], "{follow:#}");
    assert_eq!(follow["status"], "completed", "{follow:#}");
    assert!(follow["task"]
        .as_str()
        .unwrap()
        .contains("Now look around again"));
}
