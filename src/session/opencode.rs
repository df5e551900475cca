//! Talking to OpenCode (`opencode serve`) inside a session's sandbox, through the daemon's port
//! requests, and reading its messages into run progress.

use crate::error::{Error, Result};
use crate::runs::{ProgressDetail, Step};
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
/// Recent steps kept in a run's progress.
const RECENT_STEPS: usize = 20;

/// OpenCode serving one directory of a session's sandbox, reached with the session's password.
pub struct Agent {
    pub sandbox: SandboxClient,
    pub password: String,
    pub dir: String,
}

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
        let separator = if path.contains('?') { '&' } else { '?' };
        let path = format!(
            "{path}{separator}directory={}",
            crate::http::query_value(&self.dir)
        );
        let auth = B64.encode(format!("opencode:{}", self.password));
        let request = PortRequest {
            port: PORT,
            method: method.to_string(),
            path,
            body: body.map(|b| b.to_string()),
            authorization: Some(format!("Basic {auth}")),
            timeout_ms: Some(timeout_ms),
        };
        self.sandbox.call(CallPort { request }).await
    }

    async fn json(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let reply = self.request(method, path, body).await?;
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
        serde_json::from_str(&reply.body)
            .map_err(|e| Error::internal(format!("the agent's answer to {path} is not JSON: {e}")))
    }

    /// Whether OpenCode answers its health check. It accepts connections before it is ready and
    /// may then never answer, so each try is short.
    pub async fn healthy(&self) -> bool {
        matches!(
            self.request_within("GET", "/global/health", None, 1000).await,
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
    /// as it is once an abort has been written down.
    pub async fn settle(&self, session: &str, max_ms: i64) {
        let deadline = crate::time::now_ms() + max_ms;
        while crate::time::now_ms() < deadline {
            let idle = matches!(self.activity(session).await, Ok(Activity::Idle));
            let ended = match self.messages(session, Some(1)).await {
                Ok(messages) => messages.last().is_none_or(|m| {
                    !m["info"]["time"]["completed"].is_null() || m["info"]["role"] != "assistant"
                }),
                Err(_) => return,
            };
            if idle && ended {
                return;
            }
            Delay::from(Duration::from_millis(200)).await;
        }
    }

    /// The latest `limit` messages (all when `None`), oldest first.
    pub async fn messages(&self, session: &str, limit: Option<u32>) -> Result<Vec<Value>> {
        let path = match limit {
            Some(n) => format!("/session/{session}/message?limit={n}"),
            None => format!("/session/{session}/message"),
        };
        let value = self.json("GET", &path, None).await?;
        Ok(value.as_array().cloned().unwrap_or_default())
    }

    /// The whole conversation as OpenCode returns it, for the transcript.
    pub async fn transcript(&self, session: &str) -> Result<String> {
        let reply = self
            .request("GET", &format!("/session/{session}/message"), None)
            .await?;
        if reply.status != 200 {
            return Err(Error::internal(format!(
                "transcript: HTTP {}",
                reply.status
            )));
        }
        Ok(reply.body)
    }

    pub async fn abort(&self, session: &str) -> Result<()> {
        self.request("POST", &format!("/session/{session}/abort"), None)
            .await
            .map(|_| ())
    }
}

/// A run's turn of the conversation, read from the agent's messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The prompt was found among the messages.
    pub prompted: bool,
    /// At least one answer to it has started.
    pub answered: bool,
    /// The latest answer is complete and does not wait for tool results: the agent's turn is
    /// over. (An answer exists as soon as a step starts, before its model call returns.)
    pub settled: bool,
    pub detail: ProgressDetail,
    /// The text of the latest answer (the agent's summary once it is done).
    pub last_text: Option<String>,
    /// The error of the latest answer, e.g. the provider's after retries ran out.
    pub error: Option<String>,
    /// That error is the provider's passing trouble (429, 408, 5xx, or marked retryable).
    pub retryable: bool,
}

/// Reads the messages that follow the prompt carrying `marker`.
pub fn read_turn(messages: &[Value], marker: &str) -> Turn {
    let text_of = |m: &Value| -> String {
        m["parts"]
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    let mut turn = Turn::default();
    let Some(start) = messages
        .iter()
        .rposition(|m| m["info"]["role"] == "user" && text_of(m).contains(marker))
    else {
        return turn;
    };
    turn.prompted = true;
    let mut steps = Vec::new();
    for message in messages[start + 1..]
        .iter()
        .filter(|m| m["info"]["role"] == "assistant")
    {
        turn.answered = true;
        let info = &message["info"];
        let tokens = &info["tokens"];
        let add = |total: &mut u64, v: &Value| *total += v.as_u64().unwrap_or(0);
        let t = &mut turn.detail.tokens;
        add(&mut t.input, &tokens["input"]);
        add(&mut t.output, &tokens["output"]);
        add(&mut t.reasoning, &tokens["reasoning"]);
        add(&mut t.cache_read, &tokens["cache"]["read"]);
        add(&mut t.cache_write, &tokens["cache"]["write"]);
        turn.detail.cost_usd += info["cost"].as_f64().unwrap_or(0.0);
        steps.extend(steps_of(message));
        let text = text_of(message);
        if !text.trim().is_empty() {
            turn.last_text = Some(text);
        }
        turn.error = error_message(&info["error"]);
        turn.retryable = turn.error.is_some() && is_passing(&info["error"]);
        let complete = !info["time"]["completed"].is_null();
        turn.settled = complete && (info["finish"] != "tool-calls" || turn.error.is_some());
    }
    turn.detail.steps = steps.len() as u32;
    turn.detail.current_tool = steps
        .iter()
        .rev()
        .find(|s| s.status == "running" || s.status == "pending")
        .map(|s| s.tool.clone());
    let skip = steps.len().saturating_sub(RECENT_STEPS);
    turn.detail.recent = steps.into_iter().skip(skip).collect();
    turn
}

/// Whether a message error is the provider's passing trouble: rate limited, overloaded, down.
fn is_passing(error: &Value) -> bool {
    let data = &error["data"];
    data["isRetryable"] == true
        || data["statusCode"]
            .as_u64()
            .is_some_and(|s| s == 408 || s == 429 || (500..600).contains(&s))
}

/// The readable message of an OpenCode message error (`{name, data: {message}}`), if any.
fn error_message(error: &Value) -> Option<String> {
    if error.is_null() {
        return None;
    }
    let name = error["name"].as_str().unwrap_or("error");
    let message = error["data"]["message"]
        .as_str()
        .or_else(|| error["message"].as_str())
        .unwrap_or("no details");
    Some(format!("{name}: {message}"))
}

/// The tool calls of one assistant message, in order.
pub fn steps_of(message: &Value) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in message["parts"].as_array().into_iter().flatten() {
        if part["type"] == "tool" {
            let state = &part["state"];
            let title = crate::transcript::step_title(state);
            steps.push(Step {
                tool: part["tool"].as_str().unwrap_or("tool").to_string(),
                title: truncate(&title, 200),
                duration_ms: crate::transcript::duration_ms(state),
                status: state["status"].as_str().unwrap_or("pending").to_string(),
            });
        }
    }
    steps
}

pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: &str, parts: Value, info: Value) -> Value {
        let mut info = info;
        info["role"] = json!(role);
        json!({"info": info, "parts": parts})
    }

    #[test]
    fn a_turn_counts_steps_tokens_cost_and_finds_the_summary() {
        let messages = vec![
            message(
                "user",
                json!([{"type": "text", "text": "old task [handoff:run_a]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([{"type": "tool", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"}}}]),
                json!({"tokens": {"input": 999}}),
            ),
            message(
                "user",
                json!([{"type": "text", "text": "task [handoff:run_b]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([
                    {"type": "tool", "tool": "bash", "state": {"status": "completed", "title": "sh test.sh"}},
                    {"type": "tool", "tool": "edit", "state": {"status": "running", "input": {"filePath": "/a.rs"}}}
                ]),
                json!({"tokens": {"input": 100, "output": 20, "reasoning": 0, "cache": {"read": 5, "write": 1}}, "cost": 0.25}),
            ),
            message(
                "assistant",
                json!([{"type": "text", "text": "Fixed it."}]),
                json!({"tokens": {"input": 10, "output": 2}, "cost": 0.05}),
            ),
        ];
        let turn = read_turn(&messages, "[handoff:run_b]");
        assert!(turn.prompted && turn.answered);
        assert_eq!(turn.detail.steps, 2);
        assert_eq!(turn.detail.current_tool.as_deref(), Some("edit"));
        assert_eq!(turn.detail.tokens.input, 110);
        assert_eq!(turn.detail.tokens.cache_read, 5);
        assert!((turn.detail.cost_usd - 0.30).abs() < 1e-9);
        assert_eq!(turn.detail.recent[0].title, "sh test.sh");
        assert_eq!(turn.detail.recent[1].title, "/a.rs");
        assert_eq!(turn.last_text.as_deref(), Some("Fixed it."));
        assert_eq!(turn.error, None);
    }

    #[test]
    fn a_turn_is_settled_only_by_a_complete_answer_that_needs_no_tool_results() {
        let prompt = message(
            "user",
            json!([{"type": "text", "text": "task [handoff:run_s]"}]),
            json!({}),
        );
        let answer = |info: Value| message("assistant", json!([]), info);
        let settled = |answers: Vec<Value>| {
            let mut messages = vec![prompt.clone()];
            messages.extend(answers);
            let turn = read_turn(&messages, "[handoff:run_s]");
            (turn.answered, turn.settled)
        };
        // A step has started but its model call has not returned.
        assert_eq!(
            settled(vec![answer(json!({"time": {"created": 1}}))]),
            (true, false)
        );
        // A step that asked for tools: more steps follow.
        let tools = json!({"time": {"created": 1, "completed": 2}, "finish": "tool-calls"});
        assert_eq!(settled(vec![answer(tools.clone())]), (true, false));
        let stop = json!({"time": {"created": 3, "completed": 4}, "finish": "stop"});
        assert_eq!(
            settled(vec![answer(tools.clone()), answer(stop)]),
            (true, true)
        );
        let failed = json!({"time": {"created": 1, "completed": 2}, "finish": "tool-calls",
            "error": {"name": "APIError", "data": {"message": "boom"}}});
        assert_eq!(settled(vec![answer(failed)]), (true, true));
        assert_eq!(settled(vec![]), (false, false));
    }

    #[test]
    fn passing_provider_trouble_is_told_from_the_rest() {
        let error = |data: Value| json!({"name": "APIError", "data": data});
        assert!(is_passing(&error(json!({"statusCode": 529}))));
        assert!(is_passing(&error(json!({"statusCode": 429}))));
        assert!(is_passing(&error(
            json!({"message": "x", "isRetryable": true})
        )));
        assert!(!is_passing(&error(json!({"statusCode": 403}))));
        assert!(!is_passing(&error(
            json!({"statusCode": 400, "isRetryable": false})
        )));
        assert!(!is_passing(
            &json!({"name": "ProviderAuthError", "data": {}})
        ));
    }

    #[test]
    fn provider_errors_and_missing_prompts_are_reported() {
        let messages = vec![
            message(
                "user",
                json!([{"type": "text", "text": "task [handoff:run_c]"}]),
                json!({}),
            ),
            message(
                "assistant",
                json!([]),
                json!({"error": {"name": "APIError", "data": {"message": "scripted provider failure"}}}),
            ),
        ];
        let turn = read_turn(&messages, "[handoff:run_c]");
        assert_eq!(
            turn.error.as_deref(),
            Some("APIError: scripted provider failure")
        );
        assert!(!read_turn(&messages, "[handoff:run_x]").prompted);
    }
}
