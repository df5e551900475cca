//! Links that others can read: the run link in a pull request needs the owner's sign-in (no
//! bearer token in it), while the signed links handed to the MCP client work as before.

use handoff_tests::mcp::read;
use handoff_tests::oauth::{self, Jar, PASSPHRASE};
use handoff_tests::stack;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn the_link_in_a_pull_request_opens_only_for_the_signed_in_owner() {
    let stack = stack::shared();
    let base = stack.url();
    let mcp = Mcp::connect(&base).await;
    let name = format!("linked-{}", std::process::id());
    let repository = stack.broken_repo(&name);
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Fix the test; SECRET-TASK-TEXT. [scenario:fix-add]", "repository": repository}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    let run = mcp
        .wait_run(&run_id, Duration::from_secs(240), |r| {
            matches!(r["status"].as_str(), Some("completed" | "failed"))
        })
        .await;
    assert_eq!(run["status"], "completed", "{run:#}");
    let pull = stack
        .forge
        .pulls()
        .into_iter()
        .find(|p| p.repo == name)
        .expect("a pull request");
    let link = format!("{base}/runs/{run_id}");
    assert!(pull.body.contains(&format!("({link})")), "{}", pull.body);
    assert!(
        !pull.body.contains("token="),
        "a bearer link in the PR: {}",
        pull.body
    );

    // Anyone reading the pull request is sent to sign in, and sees nothing of the run.
    let views = ["", "/transcript", "/conversation", "/diff"];
    for path in views.map(|view| format!("{link}{view}")) {
        let anonymous = read(oauth::http().get(&path).send().await.unwrap()).await;
        assert_eq!(anonymous.status, 302, "{path}: {}", anonymous.body);
        let location = anonymous.header("location").unwrap();
        assert!(
            location.starts_with("/oauth/signin?next=%2Fruns%2F"),
            "{location}"
        );
        assert!(!anonymous.body.contains("SECRET-TASK-TEXT"));
    }

    // The owner signs in (a wrong passphrase first), and lands back on the run.
    let mut jar = Jar::default();
    let next = format!("/runs/{run_id}");
    let form = oauth::browse(&format!("{base}/oauth/signin?next={next}"), &mut jar).await;
    assert_eq!(form.status, 200, "{}", form.body);
    assert!(!form.body.contains("SECRET-TASK-TEXT"));
    let csrf = oauth::hidden(&form.body, "csrf").expect("csrf");
    let post = |passphrase: &'static str, next: String, origin: String, jar: Jar| {
        let base = base.clone();
        let csrf = csrf.clone();
        async move {
            read(
                oauth::http()
                    .post(format!("{base}/oauth/signin"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .header("origin", origin)
                    .header("cookie", jar.header())
                    .body(oauth::url_encode(&[
                        ("next", next.as_str()),
                        ("csrf", csrf.as_str()),
                        ("passphrase", passphrase),
                    ]))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let wrong = post(
        "not-the-passphrase",
        next.clone(),
        base.clone(),
        jar.clone(),
    )
    .await;
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    let foreign = post(
        PASSPHRASE,
        next.clone(),
        "https://evil.example".into(),
        jar.clone(),
    )
    .await;
    assert_eq!(foreign.status, 403, "a sign-in posted from another site");
    let elsewhere = post(
        PASSPHRASE,
        "https://evil.example/".into(),
        base.clone(),
        jar.clone(),
    )
    .await;
    assert_eq!(
        elsewhere.header("location").as_deref(),
        Some("/"),
        "open redirect"
    );
    let signed = post(PASSPHRASE, next.clone(), base.clone(), jar.clone()).await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    assert_eq!(signed.header("location").as_deref(), Some(next.as_str()));
    jar.take(&signed);
    let page = read(
        oauth::http()
            .get(&link)
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("SECRET-TASK-TEXT"));

    // The signed link the MCP client got still opens the page without a sign-in.
    let web = run["webUiUrl"].as_str().unwrap();
    let signed_link = read(oauth::http().get(web).send().await.unwrap()).await;
    assert_eq!(signed_link.status, 200);
    assert!(signed_link.body.contains("SECRET-TASK-TEXT"));
}
