//! Preview ↔ handoff's origin: a page a sandbox serves lives on an origin of its own, so it
//! cannot reach handoff's endpoints with the owner's cookies, plant cookies or a service
//! worker, or read what handoff answers.

use handoff_tests::mcp::read;
use handoff_tests::oauth::{self, Jar};
use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::json;
use std::time::Duration;

/// A server for the sandbox that records what it receives and answers with hostile headers.
const APP: &str = r#"import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open('/home/sandbox/seen', 'a').write(self.path + '\n' + str(self.headers) + '--\n')
        body = b'sandbox-app: <script>fetch("/oauth/authorize", {credentials: "include"})</script>'
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Set-Cookie', 'planted=1; Path=/; Domain=localhost')
        self.send_header('Service-Worker-Allowed', '/')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
http.server.HTTPServer(('127.0.0.1', 8000), H).serve_forever()
"#;

#[tokio::test]
async fn a_preview_page_cannot_reach_handoff_or_the_owners_session() {
    let worker = &with_sandboxes().1;
    let base = worker.url("");
    let mcp = Mcp::connect(&base).await;
    let id = mcp.call_ok("sandbox_create", json!({})).await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": id, "path": "app.py", "content": APP}),
    )
    .await;
    mcp.call_ok(
        "sandbox_exec",
        json!({"sandboxId": id, "command": "(setsid python3 app.py > /dev/null 2>&1 < /dev/null &); sleep 0.5"}),
    )
    .await;
    let mut url = String::new();
    for _ in 0..50 {
        let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
        if info["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == 8000)
        {
            url = mcp
                .call_ok(
                    "sandbox_preview_url",
                    json!({"sandboxId": id, "port": 8000}),
                )
                .await["url"]
                .as_str()
                .unwrap()
                .to_string();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!url.is_empty(), "the app did not start");
    let preview_origin = url.trim_end_matches('/').to_string();
    let host = reqwest::Url::parse(&url)
        .unwrap()
        .host_str()
        .unwrap()
        .to_string();
    assert_ne!(host, "127.0.0.1");
    assert!(host.ends_with(".preview.localhost"), "{host}");
    let client = handoff_tests::preview_client(&url);

    // The owner is signed in on handoff's origin (the cookie a consent approval leaves).
    let client_id = oauth::register_public(&base, "Preview attack").await;
    let (_, challenge) = oauth::pkce();
    let resource = format!("{base}/mcp");
    let params = oauth::auth_params(&client_id, &challenge, "s1", &resource);
    let mut jar = Jar::default();
    let consent = oauth::consent(&base, &params, &mut jar).await;
    let approved = oauth::approve(&base, &mut jar, &consent).await;
    assert_eq!(approved.status, 302, "{}", approved.body);
    let owner_cookies = jar.header();
    assert!(!owner_cookies.is_empty(), "the owner is signed in");

    // handoff's endpoints do not exist on the preview origin: every path is the app's.
    for path in [
        "oauth/authorize?client_id=x",
        "oauth/consent",
        "mcp",
        ".well-known/oauth-authorization-server",
        "runs/run_00000000000000000000000000",
        "health",
    ] {
        let reply = read(
            client
                .get(format!("{url}{path}"))
                .header("cookie", &owner_cookies)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(
            reply.body.starts_with("sandbox-app"),
            "{path}: {}",
            reply.body
        );
        // Nothing the app says may set state in the visitor's browser.
        assert!(
            reply.header("set-cookie").is_none(),
            "{path}: {:?}",
            reply.headers
        );
        assert!(reply.header("service-worker-allowed").is_none());
    }
    // The app never sees the visitor's cookies or credentials.
    let seen = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": "cat seen"}),
        )
        .await;
    let seen = seen["stdout"].as_str().unwrap().to_ascii_lowercase();
    assert!(seen.contains("/oauth/authorize"), "{seen}");
    assert!(!seen.contains("cookie"), "the app got a cookie: {seen}");

    // A service worker could outlive the link: its script is refused.
    let sw = read(
        client
            .get(format!("{url}sw.js"))
            .header("service-worker", "script")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(sw.status, 403, "{}", sw.body);

    // What the page could send to handoff's origin: a consent approval with the owner's
    // cookies is refused for its origin, and handoff's answers are not readable from it.
    let consent = oauth::consent(&base, &params, &mut jar).await;
    let forged = read(
        oauth::http()
            .post(format!("{base}/oauth/consent"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &preview_origin)
            .header("cookie", jar.header())
            .body(oauth::url_encode(&[
                ("request", consent.request.as_str()),
                ("csrf", consent.csrf.as_str()),
                ("decision", "approve"),
            ]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.header("location").is_none(), "a code was issued");
    for path in [
        "/oauth/authorize?client_id=x",
        "/mcp",
        "/runs/run_00000000000000000000000000",
    ] {
        let reply = read(
            oauth::http()
                .get(format!("{base}{path}"))
                .header("origin", &preview_origin)
                .header("cookie", &owner_cookies)
                .send()
                .await
                .unwrap(),
        )
        .await;
        let allowed = reply.header("access-control-allow-origin");
        let credentials = reply.header("access-control-allow-credentials");
        assert!(
            allowed.as_deref() != Some(preview_origin.as_str()) && credentials.is_none(),
            "{path} is readable from the preview origin: {:?}",
            reply.headers
        );
    }

    // The old same-origin preview path is gone.
    let old = read(
        reqwest::get(format!("{base}/preview/anything/index.html"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(old.status, 404);
    assert!(old.body.contains("origins of their own"), "{}", old.body);
}

#[tokio::test]
async fn without_a_preview_base_previews_are_refused_with_what_to_set() {
    let daemon = handoff_tests::daemon::Daemon::start();
    let worker = handoff_tests::Worker::start(
        handoff_tests::WorkerOptions::default()
            .daemon(&daemon)
            .var("HANDOFF_PREVIEW_URL", ""),
    );
    let mcp = Mcp::connect(&worker.url("")).await;
    let id = mcp.call_ok("sandbox_create", json!({})).await["sandboxId"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = mcp
        .call_err(
            "sandbox_preview_url",
            json!({"sandboxId": id, "port": 8000}),
        )
        .await;
    assert!(refused.contains("HANDOFF_PREVIEW_URL"), "{refused}");
}
