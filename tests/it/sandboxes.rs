//! Sandboxes as MCP tools, through the whole local stack: MCP client → Worker → sandbox Durable
//! Object → the real sandbox daemon (bubblewrap namespaces, cgroups, egress proxy) → R2.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_tests::http_server;
use handoff_tests::mcp::read;
use handoff_tests::worker::with_sandboxes;
use handoff_tests::Mcp;
use serde_json::{json, Value};
use std::time::Duration;

async fn mcp() -> Mcp {
    Mcp::connect(&with_sandboxes().1.url("")).await
}

async fn create(mcp: &Mcp, arguments: Value) -> String {
    let out = mcp.call_ok("sandbox_create", arguments).await;
    out["sandboxId"].as_str().expect("sandboxId").to_string()
}

async fn exec(mcp: &Mcp, id: &str, command: &str) -> Value {
    mcp.call_ok("sandbox_exec", json!({"sandboxId": id, "command": command}))
        .await
}

#[tokio::test]
async fn lifecycle_create_info_list_pause_resume_delete() {
    let mcp = mcp().await;
    let created = mcp
        .call_ok(
            "sandbox_create",
            json!({"name": "life", "env": {"GREETING": "hi"}, "metadata": {"team": "x"}}),
        )
        .await;
    let id = created["sandboxId"].as_str().unwrap().to_string();
    assert_eq!(created["status"], "running");
    assert_eq!(created["name"], "life");
    assert_eq!(created["envNames"], json!(["GREETING"]));
    assert!(
        !created.to_string().contains("\"hi\""),
        "env values are not echoed"
    );
    let isolation = &created["isolation"];
    assert_eq!(isolation["level"], "namespaces", "{created:#}");
    assert_eq!(isolation["network"], "proxy-only");
    assert!(
        isolation["limits"]["memoryBytes"].as_u64().is_some(),
        "cgroup limits reported"
    );

    assert_eq!(
        exec(&mcp, &id, "echo $GREETING > note.txt && cat note.txt").await["stdout"],
        "hi\n"
    );
    let listed = mcp.call_ok("sandbox_list", json!({"limit": 100})).await;
    assert!(listed["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["sandboxId"] == json!(id)));

    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused");
    assert!(paused["snapshotBytes"].as_i64().unwrap() > 0);
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    assert_eq!(info["status"], "paused");
    assert!(info["snapshot"]["bytes"].as_i64().is_some());

    // A command resumes a paused sandbox by itself, files intact.
    assert_eq!(exec(&mcp, &id, "cat note.txt").await["stdout"], "hi\n");
    assert_eq!(
        mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await["status"],
        "running"
    );
    let resumed = mcp
        .call_ok("sandbox_resume", json!({"sandboxId": id}))
        .await;
    assert_eq!(resumed["status"], "running");

    let deleted = mcp
        .call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
    assert_eq!(deleted["status"], "deleted");
    let gone = mcp.call_err("sandbox_info", json!({"sandboxId": id})).await;
    assert!(
        gone.contains("deleted") && gone.contains("sandbox_list"),
        "{gone}"
    );
    let listed = mcp.call_ok("sandbox_list", json!({"limit": 100})).await;
    assert!(!listed["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["sandboxId"] == json!(id)));
    let unknown = mcp
        .call_err(
            "sandbox_exec",
            json!({"sandboxId": "sbx_00000000000000000000000000", "command": "true"}),
        )
        .await;
    assert!(
        unknown.contains("not found") && unknown.contains("sandbox_list"),
        "{unknown}"
    );
}

#[tokio::test]
async fn exec_reports_exit_codes_stderr_caps_and_timeouts() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    let out = exec(&mcp, &id, "echo out; echo err >&2; exit 7").await;
    assert_eq!(
        (
            out["stdout"].as_str(),
            out["stderr"].as_str(),
            out["exitCode"].as_i64()
        ),
        (Some("out\n"), Some("err\n"), Some(7))
    );
    assert_eq!(out["timedOut"], false);
    assert_eq!(out["truncated"], false);

    let big = exec(
        &mcp,
        &id,
        "head -c 100000 /dev/zero | tr '\\0' a; echo; echo THE-END",
    )
    .await;
    let stdout = big["stdout"].as_str().unwrap();
    assert_eq!(big["truncated"], true);
    assert!(stdout.len() < 34 * 1024, "capped: {}", stdout.len());
    assert!(
        stdout.starts_with("aaaa") && stdout.trim_end().ends_with("THE-END"),
        "head and tail kept"
    );
    assert!(stdout.contains("bytes omitted"));

    let slow = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": id, "command": "sleep 30 & sleep 20; echo never", "timeoutMs": 500}),
        )
        .await;
    assert_eq!(slow["timedOut"], true, "{slow}");
    assert!(slow["exitCode"].is_null());
    assert!(slow["durationMs"].as_u64().unwrap() < 5000);
    let ps = exec(&mcp, &id, "ps -eo args | grep -c '^sleep' || true").await;
    assert_eq!(
        ps["stdout"].as_str().unwrap().trim(),
        "0",
        "the whole process group was killed"
    );

    for (args, needle) in [
        (
            json!({"sandboxId": id, "command": "true", "timeoutMs": 0}),
            "timeoutMs",
        ),
        (
            json!({"sandboxId": id, "command": "true", "timeoutMs": 600001}),
            "timeoutMs",
        ),
        (json!({"sandboxId": id, "command": "  "}), "command"),
        (json!({"sandboxId": "nope", "command": "true"}), "sandboxId"),
        (
            json!({"sandboxId": id, "command": "true", "env": {"1BAD": "x"}}),
            "env",
        ),
    ] {
        let text = mcp.call_err("sandbox_exec", args.clone()).await;
        assert!(text.contains(needle), "{args}: {text}");
    }
    // A hostile working directory is a directory name, never shell code.
    let hostile = mcp
        .call_err(
            "sandbox_exec",
            json!({"sandboxId": id, "command": "true", "cwd": "x; touch pwned $(touch pwned2)"}),
        )
        .await;
    assert!(
        hostile.contains("does not exist") || hostile.contains("directory"),
        "{hostile}"
    );
    let ls = exec(&mcp, &id, "ls").await;
    assert!(!ls["stdout"].as_str().unwrap().contains("pwned"), "{ls}");
}

/// What a `tools/call` answered as an SSE stream: its messages, when the first progress
/// notification arrived and when the stream ended.
/// What a streamed `tools/call` sent: its SSE messages, when the first progress notification
/// and the end arrived.
pub(crate) struct Streamed {
    pub messages: Vec<Value>,
    pub first_progress: Duration,
    pub ended: Duration,
}

/// POSTs `body` expecting an SSE stream, and reads it to the end.
pub(crate) async fn call_streamed(mcp: &Mcp, body: String) -> Streamed {
    let started = std::time::Instant::now();
    let mut response = mcp.post_streaming(body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut text = String::new();
    let mut first_progress = None;
    while let Some(chunk) = response.chunk().await.expect("stream") {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if first_progress.is_none() && text.contains("notifications/progress") {
            first_progress = Some(started.elapsed());
        }
    }
    let messages = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("JSON event"))
        .collect();
    Streamed {
        messages,
        first_progress: first_progress.expect("a progress notification"),
        ended: started.elapsed(),
    }
}

#[tokio::test]
async fn a_long_exec_streams_its_progress_and_output_to_clients_that_ask_for_it() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    let call = |token: Option<Value>, arguments: Value| {
        let mut arguments = arguments;
        arguments["sandboxId"] = json!(id);
        let mut params = json!({"name": "sandbox_exec", "arguments": arguments});
        if let Some(token) = token {
            params["_meta"] = json!({"progressToken": token});
        }
        json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": params}).to_string()
    };

    // A slow command with a progress token: notifications arrive while it still runs and carry
    // its latest output line, then the usual result.
    let slow = call_streamed(
        &mcp,
        call(
            Some(json!("p-exec")),
            json!({"command": "echo start; sleep 7; echo done"}),
        ),
    )
    .await;
    assert!(
        slow.first_progress + Duration::from_secs(2) < slow.ended,
        "progress came at {:?}, the result at {:?}: not streamed",
        slow.first_progress,
        slow.ended
    );
    let (last, notes) = slow.messages.split_last().expect("events");
    assert!(notes.len() >= 2, "{:?}", slow.messages);
    assert!(
        notes.iter().any(|n| n["params"]["message"]
            .as_str()
            .unwrap_or("")
            .ends_with(": start")),
        "{:?}",
        slow.messages
    );
    let mut previous = 0.0;
    for note in notes {
        assert_eq!(note["method"], "notifications/progress", "{note}");
        assert_eq!(note["params"]["progressToken"], "p-exec");
        let progress = note["params"]["progress"].as_f64().unwrap();
        assert!(progress > previous, "{:?}", slow.messages);
        previous = progress;
    }
    assert_eq!(last["id"], 77);
    let result = &last["result"]["structuredContent"];
    assert_eq!(result["stdout"], "start\ndone\n", "{last}");
    assert_eq!(result["exitCode"], 0);

    // A streamed command that outlives its timeout is killed and says so.
    let late = call_streamed(
        &mcp,
        call(
            Some(json!(7)),
            json!({"command": "echo begin; sleep 30", "timeoutMs": 4000}),
        ),
    )
    .await;
    let last = late.messages.last().expect("a result");
    let result = &last["result"]["structuredContent"];
    assert_eq!(result["timedOut"], true, "{last}");
    assert_eq!(result["stdout"], "begin\n", "{last}");

    // Fast calls, and calls without a token, are answered with plain JSON.
    for (token, command) in [
        (Some(json!("p-fast")), "echo quick"),
        (None, "sleep 4; echo slow"),
    ] {
        let plain = mcp
            .post(&call(token, json!({"command": command})), &[])
            .await;
        assert_eq!(
            plain.header("content-type").as_deref(),
            Some("application/json"),
            "{}",
            plain.body
        );
        assert_eq!(plain.json()["result"]["isError"], false, "{}", plain.body);
    }
}

#[tokio::test]
async fn files_round_trip_caps_and_escapes() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    let written = mcp
        .call_ok(
            "sandbox_files_write",
            json!({"sandboxId": id, "path": "src/deep/hello.txt", "content": "héllo\n"}),
        )
        .await;
    assert_eq!(written["path"], "/home/sandbox/src/deep/hello.txt");
    let text = mcp
        .call_ok(
            "sandbox_files_read",
            json!({"sandboxId": id, "path": "/home/sandbox/src/deep/hello.txt"}),
        )
        .await;
    assert_eq!(text["content"], "héllo\n");
    assert_eq!(
        exec(&mcp, &id, "cat src/deep/hello.txt").await["stdout"],
        "héllo\n"
    );

    let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    mcp.call_ok("sandbox_files_write", json!({"sandboxId": id, "path": "bin.dat", "content": B64.encode(&bytes), "encoding": "base64"})).await;
    let back = mcp
        .call_ok(
            "sandbox_files_read",
            json!({"sandboxId": id, "path": "bin.dat", "encoding": "base64"}),
        )
        .await;
    assert_eq!(
        B64.decode(back["content"].as_str().unwrap()).unwrap(),
        bytes
    );
    let not_text = mcp
        .call_err(
            "sandbox_files_read",
            json!({"sandboxId": id, "path": "bin.dat"}),
        )
        .await;
    assert!(not_text.contains("base64"), "{not_text}");

    let listed = mcp
        .call_ok(
            "sandbox_files_list",
            json!({"sandboxId": id, "path": "src/deep"}),
        )
        .await;
    assert_eq!(listed["entries"][0]["name"], "hello.txt");
    assert_eq!(listed["entries"][0]["type"], "file");
    let root = mcp
        .call_ok("sandbox_files_list", json!({"sandboxId": id}))
        .await;
    let names: Vec<&str> = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bin.dat", "src"]);

    // 1 MiB read cap, 8 MiB write cap, both with the limit in the message.
    exec(&mcp, &id, "head -c 1048577 /dev/zero > big.bin").await;
    let big = mcp
        .call_err(
            "sandbox_files_read",
            json!({"sandboxId": id, "path": "big.bin", "encoding": "base64"}),
        )
        .await;
    assert!(big.contains("1 MiB"), "{big}");
    let eight = B64.encode(vec![0u8; 8 * 1024 * 1024 + 1]);
    let too_big = mcp
        .call_err(
            "sandbox_files_write",
            json!({"sandboxId": id, "path": "huge.bin", "content": eight, "encoding": "base64"}),
        )
        .await;
    assert!(too_big.contains("8 MiB"), "{too_big}");
    let exactly = B64.encode(vec![1u8; 8 * 1024 * 1024]);
    let ok = mcp
        .call_ok(
            "sandbox_files_write",
            json!({"sandboxId": id, "path": "eight.bin", "content": exactly, "encoding": "base64"}),
        )
        .await;
    assert_eq!(ok["size"], 8 * 1024 * 1024);

    // Traversal and symlink escapes are refused.
    exec(
        &mcp,
        &id,
        "ln -s /etc/passwd abs-link; ln -s ../../../../etc/passwd rel-link; ln -s / root-link",
    )
    .await;
    for path in [
        "../etc/passwd",
        "/etc/passwd",
        "src/../../x",
        "abs-link",
        "rel-link",
        "root-link/etc/passwd",
    ] {
        let refused = mcp
            .call_err("sandbox_files_read", json!({"sandboxId": id, "path": path}))
            .await;
        assert!(
            refused.contains("outside") || refused.contains(".."),
            "{path}: {refused}"
        );
    }
    let write_escape = mcp
        .call_err(
            "sandbox_files_write",
            json!({"sandboxId": id, "path": "root-link/tmp/evil", "content": "x"}),
        )
        .await;
    assert!(write_escape.contains("outside"), "{write_escape}");

    let zip = mcp
        .call(
            "sandbox_files_download_dir",
            json!({"sandboxId": id, "path": "src"}),
        )
        .await;
    let result = &zip["result"];
    assert_eq!(result["isError"], false, "{zip}");
    let resource = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "resource")
        .expect("embedded resource");
    assert_eq!(resource["resource"]["mimeType"], "application/zip");
    let archive = B64
        .decode(resource["resource"]["blob"].as_str().unwrap())
        .unwrap();
    assert_eq!(&archive[..2], b"PK");
    assert!(
        archive
            .windows(15)
            .any(|w| w == b"deep/hello.txt\0"[..15].as_ref())
            || String::from_utf8_lossy(&archive).contains("deep/hello.txt")
    );
    assert_eq!(result["structuredContent"]["sizeBytes"], archive.len());
}

#[tokio::test]
async fn a_preview_url_serves_a_server_inside_the_sandbox() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({})).await;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": id, "path": "site/index.html", "content": "<h1>from the sandbox</h1>"}),
    )
    .await;
    exec(
        &mcp,
        &id,
        "cd site && nohup python3 -m http.server 8000 --bind 127.0.0.1 > /tmp/server.log 2>&1 &",
    )
    .await;
    let mut listening = false;
    for _ in 0..50 {
        let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
        if info["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == 8000)
        {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listening, "sandbox_info lists port 8000");
    let preview = mcp
        .call_ok(
            "sandbox_preview_url",
            json!({"sandboxId": id, "port": 8000, "expiresInSeconds": 120}),
        )
        .await;
    let url = preview["url"].as_str().unwrap().to_string();
    let worker_port = with_sandboxes().1.port;
    assert!(
        url.starts_with("http://8000-")
            && url.ends_with(&format!(".preview.localhost:{worker_port}/")),
        "a preview has an origin of its own: {url}"
    );
    let get = |url: String| async move {
        read(
            handoff_tests::preview_client(&url)
                .get(&url)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let page = get(format!("{url}index.html")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.body, "<h1>from the sandbox</h1>");
    let root = get(url.clone()).await;
    assert_eq!(
        root.status, 200,
        "directory listing at the root: {}",
        root.body
    );

    let (label, rest) = url.split_once('.').unwrap();
    let last = label.chars().last().unwrap();
    let flipped = if last == '0' { '1' } else { '0' };
    let tampered = format!("{}{flipped}.{rest}", &label[..label.len() - 1]);
    assert_eq!(get(format!("{tampered}index.html")).await.status, 404);
    let other_port = url.replacen("http://8000-", "http://8001-", 1);
    assert_eq!(get(other_port).await.status, 404, "the port is signed too");
    let expired = handoff_tests::links::preview_url(worker_port, &id, 8000, -10);
    assert_eq!(get(format!("{expired}index.html")).await.status, 404);
    let valid = handoff_tests::links::preview_url(worker_port, &id, 8000, 60);
    assert_eq!(
        get(format!("{valid}index.html")).await.status,
        200,
        "a link minted the same way works"
    );

    // A port nothing listens on: 502, as from a gateway; a browser gets a page that says so
    // and looks again by itself.
    let closed = handoff_tests::links::preview_url(worker_port, &id, 8002, 60);
    let fetched = get(closed.clone()).await;
    assert_eq!(fetched.status, 502, "{}", fetched.body);
    assert!(
        fetched.json()["error"]
            .as_str()
            .unwrap_or_default()
            .contains("nothing is listening on port 8002"),
        "{}",
        fetched.body
    );
    let page = read(
        handoff_tests::preview_client(&closed)
            .get(&closed)
            .header("accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, 502, "{}", page.body);
    assert!(
        page.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
            && page.body.contains("Nothing is listening on port 8002")
            && page
                .body
                .contains(r#"<meta http-equiv="refresh" content="5">"#),
        "{}",
        page.body
    );

    for (args, needle) in [
        (json!({"sandboxId": id, "port": 0}), "port"),
        (json!({"sandboxId": id, "port": 70000}), "port"),
        (
            json!({"sandboxId": id, "port": 8000, "expiresInSeconds": 10}),
            "expiresInSeconds",
        ),
    ] {
        let text = mcp.call_err("sandbox_preview_url", args.clone()).await;
        assert!(text.contains(needle), "{args}: {text}");
    }
}

#[tokio::test]
async fn the_network_log_shows_allowed_and_blocked_connections() {
    let allowed_port = http_server("allowed-body").await;
    let blocked_port = http_server("must-not-arrive").await;
    let mcp = mcp().await;
    let id = create(
        &mcp,
        json!({"allowOut": [format!("127.0.0.1:{allowed_port}")]}),
    )
    .await;
    // Host loopback is reachable only through the proxy (NO_PROXY would send it to the
    // sandbox's own loopback), and only where the allow list says so.
    let out = exec(
        &mcp,
        &id,
        &format!(
            "export NO_PROXY= no_proxy=; curl -sS -m 5 http://127.0.0.1:{allowed_port}/; echo; \
             curl -sS -m 5 http://127.0.0.1:{blocked_port}/; echo; \
             curl -sS -m 3 --noproxy '*' http://127.0.0.1:{allowed_port}/ || echo direct-refused"
        ),
    )
    .await;
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.contains("allowed-body"), "{out}");
    assert!(!stdout.contains("must-not-arrive"), "{out}");
    assert!(
        stdout.contains("blocked by the sandbox egress policy"),
        "{out}"
    );
    assert!(
        stdout.contains("direct-refused"),
        "no direct route out: {out}"
    );

    let log = mcp
        .call_ok("sandbox_network_log", json!({"sandboxId": id}))
        .await;
    let entries = log["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{log:#}");
    assert_eq!(entries[0]["port"], blocked_port, "newest first");
    assert_eq!(entries[0]["verdict"], "blocked");
    assert_eq!(entries[1]["port"], allowed_port);
    assert_eq!(entries[1]["verdict"], "allowed");
    assert_eq!(entries[1]["host"], "127.0.0.1");
    assert!(entries[1]["at"].as_str().unwrap().ends_with('Z'));
    let blocked = mcp
        .call_ok(
            "sandbox_network_log",
            json!({"sandboxId": id, "verdict": "blocked"}),
        )
        .await;
    assert_eq!(blocked["entries"].as_array().unwrap().len(), 1);
    let bad = mcp
        .call_err("sandbox_network_log", json!({"sandboxId": id, "limit": 0}))
        .await;
    assert!(bad.contains("limit"), "{bad}");
    let bad_rule = mcp
        .call_err("sandbox_create", json!({"allowOut": ["http://x y"]}))
        .await;
    assert!(bad_rule.contains("allowOut"), "{bad_rule}");
}

#[tokio::test]
async fn one_sandbox_cannot_see_another() {
    let mcp = mcp().await;
    let a = create(&mcp, json!({"name": "a"})).await;
    let b = create(&mcp, json!({"name": "b"})).await;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": b, "path": "secret.txt", "content": "b-secret"}),
    )
    .await;
    exec(&mcp, &b, "nohup sleep 300 > /dev/null 2>&1 &").await;
    let daemon_root = with_sandboxes().0.sandboxes();
    let b_host_path = with_sandboxes().0.workspace(&b).join("secret.txt");
    assert!(b_host_path.exists());
    let probe = exec(
        &mcp,
        &a,
        &format!(
            "cat {} 2>&1; ls /home; ls /root 2>&1; ps -eo pid,args",
            b_host_path.display()
        ),
    )
    .await;
    let stdout = probe["stdout"].as_str().unwrap();
    assert!(!stdout.contains("b-secret"), "{stdout}");
    assert!(stdout.contains("No such file"), "{stdout}");
    assert!(
        stdout.contains("cannot access '/root'"),
        "the host's /root is hidden: {stdout}"
    );
    assert!(
        !stdout.contains("sleep 300"),
        "B's processes are invisible to A: {stdout}"
    );
    assert!(
        !stdout.contains("handoff-sandboxd") && !stdout.contains("workerd"),
        "host processes invisible: {stdout}"
    );
    let pid1 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_default();
    assert!(
        pid1.contains("bwrap") && !pid1.contains(&daemon_root.display().to_string()),
        "pid 1 does not reveal where workspaces live on the host: {pid1}"
    );
    // B's file is nowhere in A's file system.
    let found = exec(
        &mcp,
        &a,
        "find / -name secret.txt -not -path '/proc/*' 2>/dev/null",
    )
    .await;
    assert_eq!(found["stdout"], "", "{found}");
    let b_sees_own = exec(&mcp, &b, "cat secret.txt").await;
    assert_eq!(b_sees_own["stdout"], "b-secret");
}

#[tokio::test]
async fn a_paused_sandbox_survives_a_daemon_restart_and_losing_its_files() {
    let mut daemon = handoff_tests::daemon::Daemon::start();
    let worker =
        handoff_tests::Worker::start(handoff_tests::WorkerOptions::default().daemon(&daemon));
    let mcp = Mcp::connect(&worker.url("")).await;
    let id = create(&mcp, json!({"name": "durable"})).await;
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": id, "path": "work/state.txt", "content": "kept"}),
    )
    .await;
    mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    // The daemon restarts and even loses the sandbox's directory: the snapshot in R2 is what
    // brings the workspace back.
    daemon.stop();
    handoff_tests::remove_scratch(&daemon.sandboxes().join(&id));
    daemon.restart();
    let out = exec(&mcp, &id, "cat work/state.txt").await;
    assert_eq!(out["stdout"], "kept", "{out}");
    // A running sandbox's files survive a plain daemon restart too.
    exec(&mcp, &id, "echo more > work/more.txt").await;
    daemon.restart();
    assert_eq!(
        exec(&mcp, &id, "cat work/more.txt").await["stdout"],
        "more\n"
    );
    // A running sandbox whose files the daemon lost comes back from its last snapshot at once
    // (the object notices the daemon's "not found", recreates the sandbox and restores it).
    daemon.stop();
    handoff_tests::remove_scratch(&daemon.sandboxes().join(&id));
    daemon.restart();
    let restored = exec(&mcp, &id, "cat work/state.txt; ls work").await;
    assert_eq!(restored["stdout"], "keptstate.txt\n", "{restored}");
    // A pause that cannot finish (the daemon is down) fails and leaves the sandbox running —
    // never half-paused; once the daemon is back it works and pauses as usual.
    daemon.stop();
    let error = mcp
        .call_err("sandbox_pause", json!({"sandboxId": id}))
        .await;
    assert!(!error.is_empty());
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    assert_eq!(info["status"], "running", "{info:#}");
    daemon.restart();
    assert_eq!(
        exec(&mcp, &id, "cat work/state.txt").await["stdout"],
        "kept"
    );
    let paused = mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    assert_eq!(paused["status"], "paused", "{paused:#}");
}

#[tokio::test]
async fn a_sandbox_lives_no_longer_than_its_lifetime_and_says_so() {
    let mcp = mcp().await;
    let id = create(
        &mcp,
        json!({"lifetimeSeconds": 60, "idleTimeoutSeconds": 600}),
    )
    .await;
    let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    let lifecycle = &info["lifecycle"];
    assert_eq!(lifecycle["idleTimeoutSeconds"], json!(600), "{info:#}");
    assert_eq!(lifecycle["resumesOnUse"], json!(true));
    assert!(lifecycle["pausesWhenIdleAt"].is_string(), "{info:#}");
    assert!(lifecycle["expiresAt"].is_string(), "{info:#}");
    exec(&mcp, &id, "echo alive").await;
    // Paused before its end: it is deleted all the same.
    mcp.call_ok("sandbox_pause", json!({"sandboxId": id})).await;
    let paused = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
    assert_eq!(paused["lifecycle"]["pausesWhenIdleAt"], Value::Null);
    let mut gone = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reply = mcp.call("sandbox_info", json!({"sandboxId": id})).await;
        if reply["result"]["isError"] == json!(true) {
            gone = true;
            break;
        }
    }
    assert!(gone, "still there after its lifetime");
    let error = mcp.call_err("sandbox_info", json!({"sandboxId": id})).await;
    assert!(error.contains("deleted"), "{error}");
    let bad = mcp
        .call_err("sandbox_create", json!({"lifetimeSeconds": 10}))
        .await;
    assert!(bad.contains("lifetimeSeconds"), "{bad}");
}

#[tokio::test]
async fn an_idle_sandbox_pauses_itself_and_resumes_on_demand() {
    let mcp = mcp().await;
    let id = create(&mcp, json!({"idleTimeoutSeconds": 60})).await;
    exec(&mcp, &id, "echo idle > idle.txt").await;
    let mut status = String::new();
    for _ in 0..90 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let info = mcp.call_ok("sandbox_info", json!({"sandboxId": id})).await;
        status = info["status"].as_str().unwrap().to_string();
        if status == "paused" {
            assert!(info["snapshot"]["bytes"].as_i64().unwrap() > 0);
            break;
        }
    }
    assert_eq!(status, "paused", "paused after 60 s without activity");
    assert_eq!(exec(&mcp, &id, "cat idle.txt").await["stdout"], "idle\n");
    let bad = mcp
        .call_err("sandbox_create", json!({"idleTimeoutSeconds": 5}))
        .await;
    assert!(bad.contains("idleTimeoutSeconds"), "{bad}");
}

#[tokio::test]
async fn a_sandbox_is_updated_while_it_runs() {
    let first_port = http_server("first-body").await;
    let second_port = http_server("second-body").await;
    let mcp = mcp().await;
    let id = create(
        &mcp,
        json!({"env": {"KEEP": "k", "DROP": "d", "CHANGE": "1"},
               "allowOut": [format!("127.0.0.1:{first_port}")],
               "metadata": {"stage": "one"}}),
    )
    .await;
    let fetch = format!(
        "export NO_PROXY= no_proxy=; echo \"$KEEP.$DROP.$CHANGE.$NEW\"; \
         curl -sS -m 5 http://127.0.0.1:{first_port}/; echo; \
         curl -sS -m 5 http://127.0.0.1:{second_port}/; echo"
    );
    let before = exec(&mcp, &id, &fetch).await;
    let out = before["stdout"].as_str().unwrap();
    assert!(out.starts_with("k.d.1.\n"), "{before}");
    assert!(
        out.contains("first-body") && !out.contains("second-body"),
        "{before}"
    );

    // Variables set and removed, the allow list swapped, the timeout and metadata changed.
    let updated = mcp
        .call_ok(
            "sandbox_update",
            json!({"sandboxId": id, "env": {"DROP": null, "CHANGE": "2", "NEW": "n"},
                   "allowOut": [format!("127.0.0.1:{second_port}")],
                   "idleTimeoutSeconds": 120, "metadata": {"stage": "two"}}),
        )
        .await;
    assert_eq!(updated["status"], "running", "{updated:#}");
    assert_eq!(updated["idleTimeoutSeconds"], json!(120), "{updated:#}");
    assert_eq!(
        updated["envNames"],
        json!(["CHANGE", "KEEP", "NEW"]),
        "{updated:#}"
    );
    assert_eq!(
        updated["allowOut"],
        json!([format!("127.0.0.1:{second_port}")])
    );
    let after = exec(&mcp, &id, &fetch).await;
    let out = after["stdout"].as_str().unwrap();
    assert!(out.starts_with("k..2.n\n"), "{after}");
    assert!(
        out.contains("second-body") && !out.contains("first-body"),
        "{after}"
    );
    // The listing shows the new metadata.
    let listed = mcp.call_ok("sandbox_list", json!({"limit": 100})).await;
    let mine = listed["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sandboxId"] == json!(id))
        .cloned()
        .unwrap();
    assert_eq!(mine["metadata"], json!({"stage": "two"}), "{mine:#}");

    // Bad updates are refused, naming the field; an empty one says what it takes.
    for (args, needle) in [
        (json!({"sandboxId": id}), "nothing to change"),
        (
            json!({"sandboxId": id, "allowOut": ["http://x y"]}),
            "allowOut",
        ),
        (json!({"sandboxId": id, "env": {"1BAD": "x"}}), "env"),
        (
            json!({"sandboxId": id, "idleTimeoutSeconds": 5}),
            "idleTimeoutSeconds",
        ),
        (
            json!({"sandboxId": "sbx_nope", "env": {"A": "b"}}),
            "sandbox",
        ),
    ] {
        let error = mcp.call_err("sandbox_update", args.clone()).await;
        assert!(error.contains(needle), "{args}: {error}");
    }
    mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
        .await;
}

#[tokio::test]
async fn a_small_sandbox_gets_smaller_limits_and_they_hold() {
    let mcp = mcp().await;
    let small = mcp
        .call_ok("sandbox_create", json!({"size": "small"}))
        .await;
    let small_id = small["sandboxId"].as_str().unwrap().to_string();
    let large_id = create(&mcp, json!({})).await;
    assert_eq!(small["size"], "small", "{small:#}");
    let large = mcp
        .call_ok("sandbox_info", json!({"sandboxId": large_id}))
        .await;
    assert!(large["size"].is_null(), "{large:#}");
    // This host enforces memory, process and CPU limits; the small sandbox reports its own.
    let host = &large["isolation"]["limits"];
    assert!(
        host["memoryBytes"].as_u64().unwrap() > 512 * 1024 * 1024,
        "{large:#}"
    );
    let limits = &small["isolation"]["limits"];
    assert_eq!(limits["memoryBytes"], json!(512 * 1024 * 1024), "{small:#}");
    assert_eq!(limits["maxProcesses"], json!(256), "{small:#}");
    assert_eq!(limits["cpuMillis"], json!(500), "{small:#}");
    assert_eq!(limits["diskBytes"], host["diskBytes"]);

    // And they hold: 700 MB fits in the default sandbox, not in the small one.
    let grab = "python3 -c \"b = b'x' * (700 * 1024 * 1024); print('held', len(b))\"";
    let big = exec(&mcp, &large_id, grab).await;
    assert!(big["stdout"].as_str().unwrap().contains("held"), "{big}");
    let cramped = exec(&mcp, &small_id, grab).await;
    assert!(
        !cramped["stdout"].as_str().unwrap().contains("held"),
        "{cramped}"
    );
    assert_ne!(cramped["exitCode"], json!(0), "{cramped}");

    let refused = mcp
        .call_err("sandbox_create", json!({"size": "huge"}))
        .await;
    assert!(refused.contains("size"), "{refused}");
    for id in [small_id, large_id] {
        mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
            .await;
    }
}

#[tokio::test]
async fn a_fork_starts_from_the_workspace_and_goes_its_own_way() {
    let mcp = mcp().await;
    let source = create(&mcp, json!({"env": {"ROLE": "source"}})).await;
    exec(&mcp, &source, "mkdir -p proj && echo hello > proj/a.txt").await;
    let fork = mcp
        .call_ok(
            "sandbox_fork",
            json!({"sandboxId": source, "name": "the fork", "metadata": {"why": "try"}}),
        )
        .await;
    let fork_id = fork["sandboxId"].as_str().unwrap().to_string();
    assert_ne!(fork_id, source);
    assert_eq!(fork["name"], "the fork");
    assert_eq!(
        fork["metadata"],
        json!({"why": "try", "forkedFrom": source}),
        "{fork:#}"
    );
    assert_eq!(fork["envNames"], json!(["ROLE"]));
    let read = exec(&mcp, &fork_id, "cat proj/a.txt; echo $ROLE").await;
    assert_eq!(read["stdout"], "hello\nsource\n", "{read}");
    // Each goes its own way.
    exec(&mcp, &fork_id, "echo changed > proj/a.txt").await;
    let original = exec(&mcp, &source, "cat proj/a.txt").await;
    assert_eq!(original["stdout"], "hello\n", "{original}");

    // A paused sandbox forks from its last snapshot.
    mcp.call_ok("sandbox_pause", json!({"sandboxId": fork_id}))
        .await;
    let second = mcp
        .call_ok("sandbox_fork", json!({"sandboxId": fork_id}))
        .await;
    let second_id = second["sandboxId"].as_str().unwrap().to_string();
    let again = exec(&mcp, &second_id, "cat proj/a.txt").await;
    assert_eq!(again["stdout"], "changed\n", "{again}");

    let missing = mcp
        .call_err("sandbox_fork", json!({"sandboxId": "sbx_nope"}))
        .await;
    assert!(missing.contains("sandbox"), "{missing}");
    for id in [source, fork_id, second_id] {
        mcp.call_ok("sandbox_delete", json!({"sandboxId": id}))
            .await;
    }
}
