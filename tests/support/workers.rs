//! Helpers for the background-worker tests: deploying folders, running and following worker
//! runs, signing webhook deliveries, and a local server that records the requests it gets (a
//! worker's side effect).

use crate::Mcp;
use hmac::{KeyInit, Mac};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A unique worker name for a test.
pub fn name(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        crate::runs::repo_name("w").trim_start_matches("w-")
    )
}

/// A folder as `files` for workers_deploy.
pub fn folder(files: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = files
        .iter()
        .map(|(path, text)| (path.to_string(), json!(text)))
        .collect();
    Value::Object(map)
}

impl Mcp {
    /// Deploys a folder; returns the structured output.
    pub async fn deploy(&self, files: &[(&str, &str)]) -> Value {
        self.call_ok("workers_deploy", json!({"files": folder(files)}))
            .await
    }

    /// Starts a run; returns its runId.
    pub async fn run_worker(&self, worker: &str, arguments: Value) -> String {
        let mut args = arguments;
        args["worker"] = json!(worker);
        let out = self.call_ok("workers_run", args).await;
        out["runId"].as_str().expect("runId").to_string()
    }

    pub async fn worker_run(&self, run_id: &str) -> Value {
        self.call_ok("workers_run_get", json!({"runId": run_id}))
            .await
    }

    /// Polls a worker run until `done` holds (at most `timeout`).
    pub async fn wait_worker(
        &self,
        run_id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        self.poll_run("workers_run_get", run_id, timeout, done)
            .await
    }

    /// Waits until the run has ended.
    pub async fn worker_ended(&self, run_id: &str) -> Value {
        self.wait_worker(run_id, Duration::from_secs(120), |r| {
            matches!(
                r["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            )
        })
        .await
    }
}

/// `X-Handoff-Signature` for `body` at `timestamp` under `secret`.
pub fn handoff_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    format!("sha256={}", hmac_hex(secret, &message))
}

/// `X-Hub-Signature-256` (GitHub's form) for `body` under `secret`.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

fn hmac_hex(secret: &str, message: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(message);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A server on the host's loopback that answers every request with 200 and records its method,
/// path and body.
pub struct Recorder {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub fn start() -> Recorder {
        use axum::body::Bytes;
        use axum::http::{Method, Uri};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let log = log.clone();
            async move {
                log.lock().expect("log").push(format!(
                    "{method} {} {}",
                    uri.path(),
                    String::from_utf8_lossy(&body)
                ));
                "ok"
            }
        });
        let port = crate::serve_forever(app);
        Recorder { port, seen }
    }

    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().expect("log").clone()
    }
}
