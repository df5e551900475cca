//! Sandbox ↔ keys: a model token taken out of a sandbox opens only what an agent needs —
//! messages, token counting and model listing — never the account's files, batches or
//! settings, and no path climbs out of the configured base URL.

use handoff_tests::links::proxy_token;
use handoff_tests::stack::{self, PROXY_SECRET};
use handoff_tests::Mcp;
use serde_json::json;
use std::io::{Read, Write};
use std::time::Duration;

/// A raw request line, so no client normalises the path first.
fn raw(port: u16, request_line: &str, headers: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let body = if request_line.starts_with("GET") {
        ""
    } else {
        "{}"
    };
    write!(
        stream,
        "{request_line} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

#[tokio::test]
async fn a_model_token_opens_only_the_calls_an_agent_needs() {
    let stack = stack::shared();
    let mcp = Mcp::connect(&stack.url()).await;
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Wait. [scenario:slow]"}),
        )
        .await;
    let run_id = out["runId"].as_str().unwrap().to_string();
    mcp.wait_run(&run_id, Duration::from_secs(120), |r| {
        r["progress"]["phase"] == "working"
    })
    .await;
    let anthropic = proxy_token(PROXY_SECRET, "handoff:proxy:anthropic", &run_id, None, 600);
    let openai = proxy_token(PROXY_SECRET, "handoff:proxy:openai", &run_id, None, 600);
    let port = stack.worker.port;
    let with_key = format!("x-api-key: {anthropic}\r\n");
    let with_bearer = format!("Authorization: Bearer {openai}\r\n");
    for (line, headers) in [
        ("GET /proxy/anthropic/v1/files", &with_key),
        ("DELETE /proxy/anthropic/v1/files/file_01", &with_key),
        ("POST /proxy/anthropic/v1/messages/batches", &with_key),
        ("GET /proxy/anthropic/v1/organizations/me", &with_key),
        (
            "POST /proxy/anthropic/v1/messages/..%2f..%2fv1/files",
            &with_key,
        ),
        ("GET /proxy/anthropic/v1/models/..%2F..%2Ffiles", &with_key),
        ("GET /proxy/anthropic/v1/%2e%2e/%2e%2e/files", &with_key),
        ("POST /proxy/anthropic//v1/messages", &with_key),
        ("GET /proxy/openai/files", &with_bearer),
        ("POST /proxy/openai/batches", &with_bearer),
        ("POST /proxy/openai/fine_tuning/jobs", &with_bearer),
        ("DELETE /proxy/openai/models/gpt-4o", &with_bearer),
    ] {
        let reply = raw(port, line, headers);
        // Refused by the allow-list, or — where the URL parser resolved the dots — by the
        // router, never forwarded.
        assert!(
            reply.starts_with("HTTP/1.1 404")
                && (reply.contains("passes only") || reply.contains("unknown proxy service")),
            "{line}: {reply}"
        );
    }
    // What an agent needs passes, with the real key.
    let models = raw(port, "GET /proxy/anthropic/v1/models", &with_key);
    assert!(!models.contains("passes only"), "{models}");
    let strays = stack.llm.strays();
    assert!(
        strays.iter().any(|s| s == "GET /v1/models"),
        "{strays:?}: {models}"
    );
    for stray in &strays {
        for word in ["files", "batches", "organizations", "fine_tuning"] {
            assert!(!stray.contains(word), "the provider got {stray}");
        }
    }
    mcp.call_ok("opencode_cancel_run", json!({"runId": run_id}))
        .await;
}
