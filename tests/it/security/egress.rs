//! Sandbox ↔ the host's network: through the egress proxy, a wildcard rule (`*`, `*:port`,
//! `*.domain`) opens the public internet only. The host's loopback — where the sandbox daemon,
//! the Worker and anything else on the machine listen — and private or link-local addresses
//! (cloud metadata) open only to a rule that names them, and no other spelling of an address or
//! name gets past an allow or deny rule.

use handoff_tests::worker::with_sandboxes;
use handoff_tests::{http_server, Mcp};
use serde_json::{json, Value};

async fn sandbox(mcp: &Mcp, allow: Value, deny: Value) -> String {
    let out = mcp
        .call_ok(
            "sandbox_create",
            json!({"allowOut": allow, "denyOut": deny}),
        )
        .await;
    out["sandboxId"].as_str().expect("sandboxId").to_string()
}

/// Asks the sandbox's proxy for each URL with a raw request, so that the proxy sees the URL
/// exactly as written (curl would rewrite `127.1` as `127.0.0.1` first); prints each answer's
/// start, or the failure, followed by `|`.
const RAW_GET: &str = r#"
import os, socket, sys
host, port = os.environ["HTTP_PROXY"].removeprefix("http://").rsplit(":", 1)
for url in sys.argv[1:]:
    authority = url.removeprefix("http://").split("/")[0]
    try:
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        print(answer.decode(errors="replace")[:400], end="|\n")
    except OSError as e:
        print(f"failed: {e}", end="|\n")
"#;

async fn fetch_all(mcp: &Mcp, id: &str, urls: &[String]) -> Vec<String> {
    let script = format!(
        "python3 -c \"$SCRIPT\" {}",
        urls.iter()
            .map(|u| format!("'{u}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": script, "env": {"SCRIPT": RAW_GET}}),
        )
        .await;
    let stdout = out["stdout"].as_str().unwrap_or_default();
    let answers: Vec<String> = stdout.split_terminator("|\n").map(str::to_string).collect();
    assert_eq!(answers.len(), urls.len(), "{out}");
    answers
}

#[tokio::test]
async fn wildcards_open_the_public_internet_only_and_no_spelling_slips_past_a_rule() {
    let mcp = Mcp::connect(&with_sandboxes().1.url("")).await;
    let port = http_server("host-loopback-service").await;
    let daemon = with_sandboxes().0.port;
    let spellings = [
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f000001:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        format!("http://localhost.:{port}/"),
        format!("http://127.0.0.1:{daemon}/health"),
    ];

    // The attack: an allow-everything list, then the host's loopback in every spelling.
    for allow in [
        json!(["*"]),
        json!([format!("*:{port}"), format!("*:{daemon}")]),
    ] {
        let id = sandbox(&mcp, allow.clone(), json!([])).await;
        let answers = fetch_all(&mcp, &id, &spellings).await;
        for (url, answer) in spellings.iter().zip(&answers) {
            assert!(
                !answer.contains("host-loopback-service") && !answer.contains("\"status\""),
                "{allow} let {url} reach the host: {answer}"
            );
            assert!(
                answer.contains("blocked by the sandbox egress policy"),
                "{url}: {answer}"
            );
        }
        let log = mcp
            .call_ok(
                "sandbox_network_log",
                json!({"sandboxId": id, "verdict": "allowed"}),
            )
            .await;
        assert_eq!(log["entries"], json!([]), "{log:#}");
    }

    // Beside it, the legitimate use: a rule naming the address opens it, in any spelling.
    let named = sandbox(&mcp, json!(["*", format!("127.0.0.1:{port}")]), json!([])).await;
    let answers = fetch_all(&mcp, &named, &spellings[..5]).await;
    for (url, answer) in spellings[..5].iter().zip(&answers) {
        assert!(answer.contains("host-loopback-service"), "{url}: {answer}");
    }
    let log = mcp
        .call_ok("sandbox_network_log", json!({"sandboxId": named}))
        .await;
    let hosts: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["host"].as_str())
        .collect();
    assert!(hosts.contains(&"127.1"), "logged as asked: {log:#}");

    // A deny rule on an address holds against a name that resolves to it, and a deny rule on a
    // name against its fully qualified spelling.
    let denied = sandbox(
        &mcp,
        json!([format!("localhost:{port}"), format!("127.0.0.1:{port}")]),
        json!(["127.0.0.1", "localhost"]),
    )
    .await;
    let urls = [
        format!("http://localhost:{port}/"),
        format!("http://LocalHost.:{port}/"),
        format!("http://127.0.0.1:{port}/"),
    ];
    let answers = fetch_all(&mcp, &denied, &urls).await;
    for (url, answer) in urls.iter().zip(&answers) {
        assert!(answer.contains("denied by denyOut rule"), "{url}: {answer}");
    }
}
