//! The sandbox daemon's own HTTP API, for the parts the MCP tools do not reach yet: per-sandbox
//! authentication, streaming exec, background processes, malformed requests.

use handoff_tests::daemon::Daemon;
use handoff_tests::links::daemon_token;
use handoff_tests::mcp::read;
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;

use handoff_tests::daemon::Client;

pub(crate) fn daemon() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| {
        let d = Daemon::start();
        handoff_tests::worker::stop_daemon_at_exit(&d);
        d
    })
}

#[tokio::test]
async fn every_route_but_health_needs_a_token_for_that_sandbox() {
    let a = Client::new(daemon(), "auth-a").await;
    let _b = Client::new(daemon(), "auth-b").await;
    let health = read(
        reqwest::get(format!("{}/v1/health", daemon().url()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(health.status, 200);
    assert_eq!(health.json()["isolation"]["level"], "namespaces");
    let http = reqwest::Client::new();
    let url = format!("{}/v1/sandboxes/auth-b/files/list", daemon().url());
    let none = read(http.get(&url).send().await.unwrap()).await;
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["code"], "unauthorized");
    let wrong_sandbox = read(http.get(&url).bearer_auth(&a.token).send().await.unwrap()).await;
    assert_eq!(wrong_sandbox.status, 401, "a token for A does not open B");
    let expired = read(
        http.get(&url)
            .bearer_auth(daemon_token("auth-b", -60))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(expired.status, 401);
    let ok = read(
        http.get(&url)
            .bearer_auth(daemon_token("auth-b", 60))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let _ = a.id;
}

#[tokio::test]
async fn malformed_requests_get_the_daemons_json_errors() {
    let c = Client::new(daemon(), "malformed").await;
    let bad_json = read(
        c.http
            .post(format!("{}/exec", c.base))
            .bearer_auth(&c.token)
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bad_json.status, 400);
    assert_eq!(bad_json.json()["code"], "bad_request");
    let missing = c
        .send(
            reqwest::Method::POST,
            "/exec",
            Some(json!({"command": "true"})),
        )
        .await;
    assert_eq!(
        missing.status, 400,
        "timeout_ms is required: {}",
        missing.body
    );
    let bad_id = read(
        reqwest::Client::new()
            .put(format!("{}/v1/sandboxes/BAD..ID", daemon().url()))
            .bearer_auth(daemon_token("BAD..ID", 60))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bad_id.status, 400, "{}", bad_id.body);
    let unknown = c.send(reqwest::Method::GET, "/nope", None).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], "not_found");
    let no_path = c.send(reqwest::Method::GET, "/files", None).await;
    assert_eq!(no_path.status, 400);
    assert!(no_path.body.contains("path"));
}

#[tokio::test]
async fn streaming_exec_sends_output_as_it_comes_then_the_exit() {
    let c = Client::new(daemon(), "stream").await;
    let response = c
        .http
        .post(format!("{}/exec/stream", c.base))
        .bearer_auth(&c.token)
        .body(
            json!({"command": "echo one; sleep 0.5; echo two >&2; exit 3", "timeout_ms": 10000})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let started = std::time::Instant::now();
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut first_at = None;
    use futures::StreamExt;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        if first_at.is_none() {
            first_at = Some(started.elapsed());
        }
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events.first().unwrap(),
        &json!({"type": "stdout", "data": "one\n"})
    );
    assert!(events.contains(&json!({"type": "stderr", "data": "two\n"})));
    let exit = events.last().unwrap();
    assert_eq!(exit["type"], "exit");
    assert_eq!(exit["exit_code"], 3);
    assert!(
        first_at.unwrap() < Duration::from_millis(450),
        "output arrives before the command ends"
    );
}

#[tokio::test]
async fn background_processes_start_list_log_and_die() {
    let c = Client::new(daemon(), "procs").await;
    let started = c
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "echo started; echo oops >&2; exec sleep 60"})),
        )
        .await;
    assert_eq!(started.status, 200, "{}", started.body);
    let id = started.json()["id"].as_u64().unwrap();
    let logs = settled(&c, &format!("/processes/{id}/logs"), |logs| {
        logs["stdout"] == "started\n" && logs["stderr"] == "oops\n"
    })
    .await;
    let listed = c
        .send(reqwest::Method::GET, "/processes", None)
        .await
        .json();
    assert_eq!(listed["processes"][0]["running"], true);
    assert_eq!(
        (logs["stdout"].as_str(), logs["stderr"].as_str()),
        (Some("started\n"), Some("oops\n"))
    );
    let killed = c
        .send(reqwest::Method::DELETE, &format!("/processes/{id}"), None)
        .await
        .json();
    assert_eq!(killed["running"], false, "{killed}");
    let ps = c
        .send(
            reqwest::Method::POST,
            "/exec",
            Some(
                json!({"command": "ps -eo args | grep -c '^sleep 60' || true", "timeout_ms": 5000}),
            ),
        )
        .await
        .json();
    assert_eq!(ps["stdout"].as_str().unwrap().trim(), "0");
    let unknown = c
        .send(reqwest::Method::GET, "/processes/999/logs", None)
        .await;
    assert_eq!(unknown.status, 404);
    // Stopping the sandbox ends every process; the files stay.
    c.send(
        reqwest::Method::POST,
        "/processes",
        Some(json!({"command": "echo x > kept.txt; exec sleep 60"})),
    )
    .await;
    settled(&c, "/files?path=kept.txt", |read| read["content"] == "x\n").await;
    let stopped = c.send(reqwest::Method::POST, "/stop", None).await.json();
    assert_eq!(stopped["status"], "stopped");
    assert_eq!(stopped["processes"], 0);
    let kept = c
        .send(reqwest::Method::GET, "/files?path=kept.txt", None)
        .await
        .json();
    assert_eq!(kept["content"], "x\n");
}

/// What the daemon answers on `path` once `done` holds of it, read every 100 ms for up to 10 s
/// (the last answer when it never does: the caller's assertions then say what was wrong).
async fn settled(c: &Client, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = c.send(reqwest::Method::GET, path, None).await.json();
        if done(&answer) || tokio::time::Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A file of the sandbox's workspace, as the daemon reads it ("" when it is not there).
async fn workspace_file(c: &Client, path: &str) -> String {
    let read = c
        .send(reqwest::Method::GET, &format!("/files?path={path}"), None)
        .await;
    read.json()["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_frozen_process_makes_no_progress_until_thawed_and_dies_cleanly_when_killed() {
    let c = Client::new(daemon(), "freeze").await;
    // Counts ten times a second; on SIGTERM it writes its goodbye and leaves.
    let script = "trap 'echo bye > bye.txt; exit 0' TERM; i=0; \
        while :; do i=$((i+1)); echo $i > count.txt; sleep 0.1; done";
    let started = c
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": script})),
        )
        .await;
    assert_eq!(started.status, 200, "{}", started.body);
    let id = started.json()["id"].as_u64().unwrap();
    assert_eq!(started.json()["frozen"], false);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let post = |action: &str| format!("/processes/{id}/{action}");
    let anonymous = c.http.post(format!("{}{}", c.base, post("freeze")));
    let anonymous = read(anonymous.send().await.unwrap()).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);

    let frozen = c.send(reqwest::Method::POST, &post("freeze"), None).await;
    assert_eq!(frozen.status, 200, "{}", frozen.body);
    assert_eq!(
        (&frozen.json()["running"], &frozen.json()["frozen"]),
        (&json!(true), &json!(true))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_freeze = workspace_file(&c, "count.txt").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        workspace_file(&c, "count.txt").await,
        at_freeze,
        "a frozen process counted on"
    );
    let listed = c
        .send(reqwest::Method::GET, "/processes", None)
        .await
        .json();
    let shown = listed["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .cloned()
        .unwrap();
    assert_eq!(shown["frozen"], true, "{listed}");

    let thawed = c.send(reqwest::Method::POST, &post("thaw"), None).await;
    assert_eq!(thawed.status, 200, "{}", thawed.body);
    assert_eq!(thawed.json()["frozen"], false);
    // The file may be caught between its truncation and its write (frozen or not): "" counts 0.
    let counted = |text: String| text.trim().parse::<u64>().unwrap_or(0);
    let before = counted(at_freeze);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut after_thaw = before;
    while after_thaw <= before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        after_thaw = counted(workspace_file(&c, "count.txt").await);
    }
    assert!(
        after_thaw > before,
        "a thawed process counts on (still {after_thaw} 10 s after the thaw)"
    );

    // Killed while frozen, it is continued so it can act on SIGTERM (not SIGKILLed after 2 s).
    c.send(reqwest::Method::POST, &post("freeze"), None).await;
    let killed = c
        .send(reqwest::Method::DELETE, &format!("/processes/{id}"), None)
        .await
        .json();
    assert_eq!(
        (&killed["running"], &killed["frozen"]),
        (&json!(false), &json!(false)),
        "{killed}"
    );
    assert_eq!(workspace_file(&c, "bye.txt").await, "bye\n");

    let ended = c.send(reqwest::Method::POST, &post("freeze"), None).await;
    assert_eq!(ended.status, 409, "{}", ended.body);
    assert!(ended.body.contains("not running"), "{}", ended.body);
    let thaw_ended = c.send(reqwest::Method::POST, &post("thaw"), None).await;
    assert_eq!(thaw_ended.status, 200, "{}", thaw_ended.body);
    assert_eq!(thaw_ended.json()["running"], false);
    let unknown = c
        .send(reqwest::Method::POST, "/processes/999/freeze", None)
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
}

#[tokio::test]
async fn a_port_nothing_listens_on_answers_with_a_typed_code() {
    let sandbox = Client::new(daemon(), "port-closed").await;
    let closed = sandbox
        .send(reqwest::Method::GET, "/ports/5999/http/", None)
        .await;
    assert_eq!(closed.status, 400, "{}", closed.body);
    // The Worker tells "the agent stopped" from this code, never from the message's wording.
    assert_eq!(closed.json()["code"], "port_closed", "{}", closed.body);
    assert!(
        closed.json()["message"]
            .as_str()
            .unwrap_or_default()
            .contains("start a server there first"),
        "{}",
        closed.body
    );
}

/// A client for sandbox `id` on `daemon` that has not created it.
pub(crate) fn client_for(daemon: &Daemon, id: &str) -> Client {
    Client {
        http: reqwest::Client::new(),
        base: format!("{}/v1/sandboxes/{id}", daemon.url()),
        id: id.to_string(),
        token: daemon_token(id, 300),
    }
}

/// A program on a sandbox port that dresses its answer as the daemon's own error (the marker
/// header and an error body): the Worker would take a forged `unauthorized` for its daemon
/// secret being wrong, a forged `not_found` for the sandbox being gone. The daemon passes the
/// answer on without the marker, so it stays the program's answer.
#[tokio::test]
async fn a_program_on_a_port_cannot_pass_its_answer_off_as_the_daemons_error() {
    let sandbox = Client::new(daemon(), "forged-error").await;
    let server = r#"
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"code":"unauthorized","message":"forged"}'
        self.send_response(401)
        self.send_header("X-Handoff-Daemon", "error")
        self.send_header("x-handoff-daemon", "error")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 5997), H).serve_forever()
"#;
    sandbox
        .exec(&format!("cat > forge.py <<'EOF'\n{server}\nEOF"), 5000)
        .await;
    let started = sandbox
        .send(
            reqwest::Method::POST,
            "/processes",
            Some(json!({"command": "exec python3 forge.py"})),
        )
        .await;
    assert_eq!(started.status, 200, "{}", started.body);
    let mut answer = None;
    for _ in 0..100 {
        let got = sandbox
            .send(reqwest::Method::GET, "/ports/5997/http/", None)
            .await;
        if !got.body.contains("port_closed") {
            answer = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let answer = answer.expect("the program never listened on port 5997");
    // The program's answer arrives as it sent it, minus the marker.
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (401, r#"{"code":"unauthorized","message":"forged"}"#)
    );
    assert!(
        answer.headers.get("x-handoff-daemon").is_none(),
        "the daemon passed on a program's claim to be its error: {:?}",
        answer.headers
    );
    // The daemon's own errors still carry it.
    let closed = sandbox
        .send(reqwest::Method::GET, "/ports/5996/http/", None)
        .await;
    assert_eq!(
        closed.headers.get("x-handoff-daemon").map(|v| v.as_bytes()),
        Some(&b"error"[..]),
        "{:?}",
        closed.headers
    );
}

#[tokio::test]
async fn a_sandbox_created_with_start_is_running_before_its_first_command() {
    let started = client_for(daemon(), "start-at-once");
    let created = started
        .send(reqwest::Method::PUT, "?start=1", Some(json!({})))
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let mut status = Value::Null;
    for _ in 0..100 {
        status = started.send(reqwest::Method::GET, "", None).await.json()["status"].clone();
        if status == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "running", "started without any command");
    // Anything but 0 or 1 is refused, not read as "no" (and makes no sandbox).
    let unclear = client_for(daemon(), "start-unclear");
    let refused = unclear
        .send(reqwest::Method::PUT, "?start=yes", Some(json!({})))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains("start must be 0 or 1"),
        "{}",
        refused.body
    );
    assert_eq!(
        unclear.send(reqwest::Method::GET, "", None).await.status,
        404
    );
    // Without `start`, a sandbox starts under its first command, as before.
    let lazy = Client::new(daemon(), "start-lazily").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let state = lazy.send(reqwest::Method::GET, "", None).await.json();
    assert_eq!(state["status"], "stopped", "{state}");
    assert_eq!(lazy.exec("true", 10_000).await["exit_code"], 0);
    assert_eq!(
        lazy.send(reqwest::Method::GET, "", None).await.json()["status"],
        "running"
    );
}

#[test]
fn two_daemons_never_share_host_users_or_a_root_and_a_killed_ones_are_free_again() {
    use handoff_tests::daemon::refusal;
    const BASE: &str = "2900000";
    let mut first = Daemon::start_with(&["--isolation", "namespaces", "--uid-base", BASE]);
    let said = refusal(&["--isolation", "namespaces", "--uid-base", BASE]);
    assert!(
        said.contains("another handoff-sandboxd on this host already gives its sandboxes the host users from 2900000")
            && said.contains("--uid-base"),
        "{said}"
    );
    // Nor a root, whatever their users.
    let root = first.sandboxes().display().to_string();
    let said = refusal(&[
        "--isolation",
        "namespaces",
        "--uid-base",
        "2900700",
        "--root",
        &root,
    ]);
    assert!(
        said.contains(&format!(
            "another handoff-sandboxd already serves the sandboxes in {root}"
        )) && said.contains("--root"),
        "{said}"
    );
    // However the first one ends, its users and its root are free at once.
    first.kill();
    first.restart();
    // Another base beside it is fine.
    let _beside = Daemon::start_with(&["--isolation", "namespaces", "--uid-base", "2900500"]);
}
