//! Bearer-token authentication on `/mcp`; `/health` stays open.

use crate::base;
use handoff_tests::mcp::{read, send};
use handoff_tests::{Worker, WorkerOptions, OTHER_TOKEN, TOKEN};
use serde_json::json;

fn init_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    })
    .to_string()
}

async fn post_with_authorization(
    base: &str,
    authorization: Option<&str>,
) -> handoff_tests::RawResponse {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .body(init_body());
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    read(request.send().await.expect("POST")).await
}

#[tokio::test]
async fn missing_or_wrong_credentials_get_401_with_a_challenge() {
    let base = base();
    let missing = post_with_authorization(&base, None).await;
    assert_eq!(missing.status, 401);
    let challenge = missing.header("www-authenticate").expect("challenge");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        missing.body.contains("Authorization: Bearer"),
        "says what to send: {}",
        missing.body
    );

    for wrong in [
        "Bearer nope".to_string(),
        format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        format!("Bearer {TOKEN}x"),
        format!("Basic {TOKEN}"),
        "Bearer".to_string(),
    ] {
        let r = post_with_authorization(&base, Some(&wrong)).await;
        assert_eq!(r.status, 401, "{wrong}");
        assert!(r.header("www-authenticate").is_some());
    }
    let invalid = post_with_authorization(&base, Some("Bearer nope")).await;
    assert!(invalid
        .header("www-authenticate")
        .unwrap()
        .contains("invalid_token"));
}

#[tokio::test]
async fn every_configured_token_is_accepted() {
    for token in [TOKEN, OTHER_TOKEN] {
        let r = post_with_authorization(&base(), Some(&format!("Bearer {token}"))).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let lower = post_with_authorization(&base(), Some(&format!("bearer {token}"))).await;
        assert_eq!(lower.status, 200, "scheme is case-insensitive");
    }
}

#[tokio::test]
async fn health_needs_no_credentials() {
    let r = read(reqwest::get(format!("{}/health", base())).await.unwrap()).await;
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["status"], "ok");
    assert!(body["warnings"].as_array().is_some());
    assert!(!r.body.contains(TOKEN), "no secret in /health");
}

#[tokio::test]
async fn a_deployment_without_credentials_says_how_to_configure_them() {
    let worker = Worker::start(WorkerOptions {
        no_credentials: true,
        ..Default::default()
    });
    let r = send(
        &reqwest::Client::new(),
        &worker.url("/mcp"),
        TOKEN,
        None,
        None,
        &init_body(),
        &[],
    )
    .await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("HANDOFF_API_TOKENS"), "{}", r.body);
    assert!(r.body.contains("HANDOFF_OWNER_PASSPHRASE"), "{}", r.body);
    let health = read(reqwest::get(worker.url("/health")).await.unwrap()).await;
    assert!(
        health.body.contains("HANDOFF_API_TOKENS")
            && health
                .body
                .contains("OAuth clients (Claude.ai, Claude Desktop, ChatGPT) cannot connect"),
        "{}",
        health.body
    );
}
