//! Denial of service and small defects: a sandbox's disk, its egress proxy, a FIFO in its
//! workspace, client metadata documents that never end, sign-in lockouts, and an agent that
//! answers its session with more than the Worker reads or holds.

use handoff_tests::daemon::{Client, Daemon};
use handoff_tests::mcp::read;
use handoff_tests::oauth::{self, Jar};
use serde_json::json;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A daemon whose sandboxes get a small disk.
fn small_disks() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| {
        let d = Daemon::start_with(&["--isolation", "namespaces", "--disk-mb", "64"]);
        handoff_tests::worker::stop_daemon_at_exit(&d);
        d
    })
}

fn mounted(dir: &std::path::Path) -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .contains(&dir.display().to_string())
}

#[tokio::test]
async fn a_sandbox_that_fills_its_disk_stops_at_its_quota() {
    let daemon = small_disks();
    let health: serde_json::Value = reqwest::get(format!("{}/v1/health", daemon.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        health["isolation"]["limits"]["disk_bytes"],
        64 * 1024 * 1024,
        "{health}"
    );
    let sandbox = Client::new(daemon, "disk-fill").await;
    let free_before = free_bytes(&daemon.sandboxes());
    let out = sandbox
        .exec(
            "dd if=/dev/zero of=big bs=1M count=200 2>&1; echo rc=$?",
            60_000,
        )
        .await;
    let text = out["stdout"].as_str().unwrap();
    assert!(text.contains("No space left on device"), "{out}");
    assert!(!text.contains("rc=0"), "{out}");
    let used = free_before.saturating_sub(free_bytes(&daemon.sandboxes()));
    assert!(
        used < 100 * 1024 * 1024,
        "the host lost {used} bytes to one sandbox"
    );
    // Writing through the API says what is wrong.
    let put = sandbox
        .http
        .put(format!("{}/files?path=more.bin", sandbox.base))
        .bearer_auth(&sandbox.token)
        .body(vec![0u8; 4 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    let put = read(put).await;
    assert_eq!(put.status, 413, "{}", put.body);
    assert!(put.body.contains("disk is full"), "{}", put.body);
    // Freeing space makes the sandbox usable again.
    let freed = sandbox
        .exec("rm big && echo ok > small && cat small", 10_000)
        .await;
    assert_eq!(freed["stdout"], "ok\n", "{freed}");
    // A process logging forever is bounded by the same quota.
    let logger = sandbox
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "yes 0123456789abcdef0123456789abcdef"})),
        )
        .await;
    assert_eq!(logger.status, 200, "{}", logger.body);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let used = free_before.saturating_sub(free_bytes(&daemon.sandboxes()));
    assert!(
        used < 100 * 1024 * 1024,
        "logs took {used} bytes of the host"
    );
    // Deleting the sandbox removes its volume.
    let dir = daemon.sandboxes().join("disk-fill");
    assert!(mounted(&dir));
    let deleted = sandbox.send(reqwest::Method::DELETE, "", None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert!(!mounted(&dir), "the volume is still mounted");
    assert!(!dir.exists());
}

fn free_bytes(path: &std::path::Path) -> u64 {
    let c = std::ffi::CString::new(path.display().to_string()).unwrap();
    // SAFETY: statvfs is plain data filled by the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and out pointer.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

#[tokio::test]
async fn the_egress_proxy_drops_slow_heads_and_caps_connections() {
    let sandbox = Client::new(small_disks(), "proxy-limits").await;
    let script = r#"
import socket, time
slow = socket.create_connection(("127.0.0.1", 3128))
slow.sendall(b"GET http://example.com/ HTTP/1.1\r\n")
start = time.time()
slow.settimeout(30)
try:
    data = slow.recv(100)
except Exception as e:
    data = repr(e).encode()
print("slow closed after %d s: %r" % (time.time() - start, data[:40]))
held = []
refused = 0
for i in range(300):
    s = socket.create_connection(("127.0.0.1", 3128))
    held.append(s)
for s in held[-40:]:
    s.settimeout(5)
    try:
        if b"503" in s.recv(200):
            refused += 1
    except Exception:
        pass
print("refused", refused)
"#;
    let put = sandbox
        .http
        .put(format!("{}/files?path=probe.py", sandbox.base))
        .bearer_auth(&sandbox.token)
        .body(script)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let out = sandbox.exec("python3 probe.py", 120_000).await;
    let text = out["stdout"].as_str().unwrap();
    let seconds: u64 = text
        .split("slow closed after ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        (8..=15).contains(&seconds),
        "a slow head held the proxy {seconds} s: {out}"
    );
    let refused: u64 = text
        .split("refused ")
        .nth(1)
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        refused >= 40,
        "connections beyond the cap were not refused: {out}"
    );
}

#[tokio::test]
async fn reading_a_fifo_fails_at_once() {
    let sandbox = Client::new(small_disks(), "fifo").await;
    sandbox.exec("mkfifo pipe", 10_000).await;
    let started = Instant::now();
    let read = sandbox
        .send(reqwest::Method::GET, "/files?path=pipe", None)
        .await;
    assert_eq!(read.status, 400, "{}", read.body);
    assert!(read.body.contains("not a regular file"), "{}", read.body);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A server of client metadata documents that are too large, or never finish.
fn hostile_documents() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        use axum::body::Body;
        use axum::routing::get;
        let app = axum::Router::new()
            .route(
                "/huge.json",
                get(|| async {
                    let chunks = futures::stream::iter(
                        (0..4096).map(|_| Ok::<_, std::io::Error>(vec![b' '; 16 * 1024])),
                    );
                    axum::response::Response::builder()
                        .header("content-type", "application/json")
                        .body(Body::from_stream(chunks))
                        .unwrap()
                }),
            )
            .route(
                "/drip.json",
                get(|| async {
                    let chunks = futures::stream::unfold(0u32, |n| async move {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        (n < 600).then(|| (Ok::<_, std::io::Error>(vec![b' ']), n + 1))
                    });
                    axum::response::Response::builder()
                        .header("content-type", "application/json")
                        .body(Body::from_stream(chunks))
                        .unwrap()
                }),
            );
        handoff_tests::serve_forever(app)
    })
}

#[tokio::test]
async fn client_metadata_documents_are_bounded_in_time_and_bytes() {
    let base = handoff_tests::worker::shared().url("");
    let port = hostile_documents();
    for (path, needle) in [
        ("huge.json", "larger than 64 KiB"),
        ("drip.json", "timed out"),
    ] {
        let client_id = format!("http://127.0.0.1:{port}/{path}");
        let (_, challenge) = oauth::pkce();
        let resource = format!("{base}/mcp");
        let params = oauth::auth_params(&client_id, &challenge, "s", &resource);
        let started = Instant::now();
        let mut jar = Jar::default();
        let reply = oauth::authorize(&base, &params, &mut jar).await;
        let took = started.elapsed();
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert!(reply.body.contains(needle), "{path}: {}", reply.body);
        assert!(took < Duration::from_secs(10), "{path} took {took:?}");
    }
}

#[tokio::test]
async fn one_ipv6_network_cannot_lock_the_owner_out_of_sign_in() {
    let worker = handoff_tests::Worker::start(
        handoff_tests::WorkerOptions::default().var("HANDOFF_DEV_LOOPBACK_CLIENT_IDS", "1"),
    );
    let base = worker.url("");
    let client_id = oauth::register_public(&base, "Lockout").await;
    let (_, challenge) = oauth::pkce();
    let resource = format!("{base}/mcp");
    let params = oauth::auth_params(&client_id, &challenge, "s", &resource);
    // An attacker rotates through the addresses of one /64, guessing.
    for host in 1..=40u32 {
        let address = format!("2001:db8:77:1::{host:x}");
        let mut jar = Jar::default();
        let consent = oauth::consent(&base, &params, &mut jar).await;
        let reply = read(
            oauth::http()
                .post(format!("{base}/oauth/consent"))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("origin", &base)
                .header("cookie", jar.header())
                .header("cf-connecting-ip", &address)
                .body(oauth::url_encode(&[
                    ("request", consent.request.as_str()),
                    ("csrf", consent.csrf.as_str()),
                    ("decision", "approve"),
                    ("passphrase", "a wrong guess"),
                ]))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(matches!(reply.status, 401 | 429), "{}", reply.body);
    }
    // The owner, elsewhere, still signs in.
    let mut jar = Jar::default();
    let consent = oauth::consent(&base, &params, &mut jar).await;
    let owner = read(
        oauth::http()
            .post(format!("{base}/oauth/consent"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &base)
            .header("cookie", jar.header())
            .header("cf-connecting-ip", "198.51.100.20")
            .body(oauth::url_encode(&[
                ("request", consent.request.as_str()),
                ("csrf", consent.csrf.as_str()),
                ("decision", "approve"),
                ("passphrase", oauth::PASSPHRASE),
            ]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        owner.status, 302,
        "the owner was locked out: {}",
        owner.body
    );
}

#[tokio::test]
async fn forged_access_tokens_are_refused_and_real_ones_carry_a_tag() {
    let base = handoff_tests::worker::shared().url("");
    let client_id = oauth::register_public(&base, "Tagged").await;
    let tokens = oauth::sign_in(&base, &client_id).await;
    let (secret, tag) = tokens.access.rsplit_once('.').expect("a tagged token");
    assert!(
        secret.starts_with("hnd_at_") && tag.len() == 16,
        "{}",
        tokens.access
    );
    assert_eq!(oauth::mcp_status(&base, &tokens.access).await.status, 200);
    let forged = [
        format!("{secret}.0000000000000000"),
        secret.to_string(),
        format!("hnd_at_{}", "A".repeat(43)),
    ];
    for token in forged {
        let reply = oauth::mcp_status(&base, &token).await;
        assert_eq!(reply.status, 401, "{token}: {}", reply.body);
    }
}

/// Ends OpenCode (the pid it is given) and takes its port, 4096, answering every request with
/// 20 MiB. (No more: read without a limit, an endless body grew workerd here to 23 GB in a
/// minute or two, and a test that fails must not take the machine down with it.)
/// A program an agent puts in OpenCode's place (ending it): it answers every request with a
/// body of `argv[3]` repeated `argv[4]` times between `argv[2]` and `argv[5]`, sent in chunks.
const HUGE_AGENT: &str = r#"
import os, socket, sys, threading, time
head, unit, times, tail = sys.argv[2].encode(), sys.argv[3].encode(), int(sys.argv[4]), sys.argv[5].encode()
def serve(c):
    try:
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        per = 65536 // len(unit)
        chunks = [head] + [unit * min(per, times - i) for i in range(0, times, per)] + [tail]
        for chunk in filter(None, chunks):
            c.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        c.sendall(b"0\r\n\r\n")
        c.close()
    except OSError:
        pass
os.kill(int(sys.argv[1]), 9)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
for _ in range(5000):
    try:
        s.bind(("127.0.0.1", 4096))
        break
    except OSError:
        time.sleep(0.001)
s.listen(64)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// An agent that puts a program of its own on OpenCode's port, answering every question of its
/// session with a huge body: the Worker reads at most 16 MiB of it (it would otherwise read all
/// there is into the session's sandbox object, whatever its size) and the run fails saying why.
/// Its messages, read pruned, are this body's 20 MiB string dropped (`[{}]`); the session's
/// status, read whole, is refused.
#[tokio::test]
async fn an_agent_answering_with_a_huge_body_fails_its_run_and_no_more() {
    // A string of 20 MiB of `0,`.
    let message = agent_answering("huge-answer", [r#"[{"x":""#, "0,", "10485760", r#""}]"#]).await;
    assert!(message.contains("answered more than 16 MiB"), "{message}");
}

/// Messages are read pruned as they stream in (only what is kept is held), so more of them is
/// read than 16 MiB — but not without end: an answer of 300 MiB, all of it dropped, is refused
/// at 256 MiB.
#[tokio::test]
async fn an_agent_answering_with_an_endless_conversation_fails_its_run_and_no_more() {
    let unit = "0123456789abcdef";
    let times = (300 << 20) / unit.len();
    let body = [r#"[{"x":""#, unit, &times.to_string(), r#""}]"#];
    let message = agent_answering("endless-answer", body).await;
    assert!(message.contains("answered more than 256 MiB"), "{message}");
}

/// What is kept of pruned messages is held to 16 MiB: 20 MiB of numbers where the session
/// keeps scalars (a message's place) is refused.
#[tokio::test]
async fn an_agent_answering_with_more_than_is_kept_fails_its_run_and_no_more() {
    let message = agent_answering("kept-answer", ["[", "0,", "10485760", "0]"]).await;
    assert!(
        message.contains("what handoff reads of the answer on sandbox port 4096 is over 16 MiB"),
        "{message}"
    );
}

/// The same with an answer under 16 MiB made of small values: parsed into a tree, 15 MiB of
/// `{"a":0},` takes about 900 MB of the Worker's memory (on Cloudflare, over the 128 MB its
/// isolate has); the session reckons what the tree would take and refuses it unparsed.
#[tokio::test]
async fn an_agent_answering_with_too_many_values_fails_its_run_and_no_more() {
    let stack = handoff_tests::stack::shared();
    let http = reqwest::Client::new();
    let heap_before = stack.worker.wasm_heap_mib(&http).await;
    let message = agent_answering("dense-answer", ["[", r#"{"a":0},"#, "1966080", "{}]"]).await;
    assert!(
        message.contains("more than the 64.0 MiB allowed"),
        "{message}"
    );
    // The Worker's memory (a high-water mark, shared by its objects here) grew by what reading
    // the text takes, not by the tree (tests beside this one add to it, too).
    let heap_after = stack.worker.wasm_heap_mib(&http).await;
    println!("wasm heap: {heap_before:.0} MiB before, {heap_after:.0} MiB after");
    assert!(
        heap_after - heap_before < 400.0,
        "the Worker's heap grew from {heap_before:.0} to {heap_after:.0} MiB"
    );
}

/// Starts a run whose agent, once working, is replaced by [`HUGE_AGENT`] answering with
/// `body` (head, unit, times, tail); the message the run failed with. The sandbox goes on.
/// Between OpenCode's end and the program's taking its port, the session may see the port
/// closed and start OpenCode again, which then cannot listen (the program took the port): the
/// answer was never read, so the attack is made again, on a new session.
async fn agent_answering(name: &str, body: [&str; 4]) -> String {
    for _ in 0..3 {
        let message = attempt_answering(name, body).await;
        if !message.contains("starting the stopped agent again") {
            return message;
        }
        println!("the session restarted its agent before the program had its port: again");
    }
    panic!("the program never got OpenCode's port before the session restarted OpenCode");
}

async fn attempt_answering(name: &str, body: [&str; 4]) -> String {
    use handoff_tests::runs::{agent_pids, repo_name, status, terminal};
    let stack = handoff_tests::stack::shared();
    let mcp = handoff_tests::Mcp::connect(&stack.url()).await;
    let repository = stack.broken_repo(&repo_name(name));
    let out = mcp
        .call_ok(
            "opencode_run_task",
            json!({"task": "Wait for the model. [scenario:slow]", "repository": repository}),
        )
        .await;
    let run = out["runId"].as_str().unwrap().to_string();
    let sandbox = format!(
        "sbx_{}",
        out["sessionId"]
            .as_str()
            .unwrap()
            .trim_start_matches("ses_")
    );
    // The agent is working: its model call is under way.
    let working = mcp
        .wait_run(&run, Duration::from_secs(120), |r| {
            r["progress"]["phase"] == "working" || terminal(r)
        })
        .await;
    assert_eq!(status(&working), "running", "{working:#}");
    let pids = agent_pids(&mcp, &sandbox).await;
    if pids.len() != 1 {
        // What ran in the sandbox and what the run went through, to tell how a second agent
        // came to be.
        let ps = mcp
            .call_ok(
                "sandbox_exec",
                json!({"sandboxId": &sandbox, "command": "ps -eo pid,etimes,args"}),
            )
            .await;
        let result = mcp
            .call_ok("opencode_get_result", json!({"runId": &run}))
            .await;
        panic!(
            "{} agents in the sandbox, not one: {pids:?}\n{}\n{result:#}",
            pids.len(),
            ps["stdout"].as_str().unwrap_or_default()
        );
    }
    mcp.call_ok(
        "sandbox_files_write",
        json!({"sandboxId": &sandbox, "path": "endless.py", "content": HUGE_AGENT}),
    )
    .await;
    let quoted = body.map(|arg| format!("'{arg}'")).join(" ");
    let took = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": &sandbox, "command": format!(
                "setsid python3 endless.py {} {quoted} > endless.log 2>&1 < /dev/null & sleep 1; cat endless.log",
                pids[0])}),
        )
        .await;
    assert_eq!(took["stdout"], "listening\n", "{took:#}");
    let replaced = Instant::now();
    let ended = mcp.wait_run(&run, Duration::from_secs(120), terminal).await;
    assert_eq!(status(&ended), "failed", "{ended:#}");
    let message = ended["result"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    println!("failed after {:?}: {message}", replaced.elapsed());
    // The sandbox and the session's other uses go on.
    let listed = mcp
        .call_ok(
            "sandbox_exec",
            json!({"sandboxId": &sandbox, "command": "pkill -f '[e]ndless.py'; echo alive"}),
        )
        .await;
    assert_eq!(listed["stdout"], "alive\n", "{listed:#}");
    message
}
