//! A receiver of completion callbacks for the tests: it records every delivery (headers and
//! body), checks nothing itself, and answers each with the next status of a script (then 200).

use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The deployment's callback secret in the shared test stack.
pub const CALLBACK_SECRET: &str = "callback-secret-for-tests-0123456789abcdef";

/// One callback as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub delivery: String,
    pub event: String,
    pub signature: String,
    pub body: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("callback body is JSON")
    }

    /// Whether `handoff-signature` is `t=<ts>,v1=<HMAC-SHA256 of "<ts>.<body>">` under `secret`,
    /// with a timestamp within five minutes — what the README tells receivers to check.
    pub fn signed_with(&self, secret: &str) -> bool {
        let mut timestamp = None;
        let mut v1 = None;
        for part in self.signature.split(',') {
            match part.split_once('=') {
                Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
                Some(("v1", v)) => v1 = Some(v.to_string()),
                _ => {}
            }
        }
        let (Some(t), Some(v1)) = (timestamp, v1) else {
            return false;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        let message = format!("{t}.{}", self.body);
        (now - t).abs() < 300 && crate::workers::hmac_hex(secret, message.as_bytes()) == v1
    }
}

pub struct Receiver {
    pub port: u16,
    seen: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// A receiver answering `statuses` in turn, then 200.
    pub fn start(statuses: &[u16]) -> Receiver {
        use axum::body::Bytes;
        use axum::http::{HeaderMap, StatusCode, Uri};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(
            statuses.iter().copied().collect::<VecDeque<_>>(),
        ));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let (log, script) = (log.clone(), script.clone());
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string()
                };
                log.lock().expect("log").push(Received {
                    path: uri.path().to_string(),
                    delivery: header("handoff-delivery"),
                    event: header("handoff-event"),
                    signature: header("handoff-signature"),
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let status = script.lock().expect("script").pop_front().unwrap_or(200);
                StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
            }
        });
        let port = crate::serve_forever(app);
        Receiver { port, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What arrived at `path`.
    pub fn received(&self, path: &str) -> Vec<Received> {
        let seen = self.seen.lock().expect("log");
        seen.iter().filter(|r| r.path == path).cloned().collect()
    }

    /// Waits until `count` callbacks arrived at `path` (or `timeout` passed) and returns them.
    pub async fn wait_for(&self, path: &str, count: usize, timeout: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let got = self.received(path);
            if got.len() >= count || tokio::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
