//! The router in-process (`oneshot`, no socket, no spawned binary): authentication on every
//! sandbox route, JSON bodies, unknown routes and ids — the API's answers to bad requests.

use super::*;
use crate::sandbox::detect;
use crate::sandbox::isolation::Wanted;
use axum::http::Method;
use handoff_wire::{TokenClaims, TOKEN_AUDIENCE};
use jsonwebtoken::{EncodingKey, Header};
use tower::ServiceExt;

const SECRET: &[u8] = b"router-test-secret-of-at-least-32-bytes";

async fn app(root: &std::path::Path) -> Router {
    let host = detect::detect(root, Wanted::Dangerous, None, 3_000_000)
        .await
        .expect("isolation");
    let registry =
        Registry::open(root.to_path_buf(), None, host, None, 3_000_000, 0, None).expect("registry");
    router(Arc::new(App {
        registry: Arc::new(registry),
        verifier: Verifier::new(SECRET, None).expect("verifier"),
    }))
}

fn token(sandbox: &str, secret: &[u8]) -> String {
    let claims = TokenClaims {
        sub: sandbox.into(),
        aud: TOKEN_AUDIENCE.into(),
        exp: crate::clock::now_ms() / 1000 + 60,
    };
    jsonwebtoken::encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret).expect("key"),
    )
    .expect("token")
}

async fn call(
    router: &Router,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    body: &str,
) -> (StatusCode, serde_json::Value) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(t) = bearer {
        request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let request = request.body(Body::from(body.to_string())).expect("request");
    let response = router.clone().oneshot(request).await.expect("answer");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 32 << 20)
        .await
        .expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, json)
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("handoff-router-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn error_of(json: &serde_json::Value) -> String {
    json["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn every_sandbox_route_needs_a_token_for_that_sandbox() {
    let root = scratch("auth");
    let router = app(&root).await;
    let (status, json) = call(&router, Method::GET, "/v1/health", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["status"], "ok");
    let routes = [
        (Method::PUT, "/v1/sandboxes/sbx_a"),
        (Method::GET, "/v1/sandboxes/sbx_a"),
        (Method::DELETE, "/v1/sandboxes/sbx_a"),
        (Method::POST, "/v1/sandboxes/sbx_a/exec"),
        (Method::GET, "/v1/sandboxes/sbx_a/files?path=x"),
        (Method::DELETE, "/v1/sandboxes/sbx_a/processes/1"),
        (
            Method::GET,
            "/v1/sandboxes/sbx_a/ports/3000/http/index.html",
        ),
        (Method::GET, "/v1/sandboxes/sbx_a/egress"),
    ];
    let other = token("sbx_b", SECRET);
    let forged = token("sbx_a", b"not-the-daemon-secret-but-just-as-long");
    for (method, path) in routes {
        let (status, json) = call(&router, method.clone(), path, None, "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert!(error_of(&json).contains("missing bearer token"), "{json}");
        let (status, json) = call(&router, method.clone(), path, Some(&other), "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        assert!(error_of(&json).contains("another sandbox"), "{json}");
        let (status, _) = call(&router, method.clone(), path, Some(&forged), "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn bad_bodies_unknown_sandboxes_and_routes_get_clear_errors() {
    let root = scratch("bodies");
    let router = app(&root).await;
    let a = token("sbx_a", SECRET);
    let (status, json) = call(
        &router,
        Method::POST,
        "/v1/sandboxes/sbx_a/exec",
        Some(&a),
        "{}",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{json}");
    let (status, json) = call(
        &router,
        Method::PUT,
        "/v1/sandboxes/sbx_a",
        Some(&a),
        "{not json",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&json).starts_with("malformed JSON body"), "{json}");
    let (status, json) = call(&router, Method::PUT, "/v1/sandboxes/sbx_a", Some(&a), "").await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["id"], "sbx_a");
    let (status, json) = call(
        &router,
        Method::POST,
        "/v1/sandboxes/sbx_a/exec",
        Some(&a),
        "[1,",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&json).starts_with("malformed JSON body"), "{json}");
    let (status, json) = call(
        &router,
        Method::POST,
        "/v1/sandboxes/sbx_a/exec",
        Some(&a),
        r#"{"command": 7}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_of(&json).contains("invalid type"), "{json}");
    let (status, json) = call(
        &router,
        Method::GET,
        "/v1/sandboxes/sbx_a/processes/x/logs",
        Some(&a),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    let (status, json) = call(&router, Method::GET, "/v1/nothing", None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_of(&json).contains("no such route"), "{json}");
    let (status, _) = call(&router, Method::DELETE, "/v1/sandboxes/sbx_a", Some(&a), "").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(&router, Method::GET, "/v1/sandboxes/sbx_a", Some(&a), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn a_read_may_ask_for_a_larger_cap_up_to_the_large_read_cap() {
    let root = scratch("large-read");
    let router = app(&root).await;
    let a = token("sbx_a", SECRET);
    let (status, _) = call(&router, Method::PUT, "/v1/sandboxes/sbx_a", Some(&a), "").await;
    assert_eq!(status, StatusCode::OK);
    let two_mib = "a".repeat(2 << 20);
    let (status, json) = call(
        &router,
        Method::PUT,
        "/v1/sandboxes/sbx_a/files?path=big.txt",
        Some(&a),
        &two_mib,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let path = "/v1/sandboxes/sbx_a/files?path=big.txt&encoding=base64";
    let (status, json) = call(&router, Method::GET, path, Some(&a), "").await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{json}");
    let (status, json) = call(
        &router,
        Method::GET,
        &format!("{path}&max={}", 3 << 20),
        Some(&a),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["size"], 2 << 20);
    let too_much = format!("{path}&max={}", handoff_wire::LARGE_READ_CAP + 1);
    let (status, json) = call(&router, Method::GET, &too_much, Some(&a), "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(error_of(&json).contains("max must be"), "{json}");
    let _ = std::fs::remove_dir_all(&root);
}
