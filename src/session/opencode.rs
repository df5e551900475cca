//! Talking to OpenCode (`opencode serve`) inside a session's sandbox, through the daemon's port
//! requests. Its messages are read into run progress in `turn.rs`.

use crate::error::{Error, ErrorKind, Result};
use crate::json_cost::kept::{self, Keep};
use crate::json_cost::{self, Refused};
use crate::sandbox::api::port_watch::Watch;
use crate::sandbox::api::{CallPort, PortReply, PortRequest, SandboxClient};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::time::Duration;
use worker::Delay;

/// The port `opencode serve` listens on inside the sandbox.
pub const PORT: u16 = 4096;
/// How long an ordinary call to OpenCode may take to start answering.
const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// What the session reads of OpenCode's messages (`turn.rs`, and whether an answer ended): the
/// rest — tool outputs and metadata, file contents in tool inputs, attachments — is dropped as
/// the sandbox's object reads the answer (`json_cost::pruned`, up to 256 MiB of it) and
/// skipped as what is left is parsed, so a look at a turn of heavy tool calls holds their
/// titles, not their bytes. (The transcript is stored as OpenCode's text, when it is at most
/// 16 MiB.)
pub const MESSAGES: Keep = Keep::Array(&MESSAGE);
const MESSAGE: Keep = Keep::Object(&[("info", INFO), ("parts", Keep::Array(&PART))]);
const INFO: Keep = Keep::Object(&[
    ("role", Keep::Scalar),
    ("time", TIME),
    ("tokens", TOKENS),
    ("cost", Keep::Scalar),
    ("finish", Keep::Scalar),
    ("error", ERROR),
]);
const TIME: Keep = Keep::Object(&[
    ("created", Keep::Scalar),
    ("completed", Keep::Scalar),
    ("start", Keep::Scalar),
    ("end", Keep::Scalar),
]);
const TOKENS: Keep = Keep::Object(&[
    ("input", Keep::Scalar),
    ("output", Keep::Scalar),
    ("reasoning", Keep::Scalar),
    (
        "cache",
        Keep::Object(&[("read", Keep::Scalar), ("write", Keep::Scalar)]),
    ),
]);
const ERROR: Keep = Keep::Object(&[
    ("name", Keep::Scalar),
    ("message", Keep::Scalar),
    (
        "data",
        Keep::Object(&[
            ("message", Keep::Scalar),
            ("isRetryable", Keep::Scalar),
            ("statusCode", Keep::Scalar),
        ]),
    ),
]);
const PART: Keep = Keep::Object(&[
    ("type", Keep::Scalar),
    ("text", Keep::Scalar),
    ("tool", Keep::Scalar),
    (
        "state",
        Keep::Object(&[
            ("status", Keep::Scalar),
            ("title", Keep::Scalar),
            ("time", TIME),
            (
                "input",
                Keep::Object(&[("command", Keep::Scalar), ("filePath", Keep::Scalar)]),
            ),
        ]),
    ),
]);

/// OpenCode serving one directory of a session's sandbox, reached with the session's password.
pub struct Agent {
    pub sandbox: SandboxClient,
    pub password: String,
    pub dir: String,
    /// When set (ms since the epoch), no ask waits beyond it by more than [`LATE_ASK_MS`]: the
    /// look at a run nearing its deadline is not held up by an agent that does not answer.
    pub answer_by: Option<i64>,
}

/// How long an ask may wait past [`Agent::answer_by`], and how long a cancel waits for the
/// agent to take its abort (`stop.rs`): an agent that has not answered by then is taken as hung.
pub(super) const LATE_ASK_MS: i64 = 3_000;

/// What OpenCode says a session is doing.
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    Idle,
    Busy,
    /// The model call failed and OpenCode is retrying.
    Retry {
        attempt: u64,
        message: String,
    },
}

impl Agent {
    async fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<PortReply> {
        self.request_within(method, path, body, REQUEST_TIMEOUT_MS)
            .await
    }

    async fn request_within(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        timeout_ms: u64,
    ) -> Result<PortReply> {
        let request = self.port_request(method, path, body, timeout_ms);
        self.sandbox.call(CallPort { request }).await
    }

    /// `timeout_ms`, cut to what is left until [`Agent::answer_by`] (but at least
    /// [`LATE_ASK_MS`]).
    fn bounded(&self, timeout_ms: u64) -> u64 {
        match self.answer_by {
            Some(by) => {
                let left = (by - crate::time::now_ms()).max(LATE_ASK_MS);
                timeout_ms.min(left as u64)
            }
            None => timeout_ms,
        }
    }

    /// A request to OpenCode about this agent's directory, with the session's password.
    fn port_request(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        timeout_ms: u64,
    ) -> PortRequest {
        let separator = if path.contains('?') { '&' } else { '?' };
        let path = format!(
            "{path}{separator}directory={}",
            crate::http::query_value(&self.dir)
        );
        let auth = B64.encode(format!("opencode:{}", self.password));
        PortRequest {
            port: PORT,
            method: method.to_string(),
            path,
            body: body.map(|b| b.to_string()),
            authorization: Some(format!("Basic {auth}")),
            timeout_ms: Some(self.bounded(timeout_ms)),
            watch: None,
            keep: None,
        }
    }

    /// Watches OpenCode's events for at most `within_ms` for `session` going idle (its turn
    /// over); whether it did. A turn that ended just before the watch began is not seen: the
    /// caller looks again after the wait either way.
    pub async fn watch_for_idle(&self, session: &str, within_ms: u64) -> Result<bool> {
        let mut request = self.port_request("GET", "/event", None, REQUEST_TIMEOUT_MS);
        request.watch = Some(Watch {
            text: format!(r#""type":"session.idle","properties":{{"sessionID":"{session}"}}"#),
            within_ms: self.bounded(within_ms),
        });
        let reply = self.sandbox.call(CallPort { request }).await?;
        Ok(reply.seen)
    }

    async fn json(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        self.json_kept(method, path, body, None).await
    }

    /// [`Agent::json`], keeping only what `keep` names of the answer (all when `None`).
    async fn json_kept(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        keep: Option<&Keep>,
    ) -> Result<Value> {
        // The answer is pruned as the sandbox's object reads it, so what is kept is bounded,
        // not the whole (a conversation's tool outputs and file contents can be far larger).
        let mut request = self.port_request(method, path, body, REQUEST_TIMEOUT_MS);
        request.keep = keep.map(Keep::skeleton);
        let reply = self.sandbox.call(CallPort { request }).await?;
        if !(200..300).contains(&reply.status) {
            return Err(Error::internal(format!(
                "the agent answered {method} {path} with HTTP {}: {}",
                reply.status,
                truncate(&reply.body, 300)
            )));
        }
        if reply.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        let text = reply.body.as_bytes();
        match keep {
            Some(keep) => kept::parse(text, keep, json_cost::TREE_MAX),
            None => json_cost::parse(text, json_cost::TREE_MAX),
        }
        .map_err(|e| {
            let what = match e {
                Refused::TooLarge { .. } => "cannot be read",
                Refused::Invalid(_) => "is not JSON",
            };
            Error::internal(format!("the agent's answer to {path} {what}: {e}"))
        })
    }

    /// Whether OpenCode answers its health check within `within_ms`. It accepts connections
    /// before it is ready and never answers those, so a try must not wait long.
    pub async fn healthy(&self, within_ms: u64) -> bool {
        matches!(
            self.request_within("GET", "/global/health", None, within_ms).await,
            Ok(r) if r.status == 200
        )
    }

    pub async fn session_exists(&self, id: &str) -> Result<bool> {
        let reply = self.request("GET", &format!("/session/{id}"), None).await?;
        Ok(reply.status == 200)
    }

    pub async fn create_session(&self, title: &str) -> Result<String> {
        let session = self
            .json("POST", "/session", Some(json!({"title": title})))
            .await?;
        session["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::internal("the agent created a session without an id"))
    }

    /// Sends a prompt; `tools` (name → allowed) limits the session's tools from here on.
    pub async fn prompt(
        &self,
        session: &str,
        text: &str,
        provider: &str,
        model: &str,
        tools: Option<&Value>,
    ) -> Result<()> {
        let mut body = json!({
            "parts": [{"type": "text", "text": text}],
            "model": {"providerID": provider, "modelID": model},
        });
        if let Some(tools) = tools {
            body["tools"] = tools.clone();
        }
        self.json(
            "POST",
            &format!("/session/{session}/prompt_async"),
            Some(body),
        )
        .await
        .map(|_| ())
    }

    pub async fn activity(&self, session: &str) -> Result<Activity> {
        let statuses = self.json("GET", "/session/status", None).await?;
        let status = &statuses[session];
        Ok(match status["type"].as_str() {
            Some("busy") => Activity::Busy,
            Some("retry") => Activity::Retry {
                attempt: status["attempt"].as_u64().unwrap_or(0),
                message: status["message"].as_str().unwrap_or_default().to_string(),
            },
            _ => Activity::Idle,
        })
    }

    /// Waits (at most `max_ms`) until `session` is idle and its latest answer is marked ended,
    /// as it is once an abort has been written down; whether it got there.
    pub async fn settle(&self, session: &str, max_ms: i64) -> bool {
        let deadline = crate::time::now_ms() + max_ms;
        loop {
            let idle = matches!(self.activity(session).await, Ok(Activity::Idle));
            let ended = match self.messages(session, Some(1)).await {
                Ok(messages) => messages.last().is_none_or(|m| {
                    !m["info"]["time"]["completed"].is_null() || m["info"]["role"] != "assistant"
                }),
                Err(_) => return false,
            };
            if idle && ended {
                return true;
            }
            if crate::time::now_ms() >= deadline {
                return false;
            }
            Delay::from(Duration::from_millis(200)).await;
        }
    }

    /// The latest `limit` messages (all when `None`), oldest first, with only what the session
    /// reads of them ([`MESSAGES`]).
    pub async fn messages(&self, session: &str, limit: Option<u32>) -> Result<Vec<Value>> {
        let path = messages_path(session, limit);
        match self.json_kept("GET", &path, None, Some(&MESSAGES)).await? {
            Value::Array(messages) => Ok(messages),
            _ => Ok(Vec::new()),
        }
    }

    /// The whole conversation as OpenCode returns it, for the transcript, and whether it is
    /// abridged: when the whole is more than one read holds (16 MiB), it is read again pruned to
    /// [`abridged`]'s parts. An agent that cannot be reached (nothing on its port, no answer in
    /// time) is not asked again.
    pub async fn transcript(&self, session: &str) -> Result<(String, bool)> {
        let path = messages_path(session, None);
        let mut whole = true;
        let reply = match self.request("GET", &path, None).await {
            Ok(reply) => reply,
            Err(e) if e.kind != ErrorKind::Internal => return Err(e),
            Err(_) => {
                let mut request = self.port_request("GET", &path, None, REQUEST_TIMEOUT_MS);
                request.keep = Some(abridged());
                whole = false;
                self.sandbox.call(CallPort { request }).await.map_err(|e| {
                    let why = format!("it is over 16 MiB, and abridged it could not be read: {e}");
                    Error::new(e.kind, why)
                })?
            }
        };
        if reply.status != 200 {
            return Err(Error::internal(format!(
                "transcript: HTTP {}",
                reply.status
            )));
        }
        Ok((reply.body, !whole))
    }

    pub async fn delete_session(&self, session: &str) -> Result<()> {
        self.json("DELETE", &format!("/session/{session}"), None)
            .await
            .map(|_| ())
    }

    pub async fn abort(&self, session: &str) -> Result<()> {
        self.request("POST", &format!("/session/{session}/abort"), None)
            .await
            .map(|_| ())
    }
}

/// What an abridged transcript keeps of each message: what the conversation page shows (texts,
/// reasoning, tool calls with their titles, statuses, times, outputs and errors) and of tool
/// inputs the command and the paths. Left out: file contents in inputs (a write's, an edit's),
/// tool metadata (diffs of whole files), attachments and the file diffs of a message's summary.
fn abridged() -> Value {
    let input = json!({"command": null, "description": null, "filePath": null, "path": null,
        "pattern": null, "url": null});
    let state = json!({"status": null, "title": null, "output": null, "error": true,
        "time": true, "input": input});
    let part = json!({"id": null, "type": null, "text": null, "tool": null, "callID": null,
        "state": state});
    let info = json!({"id": null, "sessionID": null, "role": null, "time": true, "tokens": true,
        "cost": null, "finish": null, "error": true, "modelID": null, "providerID": null,
        "mode": null, "agent": null, "parentID": null});
    json!([{"info": info, "parts": [part]}])
}

fn messages_path(session: &str, limit: Option<u32>) -> String {
    match limit {
        Some(n) => format!("/session/{session}/message?limit={n}"),
        None => format!("/session/{session}/message"),
    }
}

pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}
